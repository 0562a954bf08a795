#include "model/config.h"

#include <cmath>

#include "model/config_reader.h"

namespace deepinfer::model {
namespace {

void read_rope(const JsonObject& o, RopeConfig* rope, std::string* error, double max_position,
               bool nested) {
  if (auto it = o.find("rope_theta"); it != o.end()) json_number(it->value(), &rope->theta);
  std::string type = "default";
  for (const char* k : {"rope_type", "type"}) {
    if (auto it = o.find(k); it != o.end() && it->value().is_string()) {
      type = std::string(it->value().as_string());
      break;
    }
  }
  if (type == "yarn") {
    rope->yarn = true;
    ConfigReader r{o, {}};
    rope->factor = r.number({"factor"}, 1.0, true);
    rope->original_max_position =
        r.number({"original_max_position_embeddings"}, max_position, false);
    rope->beta_fast = r.number({"beta_fast"}, 32.0, false);
    rope->beta_slow = r.number({"beta_slow"}, 1.0, false);
    if (auto it = o.find("truncate"); it != o.end() && it->value().is_bool()) {
      rope->truncate = it->value().as_bool();
    }
    // Flat legacy keys: V4 has no YaRN attention scale (HF forces 1.0). Nested HF parameters
    // without attention_factor get HF's YaRN default 0.1·ln(factor) + 1.
    const double fallback = nested && rope->factor > 1 ? 0.1 * std::log(rope->factor) + 1.0 : 1.0;
    rope->attention_factor = r.number({"attention_factor"}, fallback, false);
    if (!(rope->original_max_position > 0) && error->empty()) {
      *error = "rope yarn parameters need original_max_position_embeddings";
    }
    if (!r.error.empty() && error->empty()) *error = "rope yarn parameters: " + r.error;
  } else if (type != "default") {
    if (error->empty()) *error = "config.json: unsupported rope type \"" + type + "\"";
  }
}

}  // namespace

AttentionKind ModelConfig::kind(int layer) const {
  if (ratio(layer) == 0) return AttentionKind::SlidingWindow;
  const size_t i = static_cast<size_t>(layer);
  const bool csa = i < csa_layers.size() ? csa_layers[i] : ratio(layer) == 4;
  return csa ? AttentionKind::Csa : AttentionKind::Hca;
}

Result<ModelConfig> parse_model_config(const Json& json) {
  if (!json.is_object()) return Error{"config.json is not a JSON object"};
  const JsonObject& o = json.as_object();
  // HF transformers nests the text model of multimodal configs; V4 keeps it flat.
  ConfigReader r{o, {}};
  ModelConfig c;
  c.vocab_size = r.integer({"vocab_size"}, 0, true);
  c.hidden_size = r.integer({"hidden_size", "dim"}, 0, true);
  c.num_layers = r.integer({"num_hidden_layers", "n_layers"}, 0, true);
  c.num_mtp_layers = r.integer({"num_nextn_predict_layers", "n_mtp_layers"}, 0, false);
  c.n_heads = r.integer({"num_attention_heads", "n_heads"}, 0, true);
  c.head_dim = r.integer({"head_dim"}, 0, true);
  c.q_lora_rank = r.integer({"q_lora_rank"}, 0, true);
  c.o_lora_rank = r.integer({"o_lora_rank"}, 0, true);
  c.o_groups = r.integer({"o_groups"}, 1, false);
  c.sliding_window = r.integer({"sliding_window", "window_size"}, 0, true);
  c.index_n_heads = r.integer({"index_n_heads"}, 0, false);
  c.index_head_dim = r.integer({"index_head_dim"}, 0, false);
  c.index_topk = r.integer({"index_topk"}, 0, false);
  c.n_routed_experts = r.integer({"n_routed_experts"}, 0, true);
  c.n_shared_experts = r.integer({"n_shared_experts"}, 1, false);
  c.experts_per_token = r.integer({"num_experts_per_tok", "n_activated_experts"}, 0, true);
  c.moe_intermediate = r.integer({"moe_intermediate_size", "moe_inter_dim"}, 0, true);
  c.routed_scaling = r.number({"routed_scaling_factor", "route_scale"}, 1.0, false);
  c.swiglu_limit = r.number({"swiglu_limit"}, 0.0, false);
  c.hc_mult = r.integer({"hc_mult"}, 1, false);
  c.hc_sinkhorn_iters = r.integer({"hc_sinkhorn_iters"}, 20, false);
  c.hc_eps = r.number({"hc_eps"}, 1e-6, false);
  c.rms_eps = r.number({"rms_norm_eps", "norm_eps"}, 1e-6, false);
  c.bos_token_id = r.integer({"bos_token_id"}, 0, false);
  if (const Json* s = find_config_key(o, {"scoring_func", "score_func"}); s && s->is_string()) {
    c.scoring_func = std::string(s->as_string());
  }
  if (const Json* e = find_config_key(o, {"eos_token_id"})) {
    if (e->is_array()) {
      for (const auto& v : e->as_array()) {
        if (v.is_int64()) c.eos_token_ids.push_back(static_cast<int>(v.as_int64()));
      }
    } else if (e->is_int64()) {
      c.eos_token_ids.push_back(static_cast<int>(e->as_int64()));
    }
  } else {
    c.eos_token_ids.push_back(1);
  }
  if (!r.error.empty()) return Error{r.error};

  // RoPE width: qk_rope_head_dim (published), rope_head_dim (official) or partial_rotary_factor.
  if (const Json* v = find_config_key(o, {"qk_rope_head_dim", "rope_head_dim"})) {
    double d = 0;
    if (!json_number(*v, &d) || !(d >= 0 && d <= 1e6)) {
      return Error{"config.json: \"qk_rope_head_dim\" is not a valid width"};
    }
    c.rope_dim = static_cast<int>(d);
  } else if (const Json* f = find_config_key(o, {"partial_rotary_factor"})) {
    double d = 0;
    if (!json_number(*f, &d) || !(d >= 0 && d <= 1)) {
      return Error{"config.json: \"partial_rotary_factor\" must lie in [0, 1]"};
    }
    c.rope_dim = static_cast<int>(c.head_dim * d);
  } else {
    c.rope_dim = c.head_dim / 8;
  }

  // Layer schedule: compress_ratios (published/official) or layer_types + compress_rates (HF).
  int csa_rate = 4, hca_rate = 128;
  if (const Json* rates = find_config_key(o, {"compress_rates"}); rates && rates->is_object()) {
    ConfigReader rr{rates->as_object(), {}};
    csa_rate = rr.integer({"compressed_sparse_attention"}, 4, false);
    hca_rate = rr.integer({"heavily_compressed_attention"}, 128, false);
  }
  if (const Json* lt = find_config_key(o, {"layer_types"}); lt && lt->is_array()) {
    for (const auto& v : lt->as_array()) {
      const std::string t = v.is_string() ? std::string(v.as_string()) : "";
      c.csa_layers.push_back(t == "compressed_sparse_attention");
      if (t == "sliding_attention") {
        c.compress_ratios.push_back(0);
      } else if (t == "compressed_sparse_attention") {
        c.compress_ratios.push_back(csa_rate);
      } else if (t == "heavily_compressed_attention") {
        c.compress_ratios.push_back(hca_rate);
      } else {
        return Error{"config.json: unknown layer type \"" + t + "\""};
      }
    }
  } else if (const Json* cr = find_config_key(o, {"compress_ratios"}); cr && cr->is_array()) {
    for (const auto& v : cr->as_array()) {
      if (!v.is_int64() || v.as_int64() < 0 || v.as_int64() > (1 << 20)) {
        return Error{"config.json: bad compress_ratios entry"};
      }
      c.compress_ratios.push_back(static_cast<int>(v.as_int64()));
      c.csa_layers.push_back(v.as_int64() == 4);  // the reference: overlap + indexer iff ratio 4
    }
  } else {
    return Error{"config.json has neither compress_ratios nor layer_types"};
  }
  if (static_cast<int>(c.compress_ratios.size()) < c.num_layers) {
    return Error{"config.json: compress_ratios has " + std::to_string(c.compress_ratios.size()) +
                 " entries for " + std::to_string(c.num_layers) + " layers"};
  }
  c.compress_ratios.resize(static_cast<size_t>(c.num_layers));  // trailing entries: MTP blocks
  c.csa_layers.resize(static_cast<size_t>(c.num_layers));
  if (csa_rate <= 0 || hca_rate <= 0) return Error{"config.json: compress_rates must be positive"};

  // MoE routing: mlp_layer_types (HF) or the first num_hash_layers layers.
  if (const Json* mt = find_config_key(o, {"mlp_layer_types"}); mt && mt->is_array()) {
    for (const auto& v : mt->as_array()) {
      c.hash_routed.push_back(v.is_string() && v.as_string() == "hash_moe");
    }
    c.hash_routed.resize(static_cast<size_t>(c.num_layers), false);
  } else {
    const int n_hash = ConfigReader{o, {}}.integer({"num_hash_layers", "n_hash_layers"}, 0, false);
    for (int i = 0; i < c.num_layers; ++i) c.hash_routed.push_back(i < n_hash);
  }

  // RoPE tables: main (sliding layers) and compress (CSA/HCA layers, usually YaRN).
  std::string rope_error;
  const double max_pos = ConfigReader{o, {}}.number({"max_position_embeddings"}, 0.0, false);
  c.main_rope.theta = ConfigReader{o, {}}.number({"rope_theta"}, 10000.0, false);
  c.compress_rope.theta =
      ConfigReader{o, {}}.number({"compress_rope_theta"}, c.main_rope.theta, false);
  if (const Json* rp = find_config_key(o, {"rope_parameters"});
      rp && rp->is_object() && rp->as_object().contains("main")) {
    const auto& rpo = rp->as_object();
    if (rpo.at("main").is_object()) {
      read_rope(rpo.at("main").as_object(), &c.main_rope, &rope_error, max_pos, true);
    }
    if (auto it = rpo.find("compress"); it != rpo.end() && it->value().is_object()) {
      read_rope(it->value().as_object(), &c.compress_rope, &rope_error, max_pos, true);
    }
  } else if (const Json* rs = find_config_key(o, {"rope_scaling"}); rs && rs->is_object()) {
    const double theta = c.compress_rope.theta;
    read_rope(rs->as_object(), &c.compress_rope, &rope_error, max_pos, false);
    c.compress_rope.theta = theta;
    c.compress_rope.attention_factor = 1.0;          // V4: no YaRN attention scale (HF forces 1.0)
  } else if (find_config_key(o, {"rope_factor"})) {  // official inference keys
    ConfigReader rr{o, {}};
    c.compress_rope.yarn = rr.number({"original_seq_len"}, 0, false) > 0;
    c.compress_rope.factor = rr.number({"rope_factor"}, 1, false);
    c.compress_rope.original_max_position = rr.number({"original_seq_len"}, 0, false);
    c.compress_rope.beta_fast = rr.number({"beta_fast"}, 32, false);
    c.compress_rope.beta_slow = rr.number({"beta_slow"}, 1, false);
  }
  if (!rope_error.empty()) return Error{rope_error};

  if (const Json* t = find_config_key(o, {"tie_word_embeddings"}); t && t->is_bool()) {
    c.tie_word_embeddings = t->as_bool();
  }
  if (const Json* q = find_config_key(o, {"quantization_config"}); q && q->is_object()) {
    c.numerics = Numerics::Official;
  }

  // Sanity: every dimension the forward divides by.
  auto positive = [](int v) { return v > 0; };
  if (!positive(c.vocab_size) || !positive(c.hidden_size) || !positive(c.num_layers) ||
      !positive(c.n_heads) || !positive(c.head_dim) || !positive(c.q_lora_rank) ||
      !positive(c.o_lora_rank) || !positive(c.o_groups) || !positive(c.sliding_window) ||
      !positive(c.n_routed_experts) || !positive(c.experts_per_token) ||
      !positive(c.moe_intermediate) || !positive(c.hc_mult) || !positive(c.hc_sinkhorn_iters)) {
    return Error{"config.json: a model dimension is zero or negative"};
  }
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2) {
    return Error{"config.json: RoPE width " + std::to_string(c.rope_dim) +
                 " does not fit head_dim " + std::to_string(c.head_dim)};
  }
  if (c.n_heads % c.o_groups) return Error{"config.json: num_attention_heads % o_groups != 0"};
  if (c.experts_per_token > c.n_routed_experts) {
    return Error{"config.json: num_experts_per_tok exceeds n_routed_experts"};
  }
  if (c.hidden_size > (1 << 20) || c.vocab_size > (1 << 24) || c.num_layers > 1024 ||
      c.head_dim > 4096 || c.n_heads > 1024 || c.hc_mult > 16 || c.hc_sinkhorn_iters > 10000 ||
      c.n_routed_experts > 65536 || c.sliding_window > (1 << 24)) {
    return Error{"config.json: dimensions out of range"};
  }
  for (int i = 0; i < c.num_layers; ++i) {
    if (c.kind(i) == AttentionKind::Csa) {
      if (c.index_n_heads <= 0 || c.index_head_dim <= 0 || c.index_topk <= 0) {
        return Error{"config.json: a CSA layer needs index_n_heads, index_head_dim and index_topk"};
      }
      if (std::min(c.rope_dim, c.index_head_dim) % 2)
        return Error{"config.json: odd indexer RoPE width"};
    }
  }
  if (c.scoring_func != "sqrtsoftplus" && c.scoring_func != "sigmoid" &&
      c.scoring_func != "softmax") {
    return Error{"config.json: unsupported scoring_func \"" + c.scoring_func + "\""};
  }
  return c;
}

Result<ModelConfig> load_model_config(const std::string& dir) {
  auto json = read_config_json(dir);
  if (!json.ok()) return json.error();
  return parse_model_config(json.value());
}

}  // namespace deepinfer::model
