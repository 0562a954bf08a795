// CudaModel: loading (weights uploaded as shipped), state and scratch allocation, the public API.
#include <cuda_profiler_api.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>

#include "backend/cuda/device_model.cuh"
#include "backend/cuda/weight_upload.cuh"
#include "common/progress.h"
#include "model/rope.h"

namespace deepinfer::cuda {

bool device_available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::string device_name() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no CUDA device (") + cudaGetErrorString(e) + ")";
  if (n == 0) return "no CUDA device";
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return "CUDA device 0";
  return std::string(p.name) + " (" + std::to_string(p.multiProcessorCount) + " SMs, " +
         std::to_string(p.totalGlobalMem >> 20) + " MiB)";
}

const float* CudaModel::Impl::upload_floats(const std::vector<float>& v) {
  DeviceArray<uint8_t> b;
  b.upload(exec, reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float));
  weight_bytes += static_cast<int64_t>(b.bytes());
  const float* p = reinterpret_cast<const float*>(b.ptr);
  blobs.push_back(std::move(b));
  return p;
}

DevWeight upload_weight(Exec& exec, const cpu::WeightView& w,
                        std::vector<DeviceArray<uint8_t>>& blobs, int64_t& weight_bytes) {
  DevWeight d;
  d.out = w.out;
  d.in = w.in;
  d.stride = w.stride();
  d.quantize_input = w.quantize_input;
  size_t elem_bytes_x2 = 8;  // bytes per element × 2
  switch (w.format) {
    case cpu::WeightFormat::F32:
      d.format = DevFormat::F32;
      break;
    case cpu::WeightFormat::BF16:
      d.format = DevFormat::BF16;
      elem_bytes_x2 = 4;
      break;
    case cpu::WeightFormat::FP8_E4M3_BLOCK:
      d.format = DevFormat::FP8;
      elem_bytes_x2 = 2;
      break;
    case cpu::WeightFormat::FP4_E2M1_BLOCK32:
      d.format = DevFormat::FP4;
      elem_bytes_x2 = 1;
      break;
  }
  const size_t bytes = static_cast<size_t>(w.out * d.stride) * elem_bytes_x2 / 2;
  DeviceArray<uint8_t> b;
  b.upload(exec, static_cast<const uint8_t*>(w.data), bytes);
  d.data = b.ptr;
  weight_bytes += static_cast<int64_t>(b.bytes());
  blobs.push_back(std::move(b));
  if (d.quantized()) {
    d.block_out = std::max(1, w.block_out);
    d.block_in = std::max(1, w.block_in);
    d.scale_stride = w.scale_stride;
    d.scale_f32 = w.scale_format == cpu::ScaleFormat::F32;
    const int64_t srows = (w.out + d.block_out - 1) / d.block_out;
    const size_t sbytes = static_cast<size_t>(srows * w.scale_stride) * (d.scale_f32 ? 4 : 1);
    DeviceArray<uint8_t> s;
    s.upload(exec, static_cast<const uint8_t*>(w.scale), sbytes);
    d.scale = s.ptr;
    weight_bytes += static_cast<int64_t>(s.bytes());
    blobs.push_back(std::move(s));
  }
  return d;
}

DevWeight CudaModel::Impl::upload_weight(const cpu::WeightView& w) {
  return cuda::upload_weight(exec, w, blobs, weight_bytes);
}

Status CudaModel::Impl::upload(const model::Model& m) {
  const model::ModelWeights& w = m.weights();
  cfg = m.config();
  official = cfg.numerics == model::Numerics::Official;
  for (int i = 0; i < cfg.num_layers; ++i) {
    if (cfg.kind(i) == model::AttentionKind::Csa && cfg.index_head_dim > 256) {
      return Error{"CUDA backend: index_head_dim above 256 is not supported"};
    }
  }
  if (cfg.scoring_func != "sqrtsoftplus" && cfg.scoring_func != "sigmoid" &&
      cfg.scoring_func != "softmax") {
    return Error{"CUDA backend: unknown scoring_func " + cfg.scoring_func};
  }
  embed_table = upload_weight(w.embed);
  head = upload_weight(w.head);
  norm = upload_floats(w.norm);
  auto hc = [&](const model::HyperConnectionWeights& h) {
    DevHc d;
    d.fn = upload_weight(h.fn);
    d.base = upload_floats(h.base);
    d.scale = upload_floats(h.scale);
    return d;
  };
  auto comp = [&](const model::CompressorWeights& c) {
    DevCompressor d;
    d.wkv = upload_weight(c.wkv);
    d.wgate = upload_weight(c.wgate);
    d.ape = upload_floats(c.ape);
    d.norm = upload_floats(c.norm);
    return d;
  };
  auto experts = [&](const std::vector<model::ExpertWeights>& ex, int which) {
    std::vector<DevWeight> host;
    for (const auto& e : ex)
      host.push_back(upload_weight(which == 1 ? e.w1 : which == 2 ? e.w2 : e.w3));
    DeviceArray<uint8_t> b;
    b.upload(exec, reinterpret_cast<const uint8_t*>(host.data()), host.size() * sizeof(DevWeight));
    const DevWeight* p = reinterpret_cast<const DevWeight*>(b.ptr);
    blobs.push_back(std::move(b));
    const bool quant = !host.empty() && host[0].quantized() && host[0].quantize_input;
    bool alike = !host.empty();
    for (const DevWeight& h : host) {
      const DevWeight& f = host[0];
      alike = alike && h.format == f.format && h.out == f.out && h.in == f.in &&
              h.stride == f.stride && h.scale_stride == f.scale_stride && h.row0 == f.row0 &&
              h.block_in == f.block_in && h.block_out == f.block_out &&
              h.scale_f32 == f.scale_f32 && aligned16(h.data) == aligned16(f.data) &&
              aligned16(h.scale) == aligned16(f.scale);
    }
    return std::make_tuple(p, quant, host.empty() ? DevFormat::F32 : host[0].format,
                           host.empty() ? DevWeight{} : host[0], alike);
  };
  hc_head_w = hc(w.hc_head);
  blocks.resize(w.blocks.size());
  std::optional<ProgressBar> bar;
  if (opt.progress) bar.emplace("upload to the GPU", w.blocks.size(), "layers");
  for (size_t i = 0; i < w.blocks.size(); ++i) {
    if (bar && i > 0) bar->advance();
    const model::BlockWeights& b = w.blocks[i];
    DevBlock& d = blocks[i];
    d.hc_attn = hc(b.hc_attn);
    d.hc_ffn = hc(b.hc_ffn);
    d.attn_norm = upload_floats(b.attn_norm);
    d.ffn_norm = upload_floats(b.ffn_norm);
    d.attn_sink = upload_floats(b.attn_sink);
    d.wq_a = upload_weight(b.wq_a);
    d.wq_b = upload_weight(b.wq_b);
    d.wkv = upload_weight(b.wkv);
    d.wo_a = upload_weight(b.wo_a);
    d.wo_b = upload_weight(b.wo_b);
    d.q_norm = upload_floats(b.q_norm);
    d.kv_norm = upload_floats(b.kv_norm);
    d.has_compressor = b.has_compressor;
    d.has_indexer = b.has_indexer;
    if (b.has_compressor) d.compressor = comp(b.compressor);
    if (b.has_indexer) {
      d.index_compressor = comp(b.indexer.compressor);
      d.index_wq_b = upload_weight(b.indexer.wq_b);
      d.index_weights_proj = upload_weight(b.indexer.weights_proj);
    }
    d.gate = upload_weight(b.gate);
    std::vector<float> bias = b.gate_bias;
    if (bias.empty()) bias.assign(static_cast<size_t>(cfg.n_routed_experts), 0.0f);
    d.gate_bias = upload_floats(bias);
    if (!b.tid2eid.empty()) {
      DeviceArray<uint8_t> t;
      t.upload(exec, reinterpret_cast<const uint8_t*>(b.tid2eid.data()),
               b.tid2eid.size() * sizeof(int32_t));
      d.tid2eid = reinterpret_cast<const int32_t*>(t.ptr);
      weight_bytes += static_cast<int64_t>(t.bytes());
      blobs.push_back(std::move(t));
    }
    d.ffn.w1 = upload_weight(b.shared.w1);
    d.ffn.w2 = upload_weight(b.shared.w2);
    d.ffn.w3 = upload_weight(b.shared.w3);
    auto [r1, q1, f1, e1, u1] = experts(b.experts, 1);
    auto [r2, q2, f2, e2, u2] = experts(b.experts, 2);
    auto [r3, q3, f3, e3, u3] = experts(b.experts, 3);
    d.ffn.e1 = e1, d.ffn.e2 = e2, d.ffn.e3 = e3;
    d.ffn.uniform1 = u1, d.ffn.uniform2 = u2, d.ffn.uniform3 = u3;
    d.ffn.f1 = f1;
    d.ffn.f2 = f2;
    d.ffn.f3 = f3;
    d.ffn.r1 = r1;
    d.ffn.r2 = r2;
    d.ffn.r3 = r3;
    d.ffn.routed_quantized = q1 && q2 && q3;
  }
  if (bar) {
    bar->advance();
    bar->finish();
  }
  const model::RopeTable mr = model::make_rope_table(cfg.main_rope, cfg.rope_dim);
  const model::RopeTable cr = model::make_rope_table(cfg.compress_rope, cfg.rope_dim);
  main_inv = upload_floats(mr.inv_freq);
  comp_inv = upload_floats(cr.inv_freq);
  main_af = mr.attention_factor;
  comp_af = cr.attention_factor;
  return exec.sync();
}

CudaKvBytes cuda_kv_bytes(const model::ModelConfig& c, int32_t block_size) {
  CudaKvBytes b;
  const int64_t f = sizeof(float);
  for (int i = 0; i < c.num_layers; ++i) {
    b.bounded += int64_t{c.sliding_window} * c.head_dim * f;
    const int r = c.ratio(i);
    if (r <= 0) continue;
    const bool csa = c.kind(i) == model::AttentionKind::Csa;
    // The same buffers as allocate_state_and_scratch(): tails kv + score [rows, width], store.
    auto store = [&](int64_t dim, bool overlap) {
      const int64_t k = overlap ? 2 : 1;
      b.bounded += 2 * (k * r) * (k * dim) * f;
      b.block_entries += int64_t{entry_rows_per_block(block_size, r)} * dim * f;
    };
    store(c.head_dim, csa);
    if (csa) store(c.index_head_dim, true);
  }
  return b;
}

int32_t cuda_default_block_size(const model::ModelConfig& c) {
  int64_t bs = 1;
  for (int r : c.compress_ratios)
    if (r > 0) bs = std::lcm(bs, int64_t{r});
  return static_cast<int32_t>(std::min<int64_t>(bs, 1 << 16));
}

void CudaModel::Impl::allocate_state_and_scratch() {
  const model::ModelConfig& c = cfg;
  const int S = opt.max_sequences;
  const int64_t d = c.hidden_size, hc = c.hc_mult, H = c.n_heads, D = c.head_dim;
  const int64_t W = c.sliding_window;
  int64_t max_width = 1, max_cap = 1, max_icap = 1;
  // Block tables: preset to blocks of each slot's own (replaced by set_block_table).
  max_blocks = static_cast<int32_t>((opt.max_context + block_size - 1) / block_size);
  host_tables.assign(static_cast<size_t>(int64_t{S} * max_blocks), 0);
  for (int64_t i = 0; i < int64_t{S} * max_blocks; ++i)
    host_tables[static_cast<size_t>(i)] = static_cast<int32_t>(i % num_blocks);
  tables.upload(exec, host_tables);
  workspace_bytes += static_cast<int64_t>(tables.bytes());
  layers.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    LayerState& L = layers[static_cast<size_t>(i)];
    L.ring.allocate(exec, static_cast<size_t>(S * W * D));
    state_bytes += static_cast<int64_t>(L.ring.bytes());
    host_regions.push_back({L.ring.ptr, W * D, 0});
    const int r = c.ratio(i);
    if (r <= 0) continue;
    if (std::find(ratios.begin(), ratios.end(), r) == ratios.end()) ratios.push_back(r);
    const bool csa = c.kind(i) == model::AttentionKind::Csa;
    const int64_t cap = opt.max_context / r + 1;
    auto setup = [&](CompressorBuffers& cb, DeviceArray<float>& kv, DeviceArray<float>& sc,
                     DeviceArray<float>& store, int dim, bool overlap) {
      cb.ratio = r;
      cb.dim = dim;
      cb.overlap = overlap;
      cb.width = (overlap ? 2 : 1) * dim;
      cb.rows = (overlap ? 2 : 1) * r;
      cb.capacity = cap;
      cb.pages.tables = tables.ptr;
      cb.pages.max_blocks = max_blocks;
      cb.pages.block_size = block_size;
      cb.pages.ratio = r;
      cb.pages.per_block = entry_rows_per_block(block_size, r);
      const int64_t tail = int64_t{cb.rows} * cb.width;
      kv.allocate(exec, static_cast<size_t>(S * tail));
      sc.allocate(exec, static_cast<size_t>(S * tail));
      store.allocate(exec, static_cast<size_t>(int64_t{num_blocks} * cb.pages.per_block * dim));
      cb.kv = kv.ptr;
      cb.score = sc.ptr;
      cb.store = store.ptr;
      host_regions.push_back({kv.ptr, tail, 0});
      host_regions.push_back({sc.ptr, tail, 0});
      state_bytes += static_cast<int64_t>(kv.bytes() + sc.bytes() + store.bytes());
      max_width = std::max<int64_t>(max_width, cb.width);
    };
    setup(L.comp, L.ckv, L.csc, L.cstore, c.head_dim, csa);
    max_cap = std::max(max_cap, csa ? int64_t{c.index_topk} : cap);
    if (csa) {
      setup(L.icomp, L.ikv, L.isc, L.istore, c.index_head_dim, true);
      max_icap = std::max(max_icap, cap);
    }
  }
  std::sort(ratios.begin(), ratios.end());
  for (SnapshotRegion& g : host_regions) {
    g.offset = snapshot_floats;
    snapshot_floats += g.per_slot;
  }
  regions.upload(exec, host_regions);
  if (opt.block_snapshots) {
    snapshots.allocate(exec, static_cast<size_t>(int64_t{num_blocks} * snapshot_floats));
    state_bytes += static_cast<int64_t>(snapshots.bytes());
  }
  N = std::max<int64_t>(opt.max_chunk_tokens, S);
  const int64_t E = c.n_routed_experts, K = c.experts_per_token, inter = c.moe_intermediate;
  const int64_t inter_sh = blocks.empty() ? inter : blocks[0].ffn.w1.out;
  const int64_t qlr = c.q_lora_rank, G = c.o_groups, olr = c.o_lora_rank;
  const int64_t ih = std::max(1, c.index_n_heads), ihd = std::max(1, c.index_head_dim);
  const int64_t mixw = (2 + hc) * hc;
  const int64_t max_in = std::max({hc * d, H * D, qlr, G * olr, d, inter_sh, K * inter});
  auto f = [&](DeviceArray<float>& a, int64_t n) {
    a.allocate(exec, static_cast<size_t>(std::max<int64_t>(n, 1)));
    workspace_bytes += static_cast<int64_t>(a.bytes());
  };
  f(X, N * hc * d);
  f(X2, N * hc * d);
  f(u, N * d);
  f(xn, N * d);
  f(y, N * d);
  f(pre, N * hc);
  f(post, N * hc);
  f(comb, N * hc * hc);
  f(mix, N * mixw);
  f(qa, N * qlr);
  f(qr, N * qlr);
  f(q, N * H * D);
  f(kv, N * D);
  f(o, N * H * D);
  f(z, N * G * olr);
  f(ca, N * max_width);
  f(cg, N * max_width);
  f(ica, N * max_width);  // the index compressor's, beside the main one's (one launch of both)
  f(icg, N * max_width);
  f(iq, N * ih * ihd);
  f(iw, N * ih);
  f(iscore, N * max_icap);
  f(probs, N * H * (W + max_cap));
  f(xq, N * max_in);
  f(xnq, N * d);
  f(Xr, N * hc * d);
  f(hh, N * d);
  f(lg, N * c.vocab_size);
  f(mlog, N * E);
  f(wts, N * K);
  f(sh1, N * inter_sh);
  f(sh3, N * inter_sh);
  f(shq, N * inter_sh);  // the shared expert's w2 input, its own: it may run beside xq's users
  f(rh1, N * K * inter);
  f(rh3, N * K * inter);
  f(rout, N * K * d);
  f(rss, N);
  sel.allocate(exec, static_cast<size_t>(N * std::max(1, c.index_topk)));
  cnt.allocate(exec, static_cast<size_t>(N));
  idx.allocate(exec, static_cast<size_t>(N * K));
  sample_specs.allocate(exec, static_cast<size_t>(S));
  sampled.allocate(exec, static_cast<size_t>(S));
  expert_plan.allocate(exec, N * K, static_cast<int>(E));
  const size_t meta_n =
      static_cast<size_t>(6 * N + 4 * S + ratios.size() * 4 * (N + S) + 2 * N + 16);
  meta.allocate(exec, meta_n);
  host_meta.resize(meta_n);
  workspace_bytes +=
      static_cast<int64_t>(sel.bytes() + cnt.bytes() + idx.bytes() + meta.bytes() +
                           sample_specs.bytes() + sampled.bytes() + expert_plan.bytes());
  positions.assign(static_cast<size_t>(S), 0);
}

CudaModel::CudaModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModel::~CudaModel() {
  if (impl_ && !impl_->exec.emulate && impl_->exec.stream) {
    cudaStreamSynchronize(impl_->exec.stream);
    for (auto& [n, g] : impl_->graphs) cudaGraphExecDestroy(g);
    impl_->blobs.clear();
    if (impl_->side_stream) cudaStreamDestroy(impl_->side_stream);
    if (impl_->fork_event) cudaEventDestroy(impl_->fork_event);
    if (impl_->join_event) cudaEventDestroy(impl_->join_event);
    if (impl_->index_stream) cudaStreamDestroy(impl_->index_stream);
    if (impl_->index_event) cudaEventDestroy(impl_->index_event);
    if (impl_->index_join_event) cudaEventDestroy(impl_->index_join_event);
  }
}

Result<std::unique_ptr<CudaModel>> CudaModel::from_model(const model::Model& cpu,
                                                         const CudaModelOptions& options) {
  if (options.max_sequences < 1 || options.max_chunk_tokens < 1 || options.max_context < 1) {
    return Error{"CUDA backend: max_sequences, max_chunk_tokens and max_context must be >= 1"};
  }
  if (options.block_size < 0 || options.num_blocks < 0)
    return Error{"CUDA backend: block_size and num_blocks must be >= 0"};
  const model::ModelConfig& cfg = cpu.config();
  const int32_t bs = options.block_size > 0 ? options.block_size : cuda_default_block_size(cfg);
  for (int r : cfg.compress_ratios) {
    if (r > 0 && bs % r != 0 && r % bs != 0)
      return Error{"CUDA backend: the KV block size " + std::to_string(bs) +
                   " must divide or be a multiple of every compress ratio (" + std::to_string(r) +
                   ")"};
  }
  auto impl = std::make_unique<Impl>();
  impl->opt = options;
  impl->block_size = bs;
  const int64_t own = int64_t{options.max_sequences} * ((options.max_context + bs - 1) / bs);
  impl->num_blocks = options.num_blocks > 0
                         ? options.num_blocks
                         : static_cast<int32_t>(std::min<int64_t>(own, INT32_MAX / 2));
  impl->exec.emulate = options.emulate;
  if (!options.emulate) {
    if (!device_available()) return Error{"CUDA backend: " + device_name()};
    if (cudaStreamCreateWithFlags(&impl->exec.stream, cudaStreamNonBlocking) != cudaSuccess) {
      return Error{"CUDA backend: cannot create a stream"};
    }
    if (cudaStreamCreateWithFlags(&impl->side_stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&impl->fork_event, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&impl->join_event, cudaEventDisableTiming) != cudaSuccess ||
        cudaStreamCreateWithFlags(&impl->index_stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&impl->index_event, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&impl->index_join_event, cudaEventDisableTiming) != cudaSuccess) {
      return Error{"CUDA backend: cannot create the side streams and their events"};
    }
  }
  if (Status s = impl->upload(cpu); !s) return s.error();
  impl->allocate_state_and_scratch();
  if (Status s = impl->exec.sync(); !s) return s.error();
  std::unique_ptr<CudaModel> m(new CudaModel(std::move(impl)));
  for (int i = 0; i < options.max_sequences; ++i) m->reset(i);
  if (Status s = m->impl_->exec.sync(); !s) return s.error();
  return Result<std::unique_ptr<CudaModel>>(std::move(m));
}

Result<std::unique_ptr<CudaModel>> CudaModel::load(const std::string& dir,
                                                   const CudaModelOptions& options) {
  auto cpu = model::Model::load(dir, {1});
  if (!cpu) return cpu.error();
  auto m = from_model(*cpu.value(), options);
  if (!m) return m.error();
  m.value()->impl_->owned = std::move(cpu.value());
  return m;
}

const model::ModelConfig& CudaModel::config() const { return impl_->cfg; }

void CudaModel::reset(int seq) {
  if (seq < 0 || seq >= impl_->opt.max_sequences) return;
  for (auto& L : impl_->layers) {
    if (L.comp.ratio > 0) compressor_reset(impl_->exec, L.comp, seq);
    if (L.icomp.ratio > 0) compressor_reset(impl_->exec, L.icomp, seq);
  }
  impl_->positions[static_cast<size_t>(seq)] = 0;
}

int64_t CudaModel::position(int seq) const {
  if (seq < 0 || seq >= impl_->opt.max_sequences) return -1;
  return impl_->positions[static_cast<size_t>(seq)];
}

Status CudaModel::copy_slot(int src, int dst) {
  Impl& m = *impl_;
  const int S = m.opt.max_sequences;
  if (src < 0 || src >= S || dst < 0 || dst >= S)
    return Error{"copy_slot: sequence slot out of range"};
  if (src == dst) return Status::Ok();
  const int64_t pos = m.positions[static_cast<size_t>(src)];
  auto copy = [&](float* base, int64_t per_slot, int64_t n) {
    const float* from = base + src * per_slot;
    float* to = base + dst * per_slot;
    m.exec.each(n, [=] DI_HD(int64_t i) { to[i] = from[i]; });
  };
  m.upload_tables();
  const int64_t ring = int64_t{m.cfg.sliding_window} * m.cfg.head_dim;
  for (LayerState& L : m.layers) {
    copy(L.ring.ptr, ring, ring);
    for (const CompressorBuffers* cb : {&L.comp, &L.icomp}) {
      if (cb->ratio <= 0) continue;
      const int64_t tail = int64_t{cb->rows} * cb->width;
      copy(cb->kv, tail, tail);
      copy(cb->score, tail, tail);
      // Entries 0 … pos / ratio − 1 are closed, each to its row through the slots' tables.
      const int64_t closed = std::min(cb->capacity, pos / cb->ratio);
      const int64_t dim = cb->dim;
      const EntryPages pages = cb->pages;
      float* store = cb->store;
      m.exec.each(closed * dim, [=] DI_HD(int64_t i) {
        const int64_t j = i / dim, k = i % dim;
        store[entry_row(pages, dst, j) * dim + k] = store[entry_row(pages, src, j) * dim + k];
      });
    }
  }
  m.positions[static_cast<size_t>(dst)] = pos;
  return m.exec.sync();
}

void CudaModel::Impl::upload_tables() {
  if (dirty_hi <= dirty_lo) return;
  const int64_t first = int64_t{dirty_lo} * max_blocks, rows = dirty_hi - dirty_lo;
  exec.to_device(tables.ptr + first, host_tables.data() + first,
                 static_cast<size_t>(rows * max_blocks) * sizeof(int32_t));
  dirty_lo = dirty_hi = 0;
}

Status CudaModel::set_block_table(int seq, std::span<const int32_t> table) {
  Impl& m = *impl_;
  if (seq < 0 || seq >= m.opt.max_sequences) return Error{"set_block_table: slot out of range"};
  if (static_cast<int64_t>(table.size()) > m.max_blocks)
    return Error{"set_block_table: " + std::to_string(table.size()) + " blocks, a slot holds " +
                 std::to_string(m.max_blocks)};
  int32_t* row = m.host_tables.data() + int64_t{seq} * m.max_blocks;
  if (std::equal(table.begin(), table.end(), row)) return Status::Ok();
  for (int32_t b : table)
    if (b < 0 || b >= m.num_blocks) return Error{"set_block_table: block id out of range"};
  std::copy(table.begin(), table.end(), row);
  if (m.dirty_hi <= m.dirty_lo) {
    m.dirty_lo = seq;
    m.dirty_hi = seq + 1;
  } else {
    m.dirty_lo = std::min(m.dirty_lo, seq);
    m.dirty_hi = std::max(m.dirty_hi, seq + 1);
  }
  return Status::Ok();
}

int32_t CudaModel::block_size() const { return impl_->block_size; }
int32_t CudaModel::num_blocks() const { return impl_->num_blocks; }

void CudaModel::Impl::copy_snapshot(int seq, int32_t block, bool save) {
  const SnapshotRegion* g = regions.ptr;
  const int n = static_cast<int>(host_regions.size());
  float* snap = snapshots.ptr + int64_t{block} * snapshot_floats;
  // One launch for every buffer: thread i finds its region by bisection over the offsets.
  exec.each(snapshot_floats, [=] DI_HD(int64_t i) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (g[mid].offset <= i)
        lo = mid;
      else
        hi = mid - 1;
    }
    float* state = g[lo].base + seq * g[lo].per_slot + (i - g[lo].offset);
    if (save)
      snap[i] = *state;
    else
      *state = snap[i];
  });
}

Status CudaModel::save_snapshot(int seq, int32_t block) {
  Impl& m = *impl_;
  if (!m.opt.block_snapshots) return Error{"save_snapshot: no block snapshots allocated"};
  if (seq < 0 || seq >= m.opt.max_sequences || block < 0 || block >= m.num_blocks)
    return Error{"save_snapshot: slot or block out of range"};
  m.copy_snapshot(seq, block, true);
  return Status::Ok();
}

Status CudaModel::restore_snapshot(int32_t block, int seq, int64_t position) {
  Impl& m = *impl_;
  if (!m.opt.block_snapshots) return Error{"restore_snapshot: no block snapshots allocated"};
  if (seq < 0 || seq >= m.opt.max_sequences || block < 0 || block >= m.num_blocks)
    return Error{"restore_snapshot: slot or block out of range"};
  if (position < 0 || position > m.opt.max_context)
    return Error{"restore_snapshot: position out of range"};
  m.copy_snapshot(seq, block, false);
  m.positions[static_cast<size_t>(seq)] = position;
  return Status::Ok();
}

int64_t CudaModel::weight_bytes() const { return impl_->weight_bytes; }
int64_t CudaModel::state_bytes() const { return impl_->state_bytes; }
int64_t CudaModel::workspace_bytes() const { return impl_->workspace_bytes; }

Status CudaModel::synchronize() { return impl_->exec.sync(); }

namespace {

// The comma-separated numbers of environment variable `name` (none when unset).
std::vector<int64_t> env_numbers(const char* name) {
  std::vector<int64_t> v;
  if (const char* env = std::getenv(name)) {
    std::stringstream ss(env);
    for (std::string item; std::getline(ss, item, ',');) v.push_back(std::atoll(item.c_str()));
  }
  return v;
}

// DEEPINFER_CUDA_PROFILE_BATCH=1,16: decode steps of those batch sizes run between
// cudaProfilerStart/Stop, so `ncu --profile-from-start off` times exactly their kernels
// (tools/bench/profile_decode.sh).
bool profiled_batch(int batch) {
  static const std::vector<int64_t> batches = env_numbers("DEEPINFER_CUDA_PROFILE_BATCH");
  return std::find(batches.begin(), batches.end(), batch) != batches.end();
}

// DEEPINFER_CUDA_PROFILE_PREFILL=0,7680: prefill chunks starting at those positions run between
// cudaProfilerStart/Stop, from the second prefill call that reaches one on (the first is a
// warm-up), so `ncu --profile-from-start off` times one chunk (tools/bench/profile_prefill.sh).
bool profiled_chunk(int64_t pos) {
  static const std::vector<int64_t> starts = env_numbers("DEEPINFER_CUDA_PROFILE_PREFILL");
  static int hits = 0;
  if (std::find(starts.begin(), starts.end(), pos) == starts.end()) return false;
  return ++hits > static_cast<int>(starts.size());
}

Status check_ids(const model::ModelConfig& c, std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    if (id < 0 || id >= c.vocab_size) {
      return Error{"token id " + std::to_string(id) + " outside the vocabulary [0, " +
                   std::to_string(c.vocab_size) + ")"};
    }
  }
  return Status::Ok();
}

}  // namespace

Status CudaModel::prefill(int seq, std::span<const int32_t> ids,
                          std::span<const int64_t> logit_rows, float* logits) {
  Impl& m = *impl_;
  if (seq < 0 || seq >= m.opt.max_sequences) return Error{"sequence slot out of range"};
  if (Status s = check_ids(m.cfg, ids); !s) return s;
  const int64_t total = static_cast<int64_t>(ids.size());
  for (int64_t r : logit_rows) {
    if (r < 0 || r >= total) {
      return Error{"logit row " + std::to_string(r) + " outside the " + std::to_string(total) +
                   " input tokens"};
    }
  }
  if (m.positions[static_cast<size_t>(seq)] + total > m.opt.max_context) {
    return Error{"sequence would exceed max_context (" + std::to_string(m.opt.max_context) + ")"};
  }
  const int64_t V = m.cfg.vocab_size;
  std::vector<int32_t> rows;
  std::vector<float> buf;
  for (int64_t start = 0; start < total; start += m.opt.max_chunk_tokens) {
    const int64_t n = std::min(m.opt.max_chunk_tokens, total - start);
    rows.clear();
    std::vector<size_t> which;
    for (size_t k = 0; k < logit_rows.size(); ++k) {
      if (logit_rows[k] >= start && logit_rows[k] < start + n) {
        rows.push_back(static_cast<int32_t>(logit_rows[k] - start));
        which.push_back(k);
      }
    }
    buf.resize(rows.size() * static_cast<size_t>(V));
    const Impl::Segment sg{seq, ids.subspan(static_cast<size_t>(start), static_cast<size_t>(n))};
    const bool profiled = profiled_chunk(m.positions[static_cast<size_t>(seq)]);
    if (profiled) (void)cudaProfilerStart();
    Status st = m.run(std::span<const Impl::Segment>(&sg, 1), rows, buf.data(), nullptr);
    if (profiled) {
      Status synced = st ? m.exec.sync() : std::move(st);
      (void)cudaProfilerStop();
      if (!synced) return synced;
    } else if (!st) {
      return st;
    }
    for (size_t i = 0; i < which.size(); ++i)
      std::copy_n(buf.data() + i * V, V, logits + which[i] * V);
  }
  return Status::Ok();
}

Status CudaModel::decode(std::span<const int> seqs, std::span<const int32_t> ids, float* logits,
                         int32_t* argmax, std::span<const SampleSpec> specs, int32_t* tokens) {
  Impl& m = *impl_;
  if (seqs.size() != ids.size()) return Error{"decode: seqs and ids differ in length"};
  if (static_cast<int64_t>(seqs.size()) > m.N) return Error{"decode: batch too large"};
  if (Status s = check_ids(m.cfg, ids); !s) return s;
  std::vector<Impl::Segment>& segs = m.decode_segs;
  std::vector<int32_t>& rows = m.decode_rows;
  std::vector<uint8_t>& seen = m.decode_seen;
  segs.clear();
  rows.clear();
  seen.assign(static_cast<size_t>(m.opt.max_sequences), 0);
  for (size_t b = 0; b < seqs.size(); ++b) {
    const int s = seqs[b];
    if (s < 0 || s >= m.opt.max_sequences || seen[static_cast<size_t>(s)])
      return Error{"decode: bad or repeated sequence slot " + std::to_string(s)};
    seen[static_cast<size_t>(s)] = 1;
    if (m.positions[static_cast<size_t>(s)] + 1 > m.opt.max_context)
      return Error{"sequence would exceed max_context"};
    segs.push_back({s, ids.subspan(b, 1)});
    rows.push_back(static_cast<int32_t>(b));
  }
  const bool profiled = profiled_batch(static_cast<int>(seqs.size()));
  if (profiled) (void)cudaProfilerStart();
  if (!specs.empty() && specs.size() != seqs.size()) return Error{"decode: one spec per row"};
  Status st = m.run(segs, rows, logits, argmax, specs, tokens);
  if (!profiled) return st;
  Status synced = st ? m.exec.sync() : std::move(st);
  (void)cudaProfilerStop();
  return synced;
}

}  // namespace deepinfer::cuda
