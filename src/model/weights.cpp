#include "model/weights.h"

#include <map>
#include <set>

#include "backend/cpu/simd.h"

namespace deepinfer::model {
namespace {

using cpu::ScaleFormat;
using cpu::WeightFormat;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

class Loader {
 public:
  explicit Loader(const Checkpoint& ckpt) {
    for (const auto& [name, info] : ckpt.tensors()) {
      const std::string canon = canonical_tensor_name(name);
      if (!by_name_.emplace(canon, Entry{name, &info}).second && error_.empty()) {
        error_ = "tensors " + name + " and " + by_name_.at(canon).stored + " both map to " + canon;
      }
    }
  }

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool has(const std::string& name) const { return by_name_.count(name) != 0; }
  const TensorInfo* peek(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second.info;
  }
  bool has_prefix(const std::string& prefix) const {
    auto it = by_name_.lower_bound(prefix);
    return it != by_name_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
  }

  const TensorInfo* get(const std::string& name) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      fail("missing tensor " + name);
      return nullptr;
    }
    used_.insert(name);
    return it->second.info;
  }

  bool expect_shape(const std::string& name, const TensorInfo& t,
                    const std::vector<int64_t>& shape) {
    if (t.shape == shape) return true;
    fail("tensor " + name + " has shape " + shape_str(t.shape) + ", expected " + shape_str(shape));
    return false;
  }

  // A matrix [out, in] in any supported storage format; FP8/FP4 pick up their ".scale".
  WeightView matrix(const std::string& name, int64_t out, int64_t in) {
    WeightView v;
    const TensorInfo* t = get(name);
    if (!t) return v;
    v.out = out;
    v.in = in;
    v.data = t->data;
    switch (t->dtype) {
      case DType::F32:
        v.format = WeightFormat::F32;
        break;
      case DType::BF16:
        v.format = WeightFormat::BF16;
        break;
      case DType::F8_E4M3:
        v.format = WeightFormat::FP8_E4M3_BLOCK;
        break;
      case DType::I8:
      case DType::U8:
        v.format = WeightFormat::FP4_E2M1_BLOCK32;
        break;
      default:
        fail("tensor " + name + " has dtype " + dtype_name(t->dtype) +
             "; matrices must be F32, BF16, F8_E4M3 or packed FP4 (I8)");
        return v;
    }
    const bool fp4 = v.format == WeightFormat::FP4_E2M1_BLOCK32;
    if (!expect_shape(name, *t, {out, fp4 ? in / 2 : in})) return v;
    if (fp4 && in % 32) {
      fail("tensor " + name + ": FP4 needs in % 32 == 0");
      return v;
    }
    if (v.format == WeightFormat::FP8_E4M3_BLOCK || fp4) {
      std::string base = name;
      if (base.size() > 7 && base.compare(base.size() - 7, 7, ".weight") == 0)
        base.resize(base.size() - 7);
      std::string sname = base + ".scale";
      if (!has(sname) && has(base + ".weight_scale_inv")) sname = base + ".weight_scale_inv";
      const TensorInfo* s = get(sname);
      if (!s) return v;
      v.block_out = fp4 ? 1 : 128;
      v.block_in = fp4 ? 32 : 128;
      const int64_t so = (out + v.block_out - 1) / v.block_out,
                    si = (in + v.block_in - 1) / v.block_in;
      if (!expect_shape(sname, *s, {so, si})) return v;
      if (s->dtype == DType::F8_E8M0 || s->dtype == DType::U8) {
        v.scale_format = ScaleFormat::UE8M0;
      } else if (s->dtype == DType::F32) {
        v.scale_format = ScaleFormat::F32;
      } else {
        fail("scale tensor " + sname + " has dtype " + dtype_name(s->dtype) + " (F8_E8M0 or F32)");
        return v;
      }
      v.scale = s->data;
      v.scale_stride = si;
    }
    if (!cpu::linear_supported(v.format)) {
      fail("tensor " + name + " is stored as " + cpu::to_string(v.format) +
           ", which this build's CPU kernels do not support");
    }
    return v;
  }

  std::vector<float> floats(const std::string& name, const std::vector<int64_t>& shape) {
    std::vector<float> out;
    const TensorInfo* t = get(name);
    if (!t || !expect_shape(name, *t, shape)) return out;
    const int64_t n = t->numel();
    out.resize(static_cast<size_t>(n));
    switch (t->dtype) {
      case DType::F32:
        std::memcpy(out.data(), t->data, static_cast<size_t>(n) * 4);
        break;
      case DType::BF16:
        for (int64_t i = 0; i < n; ++i) {
          uint16_t b;
          std::memcpy(&b, t->data + 2 * i, 2);
          out[static_cast<size_t>(i)] = cpu::bf16_to_f32(b);
        }
        break;
      case DType::F16:
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, t->data + 2 * i, 2);
          out[static_cast<size_t>(i)] = half_to_float(h);
        }
        break;
      default:
        fail("tensor " + name + " has dtype " + dtype_name(t->dtype) + "; expected a float tensor");
        out.clear();
    }
    return out;
  }

  std::vector<int32_t> ids(const std::string& name, const std::vector<int64_t>& shape, int limit) {
    std::vector<int32_t> out;
    const TensorInfo* t = get(name);
    if (!t || !expect_shape(name, *t, shape)) return out;
    const int64_t n = t->numel();
    out.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = 0;
      if (t->dtype == DType::I64) {
        std::memcpy(&v, t->data + 8 * i, 8);
      } else if (t->dtype == DType::I32) {
        int32_t w;
        std::memcpy(&w, t->data + 4 * i, 4);
        v = w;
      } else {
        fail("tensor " + name + " has dtype " + dtype_name(t->dtype) + "; expected I64 or I32");
        return {};
      }
      if (v < 0 || v >= limit) {
        fail("tensor " + name + " holds expert id " + std::to_string(v) + " outside [0, " +
             std::to_string(limit) + ")");
        return {};
      }
      out[static_cast<size_t>(i)] = static_cast<int32_t>(v);
    }
    return out;
  }

  Status finish() {
    if (!error_.empty()) return Error{error_};
    for (const auto& [name, entry] : by_name_) {
      if (!used_.count(name)) {
        return Error{"unknown tensor " + entry.stored +
                     (entry.stored != name ? " (read as " + name + ")" : "") +
                     ": not part of this model config"};
      }
    }
    return Status::Ok();
  }

  void fail(const std::string& e) {
    if (error_.empty()) error_ = e;
  }

 private:
  static float half_to_float(uint16_t h) {
    const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float f;
    if (exp == 0) {
      f = std::ldexp(static_cast<float>(man), -24);
    } else if (exp == 31) {
      f = man ? std::nanf("") : INFINITY;
    } else {
      f = std::ldexp(static_cast<float>(man | 0x400), static_cast<int>(exp) - 25);
    }
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u |= sign;
    std::memcpy(&f, &u, 4);
    return f;
  }

  struct Entry {
    std::string stored;
    const TensorInfo* info;
  };
  std::map<std::string, Entry> by_name_;
  std::set<std::string> used_;
  std::string error_;
};

void load_hc(Loader& L, const std::string& p, int rows, int scales, int64_t width,
             HyperConnectionWeights* hc, bool head) {
  const std::string fn = head ? p + "hc_head_fn" : p + "_fn";
  const std::string base = head ? p + "hc_head_base" : p + "_base";
  const std::string scale = head ? p + "hc_head_scale" : p + "_scale";
  hc->fn = L.matrix(fn, rows, width);
  hc->base = L.floats(base, {rows});
  hc->scale = L.floats(scale, {scales});
}

void load_compressor(Loader& L, const std::string& p, int ratio, int coff, int dc, int d,
                     CompressorWeights* c) {
  c->wkv = L.matrix(p + "wkv.weight", coff * dc, d);
  c->wgate = L.matrix(p + "wgate.weight", coff * dc, d);
  c->ape = L.floats(p + "ape", {ratio, coff * dc});
  c->norm = L.floats(p + "norm.weight", {dc});
}

void load_block(Loader& L, const ModelConfig& c, const std::string& p, int ratio, bool csa,
                bool hash, BlockWeights* b) {
  const int d = c.hidden_size, H = c.n_heads, D = c.head_dim, hc = c.hc_mult;
  load_hc(L, p + "hc_attn", c.hc_mix(), 3, int64_t{hc} * d, &b->hc_attn, false);
  load_hc(L, p + "hc_ffn", c.hc_mix(), 3, int64_t{hc} * d, &b->hc_ffn, false);
  b->attn_norm = L.floats(p + "attn_norm.weight", {d});
  b->ffn_norm = L.floats(p + "ffn_norm.weight", {d});
  const std::string a = p + "attn.";
  b->attn_sink = L.floats(a + "attn_sink", {H});
  b->wq_a = L.matrix(a + "wq_a.weight", c.q_lora_rank, d);
  b->q_norm = L.floats(a + "q_norm.weight", {c.q_lora_rank});
  b->wq_b = L.matrix(a + "wq_b.weight", int64_t{H} * D, c.q_lora_rank);
  b->wkv = L.matrix(a + "wkv.weight", D, d);
  b->kv_norm = L.floats(a + "kv_norm.weight", {D});
  b->wo_a =
      L.matrix(a + "wo_a.weight", int64_t{c.o_groups} * c.o_lora_rank, int64_t{H} * D / c.o_groups);
  b->wo_a.quantize_input = false;  // the reference applies wo_a as a bf16 einsum
  b->wo_b = L.matrix(a + "wo_b.weight", d, int64_t{c.o_groups} * c.o_lora_rank);
  if (ratio > 0) {
    b->has_compressor = true;
    load_compressor(L, a + "compressor.", ratio, csa ? 2 : 1, D, d, &b->compressor);
    if (csa) {
      b->has_indexer = true;
      const int ih = c.index_n_heads, ihd = c.index_head_dim;
      b->indexer.wq_b = L.matrix(a + "indexer.wq_b.weight", int64_t{ih} * ihd, c.q_lora_rank);
      b->indexer.weights_proj = L.matrix(a + "indexer.weights_proj.weight", ih, d);
      load_compressor(L, a + "indexer.compressor.", ratio, 2, ihd, d, &b->indexer.compressor);
    }
  }
  const std::string f = p + "ffn.";
  const int E = c.n_routed_experts, inter = c.moe_intermediate;
  b->gate = L.matrix(f + "gate.weight", E, d);
  if (hash) {
    b->tid2eid = L.ids(f + "gate.tid2eid", {c.vocab_size, c.experts_per_token}, E);
    b->gate_bias.assign(static_cast<size_t>(E), 0.0f);
  } else {
    b->gate_bias = L.floats(f + "gate.bias", {E});
  }
  // HF sizes the shared expert moe_intermediate_size; the reference n_shared · moe_inter_dim.
  int shared = inter * std::max(1, c.n_shared_experts);
  if (const TensorInfo* t = L.peek(f + "shared_experts.w1.weight");
      t && t->shape.size() == 2 && (t->shape[0] == inter || t->shape[0] == shared)) {
    shared = static_cast<int>(t->shape[0]);
  }
  b->shared.w1 = L.matrix(f + "shared_experts.w1.weight", shared, d);
  b->shared.w2 = L.matrix(f + "shared_experts.w2.weight", d, shared);
  b->shared.w3 = L.matrix(f + "shared_experts.w3.weight", shared, d);
  b->experts.resize(static_cast<size_t>(E));
  for (int e = 0; e < E && L.ok(); ++e) {
    const std::string x = f + "experts." + std::to_string(e) + ".";
    b->experts[static_cast<size_t>(e)].w1 = L.matrix(x + "w1.weight", inter, d);
    b->experts[static_cast<size_t>(e)].w2 = L.matrix(x + "w2.weight", d, inter);
    b->experts[static_cast<size_t>(e)].w3 = L.matrix(x + "w3.weight", inter, d);
  }
}

}  // namespace

std::string canonical_tensor_name(const std::string& stored) {
  static const std::map<std::string, std::string> special = {
      {"model.embed_tokens.weight", "embed.weight"}, {"lm_head.weight", "head.weight"},
      {"model.norm.weight", "norm.weight"},          {"model.hc_head.hc_fn", "hc_head_fn"},
      {"model.hc_head.hc_base", "hc_head_base"},     {"model.hc_head.hc_scale", "hc_head_scale"},
  };
  if (auto it = special.find(stored); it != special.end()) return it->second;
  std::string n = stored.compare(0, 6, "model.") == 0 ? stored.substr(6) : stored;
  // HF saves the attention kv norm as layers.N.attn.norm.weight.
  const std::string tail = ".attn.norm.weight";
  if (n.compare(0, 7, "layers.") == 0 && n.size() > tail.size() &&
      n.compare(n.size() - tail.size(), tail.size(), tail) == 0 &&
      n.find('.', 7) == n.size() - tail.size()) {
    n = n.substr(0, n.size() - tail.size()) + ".attn.kv_norm.weight";
  }
  return n;
}

Result<ModelWeights> load_weights(const ModelConfig& c, const Checkpoint& checkpoint) {
  Loader L(checkpoint);
  if (!L.ok()) return Error{L.error()};
  ModelWeights w;
  const int d = c.hidden_size;
  w.embed = L.matrix("embed.weight", c.vocab_size, d);
  // Tied embeddings: HF's save_pretrained then stores no head.
  w.head = c.tie_word_embeddings && !L.has("head.weight")
               ? w.embed
               : L.matrix("head.weight", c.vocab_size, d);
  w.norm = L.floats("norm.weight", {d});
  load_hc(L, "", c.hc_mult, 1, int64_t{c.hc_mult} * d, &w.hc_head, true);
  w.blocks.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers && L.ok(); ++i) {
    load_block(L, c, "layers." + std::to_string(i) + ".", c.ratio(i),
               c.kind(i) == AttentionKind::Csa, c.hash_routed[static_cast<size_t>(i)],
               &w.blocks[static_cast<size_t>(i)]);
  }
  for (int m = 0; m < c.num_mtp_layers && L.ok(); ++m) {
    const std::string p = "mtp." + std::to_string(m) + ".";
    if (!L.has_prefix(p)) break;
    MtpWeights mt;
    mt.e_proj = L.matrix(p + "e_proj.weight", d, d);
    mt.h_proj = L.matrix(p + "h_proj.weight", d, d);
    mt.enorm = L.floats(p + "enorm.weight", {d});
    mt.hnorm = L.floats(p + "hnorm.weight", {d});
    mt.norm = L.floats(p + "norm.weight", {d});
    load_hc(L, p, c.hc_mult, 1, int64_t{c.hc_mult} * d, &mt.hc_head, true);
    load_block(L, c, p, 0, false, false, &mt.block);
    w.mtp.push_back(std::move(mt));
  }
  if (Status s = L.finish(); !s) return s.error();
  return w;
}

}  // namespace deepinfer::model
