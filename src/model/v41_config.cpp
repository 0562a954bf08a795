#include "model/v41_config.h"

#include <algorithm>
#include <cmath>

#include "model/config_reader.h"

namespace deepinfer::model::v41 {
namespace {

bool contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string str(const char* what, int layer) {
  return std::string("config.json: ") + what + " (layer " + std::to_string(layer) + ")";
}

Status derive_roles(V41Config& c) {
  const int L = c.num_layers;
  c.kv_source_of.assign(static_cast<size_t>(L), -1);
  c.index_source_of.assign(static_cast<size_t>(L), -1);
  c.index_key_source_of.assign(static_cast<size_t>(L), -1);
  for (int s : c.kv_source_layers)
    if (s < 0 || s >= L || c.ratio(s) <= 0)
      return Error{str("a kv source layer must be a decoder layer with compress ratio > 0", s)};
  for (int s : c.index_source_layers)
    if (s < 0 || s >= L || c.ratio(s) <= 0)
      return Error{str("an index source layer must be a decoder layer with compress ratio > 0", s)};
  int kv = -1, idx = -1, key = -1;
  for (int l = 0; l < L; ++l) {
    if (c.is_kv_source(l)) kv = l;
    if (c.is_index_source(l)) idx = l;
    if (c.is_kv_source(l) && c.is_index_source(l)) key = l;
    if (c.ratio(l) <= 0) continue;
    if (kv < 0 || c.ratio(kv) != c.ratio(l))
      return Error{str("no kv source layer with the same compress ratio at or before", l)};
    if (idx < 0) return Error{str("no index source layer at or before", l)};
    c.kv_source_of[static_cast<size_t>(l)] = kv;
    c.index_source_of[static_cast<size_t>(l)] = idx;
    if (c.is_index_source(l)) {
      if (key < 0 || c.ratio(key) != c.ratio(l))
        return Error{
            str("an index source needs an earlier kv + index source of its ratio for its keys", l)};
      c.index_key_source_of[static_cast<size_t>(l)] = key;
    }
  }
  if (c.candidate_source_layer >= 0) {
    const int cs = c.candidate_source_layer;
    if (cs >= L || !c.is_index_source(cs))
      return Error{str("candidate_source_layer_id must be an index source", cs)};
    if (c.candidate_block_size <= 0 || c.candidate_topk_blocks <= 0)
      return Error{"config.json: candidate_block_size and candidate_topk_blocks must be > 0"};
    for (int l : c.index_source_layers)
      if (c.uses_candidates(l) && c.ratio(l) != c.ratio(cs))
        return Error{str("a layer filtered by candidate blocks must share the source's ratio", l)};
  }
  return Status::Ok();
}

}  // namespace

bool V41Config::is_kv_source(int layer) const { return contains(kv_source_layers, layer); }
bool V41Config::is_index_source(int layer) const { return contains(index_source_layers, layer); }
bool V41Config::is_engram_layer(int layer) const { return contains(engram_layer_ids, layer); }

bool is_v41_config(const Json& json) {
  if (!json.is_object()) return false;
  const JsonObject& o = json.as_object();
  if (const Json* a = find_config_key(o, {"architectures"}); a && a->is_array())
    for (const Json& e : a->as_array())
      if (e.is_string() && e.as_string() == "DeepseekV41ForCausalLM") return true;
  if (const Json* m = find_config_key(o, {"model_type"}); m && m->is_string())
    return m->as_string() == "deepseek_v41" || m->as_string() == "deepseek_v41_text";
  // Flat official keys: the V4.1-only fields.
  return find_config_key(o, {"kv_source_layers"}) && find_config_key(o, {"index_source_layers"});
}

Result<V41Config> parse_v41_config(const Json& json) {
  if (!json.is_object()) return Error{"config.json is not an object"};
  const JsonObject& top = json.as_object();
  const Json* text = find_config_key(top, {"text_config"});
  if (text && !text->is_object()) return Error{"config.json: \"text_config\" is not an object"};
  const JsonObject& o = text ? text->as_object() : top;
  ConfigReader r{o, {}};
  V41Config c;
  c.vocab_size = r.integer({"vocab_size"}, 0, true);
  c.hidden_size = r.integer({"hidden_size", "dim"}, 0, true);
  c.num_layers = r.integer({"num_hidden_layers", "n_layers"}, 0, true);
  c.num_mtp_layers = r.integer({"num_nextn_predict_layers", "n_mtp_layers"}, 0, false);
  c.n_heads = r.integer({"num_attention_heads", "n_heads"}, 0, true);
  c.head_dim = r.integer({"head_dim"}, 0, true);
  c.rope_dim = r.integer({"qk_rope_head_dim", "rope_head_dim"}, 0, true);
  c.q_lora_rank = r.integer({"q_lora_rank"}, 0, true);
  c.o_lora_rank = r.integer({"o_lora_rank"}, 0, true);
  c.o_groups = r.integer({"o_groups"}, 1, false);
  c.sliding_window = r.integer({"sliding_window", "window_size"}, 0, true);
  c.compress_ratios = r.list<int>({"compress_ratios"}, true);
  c.kv_source_layers = r.list<int>({"kv_source_layer_ids", "kv_source_layers"}, false);
  c.index_source_layers = r.list<int>({"index_source_layer_ids", "index_source_layers"}, false);
  c.index_n_heads = r.integer({"index_n_heads"}, 0, false);
  c.index_head_dim = r.integer({"index_head_dim"}, 0, false);
  c.index_topk = r.integer({"index_topk"}, 0, false);
  c.candidate_source_layer =
      r.integer({"candidate_source_layer_id", "candidate_source_layer"}, -1, false);
  c.candidate_topk_blocks = r.integer({"candidate_topk_blocks"}, 0, false);
  c.candidate_block_size = r.integer({"candidate_block_size"}, 0, false);
  c.n_routed_experts = r.integer({"n_routed_experts"}, 0, true);
  c.n_shared_experts = r.integer({"n_shared_experts"}, 1, false);
  c.experts_per_token = r.integer({"num_experts_per_tok", "n_activated_experts"}, 0, true);
  c.moe_intermediate = r.integer({"moe_intermediate_size", "moe_inter_dim"}, 0, true);
  c.scoring_func = r.text({"scoring_func", "score_func"}, "sqrtsoftplus");
  c.gate_temp = r.number({"gate_temp"}, 1.0, false);
  c.norm_topk_prob = r.flag({"norm_topk_prob"}, true);
  c.routed_scaling = r.number({"routed_scaling_factor", "route_scale"}, 1.0, false);
  c.swiglu_limit = r.number({"swiglu_limit"}, 0.0, false);
  c.hc_mult = r.integer({"hc_mult"}, 1, false);
  c.hc_sinkhorn_iters = r.integer({"hc_sinkhorn_iters"}, 1, false);
  c.hc_eps = r.number({"hc_eps"}, 1e-6, false);
  c.rms_eps = r.number({"rms_norm_eps", "norm_eps"}, 1e-20, false);
  c.engram_layer_ids = r.list<int>({"engram_layer_ids"}, false);
  c.engram_num_embeddings = r.list<int64_t>({"engram_num_embeddings"}, false);
  c.engram_max_ngram_size = r.integer({"engram_max_ngram_size"}, 0, false);
  c.engram_vocab_size = r.integer64({"engram_vocab_size"}, 0, false);
  c.engram_n_heads = r.integer({"engram_n_heads"}, 0, false);
  c.engram_head_dim = r.integer({"engram_head_dim"}, 0, false);
  c.engram_pad_token_id = r.integer({"engram_pad_token_id", "engram_pad_id"}, 2, false);
  c.engram_compressed_vocab_size = r.integer64({"engram_compressed_vocab_size"}, 0, false);
  c.dspark_block_size = r.integer({"dspark_block_size"}, 0, false);
  c.dspark_noise_token_id = r.integer({"dspark_noise_token_id"}, 0, false);
  c.dspark_target_layer_ids = r.list<int>({"dspark_target_layer_ids"}, false);
  c.dspark_markov_rank = r.integer({"dspark_markov_rank"}, 0, false);
  c.dspark_n_routed_experts = r.integer({"dspark_n_routed_experts"}, 0, false);
  c.dspark_experts_per_token =
      r.integer({"dspark_num_experts_per_tok", "dspark_n_activated_experts"}, 0, false);
  c.tie_word_embeddings = r.flag({"tie_word_embeddings"}, false);
  c.image_token_id = ConfigReader{top, {}}.integer({"image_token_id"}, 129264, false);

  // RoPE: rope_scaling (published) or the flat official keys.
  const double rope_theta = r.number({"rope_theta"}, 10000.0, false);
  const double compress_theta = r.number({"compress_rope_theta"}, rope_theta, false);
  double factor = r.number({"rope_factor"}, 1.0, false);
  double beta_fast = r.number({"beta_fast"}, 32.0, false);
  double beta_slow = r.number({"beta_slow"}, 1.0, false);
  double original = r.number({"original_seq_len"}, 0.0, false);
  if (const Json* rs = find_config_key(o, {"rope_scaling"}); rs && rs->is_object()) {
    ConfigReader s{rs->as_object(), {}};
    factor = s.number({"factor"}, factor, false);
    beta_fast = s.number({"beta_fast"}, beta_fast, false);
    beta_slow = s.number({"beta_slow"}, beta_slow, false);
    original = s.number({"original_max_position_embeddings"}, original, false);
    if (!s.error.empty()) r.fail(s.error);
  }
  c.main_rope.theta = rope_theta;
  c.compress_rope = RopeConfig{};
  c.compress_rope.theta = compress_theta;
  c.compress_rope.yarn = original > 0;  // official: YaRN whenever original_seq_len > 0
  c.compress_rope.factor = factor;
  c.compress_rope.original_max_position = original;
  c.compress_rope.beta_fast = beta_fast;
  c.compress_rope.beta_slow = beta_slow;

  // Storage: quantization_config (published, top level or text_config) or dtype (official keys).
  const Json* q = find_config_key(top, {"quantization_config"});
  if (!q) q = find_config_key(o, {"quantization_config"});
  if (q && q->is_object()) {
    ConfigReader qr{q->as_object(), {}};
    c.fp8 = qr.text({"quant_method"}, "") == "fp8";
    c.expert_fp4 = qr.text({"expert_dtype"}, "") == "fp4";
    const std::vector<int> block = qr.list<int>({"weight_block_size"}, false);
    if (!block.empty()) c.weight_block = block[0];
    if (!qr.error.empty()) r.fail(qr.error);
  } else {
    c.fp8 = r.text({"dtype"}, "bf16") == "fp8";
    c.expert_fp4 = c.fp8 && r.text({"expert_dtype"}, "") == "fp4";
  }
  if (const Json* v = find_config_key(top, {"vision_config"}); v && v->is_object()) {
    c.vision_layers = ConfigReader{v->as_object(), {}}.integer({"num_hidden_layers"}, 0, false);
  } else {
    c.vision_layers = r.integer({"vision_n_layers"}, 0, false);
  }
  // eos: an int or a list (top level or text_config)
  const Json* eos = find_config_key(o, {"eos_token_id"});
  if (!eos) eos = find_config_key(top, {"eos_token_id"});
  if (eos && eos->is_array()) {
    c.eos_token_ids = ConfigReader{top, {}}.list<int>({"eos_token_id"}, false);
    if (c.eos_token_ids.empty()) c.eos_token_ids = r.list<int>({"eos_token_id"}, false);
  } else if (eos) {
    double d = 1;
    if (json_number(*eos, &d)) c.eos_token_ids = {static_cast<int>(d)};
  } else {
    c.eos_token_ids = {1};
  }
  c.bos_token_id = r.integer({"bos_token_id"}, 0, false);
  if (!r.error.empty()) return Error{r.error};

  // Shapes the forward relies on.
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.num_layers <= 0 || c.n_heads <= 0)
    return Error{"config.json: vocab_size, hidden_size, num_hidden_layers and heads must be > 0"};
  const size_t L = static_cast<size_t>(c.num_layers);
  if (c.compress_ratios.size() != L &&
      c.compress_ratios.size() != L + static_cast<size_t>(c.num_mtp_layers))
    return Error{
        "config.json: compress_ratios needs one entry per layer (num_hidden_layers + "
        "num_nextn_predict_layers)"};
  c.compress_ratios.resize(L);
  for (int r0 : c.compress_ratios)
    if (r0 < 0) return Error{"config.json: compress ratios must be >= 0"};
  if (c.head_dim <= 0 || c.head_dim % 32 != 0)
    return Error{"config.json: head_dim must be a positive multiple of 32 (FP8 KV blocks)"};
  if (c.rope_dim <= 0 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim || c.rope_dim > 512)
    return Error{"config.json: qk_rope_head_dim must be even and at most head_dim (and 512)"};
  if (c.o_groups <= 0 || c.n_heads % c.o_groups != 0)
    return Error{"config.json: num_attention_heads must be a multiple of o_groups"};
  if (c.sliding_window <= 0) return Error{"config.json: sliding_window must be > 0"};
  if (c.hc_mult <= 0 || c.hc_sinkhorn_iters <= 0)
    return Error{"config.json: hc_mult and hc_sinkhorn_iters must be > 0"};
  if (c.experts_per_token <= 0 || c.experts_per_token > c.n_routed_experts)
    return Error{"config.json: num_experts_per_tok must be in [1, n_routed_experts]"};
  if (c.n_shared_experts != 1) return Error{"config.json: V4.1 has exactly one shared expert"};
  if (c.scoring_func != "sqrtsoftplus" && c.scoring_func != "sigmoid" &&
      c.scoring_func != "softmax")
    return Error{"config.json: unknown scoring_func \"" + c.scoring_func + "\""};
  bool compressed = false;
  for (int r0 : c.compress_ratios) compressed = compressed || r0 > 0;
  if (compressed) {
    if (c.index_n_heads <= 0 || c.index_head_dim <= 0 || c.index_head_dim % 32 != 0 ||
        c.rope_dim > c.index_head_dim || c.index_topk <= 0)
      return Error{
          "config.json: compressed layers need index_n_heads, index_topk > 0 and an "
          "index_head_dim that is a multiple of 32 and at least qk_rope_head_dim"};
  }
  if (c.fp8 && c.weight_block != 32)
    return Error{"config.json: V4.1 FP8 weights use 32x32 blocks (weight_block_size)"};
  for (int e : c.engram_layer_ids)
    if (e < 0 || e >= c.num_layers) return Error{str("engram layer out of range", e)};
  for (int t : c.dspark_target_layer_ids)
    if (t < 0 || t >= c.num_layers) return Error{str("dspark target layer out of range", t)};
  if (Status s = derive_roles(c); !s.ok()) return s.error();
  return c;
}

Result<V41Config> load_v41_config(const std::string& dir) {
  auto json = read_config_json(dir);
  if (!json.ok()) return json.error();
  return parse_v41_config(json.value());
}

}  // namespace deepinfer::model::v41
