#include "model/synthetic_checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "model/config.h"

namespace deepinfer::model {

namespace {

// ---- configs ------------------------------------------------------------------------------------
JsonArray release_ratios(int layers) {
  JsonArray a;
  for (int i = 0; i < layers; ++i) a.push_back(i < 2 ? 0 : (i % 2 == 0 ? 4 : 128));
  return a;
}

void add_quantization(JsonObject& o, SyntheticFormat format) {
  if (format != SyntheticFormat::Fp8) return;
  o["expert_dtype"] = "fp4";
  JsonObject q;
  q["activation_scheme"] = "dynamic";
  q["fmt"] = "e4m3";
  q["quant_method"] = "fp8";
  q["scale_fmt"] = "ue8m0";
  q["weight_block_size"] = JsonArray{128, 128};
  o["quantization_config"] = std::move(q);
}

struct Dims {
  int vocab, hidden, heads, head_dim, rope, q_rank, o_rank, o_groups, index_heads, index_dim,
      index_topk, experts, inter;
};

Json slice_config(int layers, SyntheticFormat format, const Dims& d) {
  JsonObject o;
  o["architectures"] = JsonArray{"DeepseekV4ForCausalLM"};
  o["model_type"] = "deepseek_v4";
  o["torch_dtype"] = "bfloat16";
  o["vocab_size"] = d.vocab;
  o["hidden_size"] = d.hidden;
  o["num_hidden_layers"] = layers;
  o["num_nextn_predict_layers"] = 0;
  o["num_attention_heads"] = d.heads;
  o["num_key_value_heads"] = 1;
  o["head_dim"] = d.head_dim;
  o["qk_rope_head_dim"] = d.rope;
  o["q_lora_rank"] = d.q_rank;
  o["o_lora_rank"] = d.o_rank;
  o["o_groups"] = d.o_groups;
  o["sliding_window"] = 128;
  o["compress_ratios"] = release_ratios(layers);
  o["compress_rope_theta"] = 160000;
  o["rope_theta"] = 10000;
  JsonObject rs;
  rs["type"] = "yarn";
  rs["factor"] = 16;
  rs["original_max_position_embeddings"] = 65536;
  rs["beta_fast"] = 32;
  rs["beta_slow"] = 1;
  o["rope_scaling"] = std::move(rs);
  o["max_position_embeddings"] = 1048576;
  o["index_n_heads"] = d.index_heads;
  o["index_head_dim"] = d.index_dim;
  o["index_topk"] = d.index_topk;
  o["n_routed_experts"] = d.experts;
  o["n_shared_experts"] = 1;
  o["num_experts_per_tok"] = 6;
  o["moe_intermediate_size"] = d.inter;
  o["scoring_func"] = "sqrtsoftplus";
  o["topk_method"] = "noaux_tc";
  o["norm_topk_prob"] = true;
  o["routed_scaling_factor"] = 1.5;
  o["num_hash_layers"] = 3;
  o["swiglu_limit"] = 10.0;
  o["hidden_act"] = "silu";
  o["hc_mult"] = 4;
  o["hc_sinkhorn_iters"] = 20;
  o["hc_eps"] = 1e-6;
  o["rms_norm_eps"] = 1e-6;
  o["tie_word_embeddings"] = false;
  o["bos_token_id"] = 0;
  o["eos_token_id"] = 1;
  o["attention_bias"] = false;
  o["attention_dropout"] = 0.0;
  o["initializer_range"] = 0.02;
  o["use_cache"] = true;
  add_quantization(o, format);
  return o;
}

// ---- tensor list --------------------------------------------------------------------------------
enum class Kind { I64, F32, BF16, F8, E8M0, I8 };
enum class Fill { Weight, One, Small, TidEid, Scale };

int kind_size(Kind k) {
  switch (k) {
    case Kind::I64:
      return 8;
    case Kind::F32:
      return 4;
    case Kind::BF16:
      return 2;
    default:
      return 1;
  }
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::I64:
      return "I64";
    case Kind::F32:
      return "F32";
    case Kind::BF16:
      return "BF16";
    case Kind::F8:
      return "F8_E4M3";
    case Kind::E8M0:
      return "F8_E8M0";
    case Kind::I8:
      return "I8";
  }
  return "?";
}

struct Tensor {
  std::string name;
  Kind kind;
  Fill fill;
  std::vector<int64_t> shape;
  int tid_experts = 0;  // TidEid: the expert count
  uint64_t offset = 0;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
  int64_t bytes() const { return numel() * kind_size(kind); }
};

// Every block scale is 2^-7: e4m3 magnitudes in [1/4, 4) give rms ≈ 0.03, e2m1 codes (rms 2.9)
// ≈ 0.023, close to the bf16 matrices' std 0.02.
constexpr uint8_t kScaleE8M0 = 127 - 7;

class TensorList {
 public:
  explicit TensorList(SyntheticFormat format) : fp8_(format == SyntheticFormat::Fp8) {}

  void f32(const std::string& n, std::vector<int64_t> s, Fill f = Fill::Small) {
    list.push_back({n, Kind::F32, f, std::move(s)});
  }
  void bf16(const std::string& n, std::vector<int64_t> s, Fill f = Fill::Weight) {
    list.push_back({n, Kind::BF16, f, std::move(s)});
  }
  // A matrix FP8 in the shipped checkpoint (bf16 otherwise).
  void linear(const std::string& n, int64_t out, int64_t in) {
    if (!fp8_) return bf16(n + ".weight", {out, in});
    list.push_back({n + ".weight", Kind::F8, Fill::Weight, {out, in}});
    list.push_back({n + ".scale", Kind::E8M0, Fill::Scale, {(out + 127) / 128, (in + 127) / 128}});
  }
  // A routed expert matrix: FP4 e2m1 pairs + per-32 scales when shipped.
  void expert(const std::string& n, int64_t out, int64_t in) {
    if (!fp8_) return bf16(n + ".weight", {out, in});
    list.push_back({n + ".weight", Kind::I8, Fill::Weight, {out, in / 2}});
    list.push_back({n + ".scale", Kind::E8M0, Fill::Scale, {out, in / 32}});
  }

  std::vector<Tensor> list;

 private:
  bool fp8_;
};

void hc(TensorList& t, const std::string& p, int rows, int scales, int64_t width) {
  t.f32(p + "_fn", {rows, width});
  t.f32(p + "_base", {rows});
  t.f32(p + "_scale", {scales}, Fill::One);
}

void compressor(TensorList& t, const std::string& p, int ratio, int coff, int dc, int d) {
  t.bf16(p + "wkv.weight", {coff * dc, d});
  t.bf16(p + "wgate.weight", {coff * dc, d});
  t.f32(p + "ape", {ratio, coff * dc});
  t.bf16(p + "norm.weight", {dc}, Fill::One);
}

std::vector<Tensor> tensors_for(const ModelConfig& c, SyntheticFormat format) {
  TensorList t(format);
  const int d = c.hidden_size, H = c.n_heads, D = c.head_dim, E = c.n_routed_experts;
  const int inter = c.moe_intermediate;
  t.bf16("embed.weight", {c.vocab_size, d});
  t.bf16("head.weight", {c.vocab_size, d});
  t.bf16("norm.weight", {d}, Fill::One);
  t.f32("hc_head_fn", {c.hc_mult, int64_t{c.hc_mult} * d});
  t.f32("hc_head_base", {c.hc_mult});
  t.f32("hc_head_scale", {1}, Fill::One);
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    hc(t, p + "hc_attn", c.hc_mix(), 3, int64_t{c.hc_mult} * d);
    hc(t, p + "hc_ffn", c.hc_mix(), 3, int64_t{c.hc_mult} * d);
    t.bf16(p + "attn_norm.weight", {d}, Fill::One);
    t.bf16(p + "ffn_norm.weight", {d}, Fill::One);
    const std::string a = p + "attn.";
    t.f32(a + "attn_sink", {H});
    t.linear(a + "wq_a", c.q_lora_rank, d);
    t.bf16(a + "q_norm.weight", {c.q_lora_rank}, Fill::One);
    t.linear(a + "wq_b", int64_t{H} * D, c.q_lora_rank);
    t.linear(a + "wkv", D, d);
    t.bf16(a + "kv_norm.weight", {D}, Fill::One);
    t.linear(a + "wo_a", int64_t{c.o_groups} * c.o_lora_rank, int64_t{H} * D / c.o_groups);
    t.linear(a + "wo_b", d, int64_t{c.o_groups} * c.o_lora_rank);
    const AttentionKind kind = c.kind(i);
    if (kind != AttentionKind::SlidingWindow) {
      const bool csa = kind == AttentionKind::Csa;
      compressor(t, a + "compressor.", c.ratio(i), csa ? 2 : 1, D, d);
      if (csa) {
        t.linear(a + "indexer.wq_b", int64_t{c.index_n_heads} * c.index_head_dim, c.q_lora_rank);
        t.bf16(a + "indexer.weights_proj.weight", {c.index_n_heads, d});
        compressor(t, a + "indexer.compressor.", c.ratio(i), 2, c.index_head_dim, d);
      }
    }
    const std::string f = p + "ffn.";
    t.bf16(f + "gate.weight", {E, d});
    if (c.hash_routed[static_cast<size_t>(i)]) {
      t.list.push_back(
          {f + "gate.tid2eid", Kind::I64, Fill::TidEid, {c.vocab_size, c.experts_per_token}, E});
    } else {
      t.f32(f + "gate.bias", {E});
    }
    const int shared = inter * std::max(1, c.n_shared_experts);
    t.linear(f + "shared_experts.w1", shared, d);
    t.linear(f + "shared_experts.w2", d, shared);
    t.linear(f + "shared_experts.w3", shared, d);
    for (int e = 0; e < E; ++e) {
      const std::string x = f + "experts." + std::to_string(e) + ".";
      t.expert(x + "w1", inter, d);
      t.expert(x + "w2", d, inter);
      t.expert(x + "w3", inter, d);
    }
  }
  return std::move(t.list);
}

// ---- values -------------------------------------------------------------------------------------
uint64_t mix64(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return mix64(seed ^ h);
}

uint16_t to_bf16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even (values are finite)
  return static_cast<uint16_t>(u >> 16);
}

// Uniform in (-a, a) from 16 random bits.
float uniform16(uint64_t bits, float a) {
  return (static_cast<float>(bits & 0xFFFFu) * (1.0f / 32768.0f) - 1.0f) * a;
}

constexpr float kWeightAmp = 0.0346f;  // uniform(±a): std 0.02 (HF's initializer_range)
constexpr float kSmallAmp = 0.02f;

// Calls f(i, r) for i in [e0, e1), r = the 64-bit draw shared by the `per` elements of i's group
// (one hash per group, not per element).
template <class F>
void by_group(uint64_t s, int64_t e0, int64_t e1, int per, F f) {
  for (int64_t i = e0; i < e1;) {
    const int64_t g = i / per;
    const uint64_t r = mix64(s + static_cast<uint64_t>(g));
    for (const int64_t end = std::min(e1, (g + 1) * per); i < end; ++i) f(i, r);
  }
}

// Fills elements [e0, e1) of t at dst (dst points at element 0 of the tensor).
void fill_range(const Tensor& t, uint64_t s, uint8_t* dst, int64_t e0, int64_t e1) {
  switch (t.kind) {
    case Kind::BF16: {
      auto* p = reinterpret_cast<uint16_t*>(dst);
      if (t.fill == Fill::One) {
        std::fill(p + e0, p + e1, uint16_t{0x3F80});
        break;
      }
      by_group(s, e0, e1, 4, [&](int64_t i, uint64_t r) {
        p[i] = to_bf16(uniform16(r >> (16 * (i & 3)), kWeightAmp));
      });
      break;
    }
    case Kind::F32: {
      for (int64_t i = e0; i < e1; ++i) {
        const float v = t.fill == Fill::One ? 1.0f : uniform16(mix64(s + i), kSmallAmp);
        std::memcpy(dst + 4 * i, &v, 4);
      }
      break;
    }
    case Kind::F8:  // sign, exponent field 5..8 (2^-2 … 2^1), random mantissa: never NaN
      by_group(s, e0, e1, 8, [&](int64_t i, uint64_t r) {
        const uint64_t b = r >> (8 * (i & 7));
        dst[i] = static_cast<uint8_t>((b & 0x80u) | ((5u + ((b >> 3) & 3u)) << 3) | (b & 7u));
      });
      break;
    case Kind::I8:  // two random e2m1 codes per byte (every code is a finite value)
      by_group(s, e0, e1, 8,
               [&](int64_t i, uint64_t r) { dst[i] = static_cast<uint8_t>(r >> (8 * (i & 7))); });
      break;
    case Kind::E8M0:
      std::memset(dst + e0, kScaleE8M0, static_cast<size_t>(e1 - e0));
      break;
    case Kind::I64: {  // tid2eid: k distinct experts per token (whole rows only)
      const int64_t k = t.shape[1];
      for (int64_t row = e0 / k; row < e1 / k; ++row) {
        int64_t picked[64];
        uint64_t r = mix64(s + static_cast<uint64_t>(row));
        for (int64_t j = 0; j < k; ++j) {
          int64_t e;
          bool again;
          do {
            r = mix64(r);
            e = static_cast<int64_t>(r % static_cast<uint64_t>(t.tid_experts));
            again = std::find(picked, picked + j, e) != picked + j;
          } while (again);
          picked[j] = e;
          std::memcpy(dst + 8 * (row * k + j), &e, 8);
        }
      }
      break;
    }
  }
}

Status write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return Error{"cannot write " + path};
  return Status::Ok();
}

}  // namespace

Result<SyntheticFormat> parse_synthetic_format(const std::string& name) {
  if (name == "bf16") return SyntheticFormat::Bf16;
  if (name == "fp8") return SyntheticFormat::Fp8;
  return Error{"unknown weight format \"" + name + "\" (expected bf16 or fp8)"};
}

const char* to_string(SyntheticFormat format) {
  return format == SyntheticFormat::Fp8 ? "fp8" : "bf16";
}

Json v4_flash_slice_config(int layers, SyntheticFormat format) {
  return slice_config(layers, format,
                      {129280, 4096, 64, 512, 64, 1024, 1024, 8, 64, 128, 512, 256, 2048});
}

Json tiny_slice_config(int layers, SyntheticFormat format) {
  return slice_config(layers, format, {1024, 256, 4, 128, 64, 128, 128, 2, 4, 64, 16, 16, 128});
}

Result<SyntheticResult> write_synthetic_checkpoint(const Json& config, const std::string& dir,
                                                   SyntheticFormat format,
                                                   const SyntheticOptions& options) {
  auto parsed = parse_model_config(config);
  if (!parsed) return Error{"synthetic checkpoint: " + parsed.error().message};
  const ModelConfig& c = parsed.value();
  if (format == SyntheticFormat::Fp8 && (c.hidden_size % 32 || c.moe_intermediate % 32)) {
    return Error{"synthetic checkpoint: FP4 experts need hidden and expert widths divisible by 32"};
  }
  if (c.experts_per_token > 64) return Error{"synthetic checkpoint: top-k above 64"};
  std::vector<Tensor> ts = tensors_for(c, format);
  // Widest element first: every tensor then starts at a multiple of its own element size.
  std::stable_sort(ts.begin(), ts.end(), [](const Tensor& a, const Tensor& b) {
    return kind_size(a.kind) > kind_size(b.kind);
  });

  JsonObject header;
  JsonObject meta;
  meta["format"] = "pt";
  header["__metadata__"] = std::move(meta);
  uint64_t off = 0;
  for (auto& t : ts) {
    t.offset = off;
    JsonObject e;
    e["dtype"] = kind_name(t.kind);
    JsonArray shape;
    for (int64_t s : t.shape) shape.push_back(s);
    e["shape"] = std::move(shape);
    e["data_offsets"] = JsonArray{static_cast<int64_t>(off), static_cast<int64_t>(off) + t.bytes()};
    header[t.name] = std::move(e);
    off += static_cast<uint64_t>(t.bytes());
  }
  std::string htext = to_json(header);
  while ((htext.size() + 8) % 8) htext += ' ';
  const uint64_t data_start = 8 + htext.size();
  const uint64_t total = data_start + off;

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error{"cannot create " + dir + ": " + ec.message()};
  if (Status s = write_text(dir + "/config.json", to_json(config) + "\n"); !s) return s.error();

  const std::string path = dir + "/model.safetensors";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return Error{"cannot create " + path + ": " + std::strerror(errno)};
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) {
    const std::string e = std::strerror(errno);
    ::close(fd);
    return Error{"cannot size " + path + " to " + std::to_string(total) + " bytes: " + e};
  }
  void* map = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    const std::string e = std::strerror(errno);
    ::close(fd);
    return Error{"cannot map " + path + ": " + e};
  }
  auto* base = static_cast<uint8_t*>(map);
  const uint64_t hl = htext.size();
  std::memcpy(base, &hl, 8);
  std::memcpy(base + 8, htext.data(), htext.size());

  // Work items: pieces of at most 4 Mi elements (tid2eid stays whole: rows are drawn together).
  struct Piece {
    size_t tensor;
    int64_t e0, e1;
  };
  std::vector<Piece> pieces;
  std::vector<uint64_t> seeds(ts.size());
  const int64_t step = int64_t{1} << 22;
  for (size_t i = 0; i < ts.size(); ++i) {
    seeds[i] = name_seed(options.seed, ts[i].name);
    const int64_t n = ts[i].numel();
    if (ts[i].fill == Fill::TidEid) {
      pieces.push_back({i, 0, n});
      continue;
    }
    for (int64_t e = 0; e < n; e += step) pieces.push_back({i, e, std::min(n, e + step)});
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < pieces.size();) {
      const Piece& p = pieces[k];
      fill_range(ts[p.tensor], seeds[p.tensor], base + data_start + ts[p.tensor].offset, p.e0,
                 p.e1);
    }
  };
  std::vector<std::thread> workers;
  for (int i = 1; i < std::max(1, options.threads); ++i) workers.emplace_back(work);
  work();
  for (auto& w : workers) w.join();

  const bool unmapped = ::munmap(map, total) == 0;
  const bool closed = ::close(fd) == 0;
  if (!unmapped || !closed) return Error{"cannot finish " + path + ": " + std::strerror(errno)};
  return SyntheticResult{static_cast<int64_t>(ts.size()), static_cast<int64_t>(total)};
}

}  // namespace deepinfer::model
