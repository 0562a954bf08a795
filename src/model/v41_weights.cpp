#include "model/v41_weights.h"

#include "model/tensor_reader.h"

namespace deepinfer::model::v41 {
namespace {

V41Expert expert(TensorReader& r, const std::string& p, int64_t d, int64_t inter) {
  V41Expert e;
  e.w1 = r.matrix(p + ".w1.weight", inter, d);
  e.w2 = r.matrix(p + ".w2.weight", d, inter);
  e.w3 = r.matrix(p + ".w3.weight", inter, d);
  return e;
}

}  // namespace

Result<V41Weights> load_v41_weights(const V41Config& c, const Checkpoint& ckpt) {
  TensorReader r(ckpt);
  V41Weights w;
  const int64_t d = c.hidden_size, V = c.vocab_size, hc = c.hc_mult, mix = c.hc_mix();
  const int64_t H = c.n_heads, D = c.head_dim, G = c.o_groups;
  w.embed = r.matrix("embed.weight", V, d);
  w.head = r.matrix(c.tie_word_embeddings && !r.has("head.weight") ? "embed.weight" : "head.weight",
                    V, d);
  w.norm = r.floats("norm.weight", {d});
  for (int l = 0; l < c.num_layers && r.ok(); ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    V41BlockWeights b;
    b.hc_attn_fn = r.matrix(p + "hc_attn_fn", mix, hc * d);
    b.hc_ffn_fn = r.matrix(p + "hc_ffn_fn", mix, hc * d);
    b.hc_attn_base = r.floats(p + "hc_attn_base", {mix});
    b.hc_ffn_base = r.floats(p + "hc_ffn_base", {mix});
    b.hc_attn_scale = r.floats(p + "hc_attn_scale", {3});
    b.hc_ffn_scale = r.floats(p + "hc_ffn_scale", {3});
    b.attn_norm = r.floats(p + "attn_norm.weight", {d});
    b.ffn_norm = r.floats(p + "ffn_norm.weight", {d});
    const std::string a = p + "attn.";
    b.attn_sink = r.floats(a + "attn_sink", {H});
    b.wq_a = r.matrix(a + "wq_a.weight", c.q_lora_rank, d);
    b.q_norm = r.floats(a + "q_norm.weight", {c.q_lora_rank});
    b.wq_b = r.matrix(a + "wq_b.weight", H * D, c.q_lora_rank);
    b.wkv = r.matrix(a + "wkv.weight", D, d);
    b.kv_norm = r.floats(a + "kv_norm.weight", {D});
    cpu::WeightView wo_a = r.matrix(a + "wo_a.weight", G * c.o_lora_rank, H * D / G);
    if (r.ok()) b.wo_a = dequantize_matrix(wo_a);
    b.wo_b = r.matrix(a + "wo_b.weight", d, G * c.o_lora_rank);
    if (c.is_kv_source(l)) {
      b.comp_wkv = r.matrix(a + "compressor.wkv.weight", D, d);
      if (c.ratio(l) > 1) b.comp_wgate = r.matrix(a + "compressor.wgate.weight", D, d);
      b.comp_norm = r.floats(a + "compressor.norm.weight", {D});
    }
    if (c.is_index_source(l)) {
      const int64_t Hi = c.index_n_heads, Di = c.index_head_dim;
      b.idx_wq_b = r.matrix(a + "indexer.wq_b.weight", Hi * Di, c.q_lora_rank);
      b.idx_weights_proj = r.matrix(a + "indexer.weights_proj.weight", Hi, d);
      if (c.is_kv_source(l)) {
        b.idx_wk = r.matrix(a + "indexer.wk.weight", Di, D);
        b.idx_k_norm = r.floats(a + "indexer.k_norm.weight", {Di});
      }
    }
    const std::string f = p + "ffn.";
    b.gate = r.matrix(f + "gate.weight", c.n_routed_experts, d);
    b.gate_bias = r.floats(f + "gate.bias", {c.n_routed_experts});
    for (int e = 0; e < c.n_routed_experts && r.ok(); ++e)
      b.experts.push_back(expert(r, f + "experts." + std::to_string(e), d, c.moe_intermediate));
    b.shared = expert(r, f + "shared_experts", d, c.moe_intermediate);
    w.blocks.push_back(std::move(b));
  }
  if (!r.ok()) return r.error();
  for (const auto& [name, info] : ckpt.tensors()) {
    (void)info;
    if (name.starts_with("vision.") || name.starts_with("aligner.") || name.starts_with("image_")) {
      w.notes.push_back(
          "the checkpoint has vision tensors; the vision tower is not supported, the text path "
          "runs (image tokens are embedded as text)");
      break;
    }
  }
  if (c.vision_layers > 0 && w.notes.empty())
    w.notes.push_back("vision_config has " + std::to_string(c.vision_layers) +
                      " layers; the vision tower is not supported, the text path runs");
  return w;
}

}  // namespace deepinfer::model::v41
