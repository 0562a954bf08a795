#include "cli/bench_backend.h"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "model/model.h"

#ifdef DEEPINFER_HAVE_CUDA
#include <cuda_runtime.h>

#include "backend/cuda/cuda_model.h"
#endif

namespace deepinfer::cli {

int64_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "… kB"
  }
  return 0;
}

namespace {

// ---- CPU: model::Model, one forward per sequence
// -------------------------------------------------
class CpuBackend : public BenchBackend {
 public:
  CpuBackend(std::unique_ptr<model::Model> m, int threads)
      : m_(std::move(m)),
        threads_(threads),
        logits_(static_cast<size_t>(m_->config().vocab_size)) {}

  const model::ModelConfig& config() const override { return m_->config(); }
  std::string device_name() const override {
    return "cpu: " + std::to_string(threads_) + " threads";
  }

  Status prefill(std::span<const int32_t> ids) override {
    model::SequenceState st = m_->new_state();
    const int64_t last = static_cast<int64_t>(ids.size()) - 1;
    return m_->forward(st, ids, std::span<const int64_t>(&last, 1), logits_.data());
  }

  Status fill(int batch, std::span<const int32_t> prompt) override {
    if (static_cast<int>(slots_.size()) >= batch) return Status::Ok();
    if (slots_.empty()) {
      model::SequenceState st = m_->new_state();
      const int64_t last = static_cast<int64_t>(prompt.size()) - 1;
      if (Status s = m_->forward(st, prompt, std::span<const int64_t>(&last, 1), logits_.data());
          !s) {
        return s;
      }
      base_ = st;
    }
    while (static_cast<int>(slots_.size()) < batch) slots_.push_back(base_);  // synthetic fill
    return Status::Ok();
  }

  Status step(std::span<const int32_t> tokens) override {
    if (tokens.size() > slots_.size()) return Error{"decode batch larger than the filled slots"};
    // One batched step (every weight GEMM once for all sequences), as the engine runs it.
    const size_t vocab = static_cast<size_t>(m_->config().vocab_size);
    if (batch_logits_.size() < tokens.size() * vocab) batch_logits_.resize(tokens.size() * vocab);
    batch_.resize(tokens.size());
    for (size_t b = 0; b < tokens.size(); ++b) {
      batch_[b] = {&slots_[b], tokens.subspan(b, 1), std::span<const int64_t>(&zero_, 1),
                   batch_logits_.data() + b * vocab};
    }
    return m_->forward_batch(batch_);
  }

  int64_t weight_bytes() const override { return 0; }  // the mapped checkpoint
  int64_t state_bytes() const override {
    int64_t n = 0;
    for (const auto& s : slots_) n += state_size(s);
    return n + state_size(base_);
  }
  int64_t total_bytes() const override { return peak_rss_bytes(); }
  KvRowBytes kv_rows() const override {
    const auto& c = m_->config();
    KvRowBytes r{c.head_dim * 4, c.head_dim * 4, c.index_head_dim * 4};
    for (const auto& b : base_.blocks) {
      if (b.compressed.row_bytes) r.entry = b.compressed.row_bytes;
      if (b.index_keys.row_bytes) r.index_key = b.index_keys.row_bytes;
    }
    return r;
  }

 private:
  static int64_t state_size(const model::SequenceState& s) {
    int64_t n = 0;
    for (const auto& b : s.blocks) {
      n += static_cast<int64_t>(b.ring.size() + b.compressor.kv.size() + b.compressor.score.size() +
                                b.index_compressor.kv.size() + b.index_compressor.score.size()) *
               4 +
           static_cast<int64_t>(b.compressed.own.size() + b.index_keys.own.size());
    }
    return n;
  }

  std::unique_ptr<model::Model> m_;
  int threads_;
  std::vector<float> logits_, batch_logits_;
  std::vector<model::BatchSequence> batch_;
  const int64_t zero_ = 0;
  model::SequenceState base_;
  std::vector<model::SequenceState> slots_;
};

#ifdef DEEPINFER_HAVE_CUDA
// ---- CUDA: cuda::CudaModel, slot 0 for prefill, slots 0 … B−1 for decode ------------------------
class CudaBackend : public BenchBackend {
 public:
  explicit CudaBackend(std::unique_ptr<cuda::CudaModel> m)
      : m_(std::move(m)), logits_(static_cast<size_t>(m_->config().vocab_size)) {}

  const model::ModelConfig& config() const override { return m_->config(); }
  std::string device_name() const override { return "cuda: " + cuda::device_name(); }

  Status prefill(std::span<const int32_t> ids) override {
    filled_ = 0;  // slot 0 is reused
    m_->reset(0);
    const int64_t last = static_cast<int64_t>(ids.size()) - 1;
    if (Status s = m_->prefill(0, ids, std::span<const int64_t>(&last, 1), logits_.data()); !s) {
      return s;
    }
    return m_->synchronize();
  }

  // Slots 0 … B−1, one prompt each, packed into launches of up to --chunk-tokens rows.
  Status prefill_batch(std::span<const std::vector<int32_t>> prompts) override {
    if (prompts.size() == 1) return prefill(prompts[0]);
    filled_ = 0;
    std::vector<int> seqs(prompts.size());
    std::vector<std::span<const int32_t>> spans(prompts.size());
    for (size_t b = 0; b < prompts.size(); ++b) {
      seqs[b] = static_cast<int>(b);
      spans[b] = prompts[b];
      m_->reset(static_cast<int>(b));
    }
    batch_logits_.resize(prompts.size() * logits_.size());
    return m_->prefill_batch(seqs, spans, batch_logits_.data());
  }

  // One prefill of the prompt into slot 0, then device-side slot copies: every decode slot
  // starts from the same fresh context (earlier batch sizes' steps advanced slot 0).
  Status fill(int batch, std::span<const int32_t> prompt) override {
    filled_ = 0;
    if (batch <= 0) return Status::Ok();
    m_->reset(0);
    const int64_t last = static_cast<int64_t>(prompt.size()) - 1;
    if (Status s = m_->prefill(0, prompt, std::span<const int64_t>(&last, 1), logits_.data()); !s)
      return s;
    for (int k = 1; k < batch; ++k) {
      if (Status s = m_->copy_slot(0, k); !s) return s;
    }
    filled_ = batch;
    return m_->synchronize();
  }

  Status step(std::span<const int32_t> tokens) override {
    if (static_cast<int>(tokens.size()) > filled_) {
      return Error{"decode batch larger than the filled slots"};
    }
    seqs_.resize(tokens.size());
    for (size_t b = 0; b < tokens.size(); ++b) seqs_[b] = static_cast<int>(b);
    if (Status s = m_->decode(seqs_, tokens, nullptr, nullptr); !s) return s;
    return m_->synchronize();
  }

  int64_t weight_bytes() const override { return m_->weight_bytes(); }
  int64_t state_bytes() const override { return m_->state_bytes(); }
  int64_t total_bytes() const override {
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      return static_cast<int64_t>(total_b - free_b);
    }
    return m_->device_bytes();
  }
  KvRowBytes kv_rows() const override {  // the CPU reference's layout (fp32 rows)
    const auto& c = m_->config();
    return {c.head_dim * 4, c.head_dim * 4, c.index_head_dim * 4};
  }

 private:
  std::unique_ptr<cuda::CudaModel> m_;
  std::vector<float> logits_, batch_logits_;
  std::vector<int> seqs_;
  int filled_ = 0;
};
#endif

}  // namespace

Result<std::unique_ptr<BenchBackend>> make_cpu_backend(const std::string& dir,
                                                       const BenchBackendOptions& options) {
  auto m = model::Model::load(dir, {options.threads});
  if (!m) return m.error();
  auto b = std::make_unique<CpuBackend>(std::move(m.value()), options.threads);
  return std::unique_ptr<BenchBackend>(std::move(b));
}

Result<std::unique_ptr<BenchBackend>> make_cuda_backend(const std::string& dir,
                                                        const BenchBackendOptions& options) {
#ifdef DEEPINFER_HAVE_CUDA
  // DEEPINFER_CUDA_EMULATE=1 (tests): the kernel bodies on the host, as for serve.
  const char* env = std::getenv("DEEPINFER_CUDA_EMULATE");
  const bool emulate = env && std::string(env) == "1";
  if (!emulate && !cuda::device_available()) return Error{"no CUDA device: " + cuda::device_name()};
  cuda::CudaModelOptions o;
  o.emulate = emulate;
  o.max_sequences = options.max_batch;
  o.max_context = options.max_context;
  o.max_chunk_tokens = options.chunk_tokens;
  auto m = cuda::CudaModel::load(dir, o);
  if (!m) return m.error();
  return std::unique_ptr<BenchBackend>(std::make_unique<CudaBackend>(std::move(m.value())));
#else
  (void)dir;
  (void)options;
  return Error{"this build has no CUDA backend (configure with -DDEEPINFER_CUDA=ON)"};
#endif
}

}  // namespace deepinfer::cli
