// TokenBitmask: the staging buffer, the one upload per step and the masking kernel (the same body
// runs as a host loop when emulated).
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cuda/exec.cuh"
#include "backend/cuda/token_bitmask.h"

namespace deepinfer::cuda {
namespace {

// One logit: token t of row r becomes -inf when the row is constrained and its bit is clear.
DI_HD inline void mask_logit(const uint64_t* flags, const uint64_t* masks, float* logits,
                             int64_t vocab, int64_t words, int64_t stride, int64_t r, int64_t t) {
  if (!flags[r] || t >= vocab) return;
  const uint64_t w = masks[r * words + (t >> 6)];
  if (!((w >> (t & 63)) & 1u)) logits[r * stride + t] = -INFINITY;
}

// grid = (ceil(V / kThreads), rows): a thread per token, so the writes of a warp are coalesced
// and its 32 lanes read one mask word; a block of an unconstrained row returns at once.
constexpr int kThreads = 256;
__global__ void mask_kernel(const uint64_t* flags, const uint64_t* masks, float* logits,
                            int64_t vocab, int64_t words, int64_t stride) {
  pdl_begin();
  const int64_t r = blockIdx.y;
  if (!flags[r]) return;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  mask_logit(flags, masks, logits, vocab, words, stride, r, t);
}

}  // namespace

struct TokenBitmask::Impl {
  Exec exec;
  int max_rows = 0;
  int64_t vocab = 0, words = 0;
  // Staging (pinned; host memory when emulated) and its device twin, laid out alike:
  // flags[max_rows] (1 = constrained) then masks[max_rows][words].
  uint64_t* staging = nullptr;
  uint64_t* device = nullptr;
  cudaEvent_t copied = nullptr;  // recorded after the upload (device mode)
  bool pending = false;          // an upload may still read the staging buffer

  uint64_t* flags() { return staging; }
  uint64_t* masks() { return staging + max_rows; }
  size_t staging_words() const {
    return static_cast<size_t>(max_rows) + static_cast<size_t>(max_rows) * words;
  }

  // Before the host writes the staging buffer: the last upload has read it; then every row goes
  // back to unconstrained.
  void begin_staging() {
    if (!pending) return;
    if (!exec.emulate) exec.note(cudaEventSynchronize(copied));
    std::memset(flags(), 0, static_cast<size_t>(max_rows) * sizeof(uint64_t));
    pending = false;
  }

  ~Impl() {
    if (exec.emulate) {
      std::free(staging);
      std::free(device);
      return;
    }
    if (copied) cudaEventDestroy(copied);
    if (staging) cudaFreeHost(staging);
    if (device) cudaFree(device);
  }
};

Result<std::unique_ptr<TokenBitmask>> TokenBitmask::create(const TokenBitmaskOptions& options) {
  if (options.vocab_size <= 0) return Error{"token bitmask: vocab_size must be positive"};
  if (options.max_rows < 1 || options.max_rows > 65535) {
    return Error{"token bitmask: max_rows must be in 1..65535, got " +
                 std::to_string(options.max_rows)};
  }
  auto impl = std::make_unique<Impl>();
  impl->exec.emulate = options.emulate;
  impl->exec.stream = static_cast<cudaStream_t>(options.stream);
  impl->max_rows = options.max_rows;
  impl->vocab = options.vocab_size;
  impl->words = token_bitmask_words(options.vocab_size);
  const size_t bytes = impl->staging_words() * sizeof(uint64_t);
  if (options.emulate) {
    const size_t rounded = (bytes + 255) / 256 * 256;
    impl->staging = static_cast<uint64_t*>(std::aligned_alloc(256, rounded));
    impl->device = static_cast<uint64_t*>(std::aligned_alloc(256, rounded));
    if (!impl->staging || !impl->device) return Error{"token bitmask: out of host memory"};
  } else {
    void* host = nullptr;
    void* dev = nullptr;
    cudaError_t e = cudaMallocHost(&host, bytes);
    impl->staging = static_cast<uint64_t*>(host);
    if (e == cudaSuccess) e = cudaMalloc(&dev, bytes);
    impl->device = static_cast<uint64_t*>(dev);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&impl->copied, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      return Error{std::string("token bitmask: CUDA: ") + cudaGetErrorString(e)};
    }
  }
  std::memset(impl->flags(), 0, static_cast<size_t>(impl->max_rows) * sizeof(uint64_t));
  return std::unique_ptr<TokenBitmask>(new TokenBitmask(std::move(impl)));
}

TokenBitmask::TokenBitmask(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TokenBitmask::~TokenBitmask() = default;

int64_t TokenBitmask::vocab_size() const { return impl_->vocab; }
int64_t TokenBitmask::words_per_row() const { return impl_->words; }
int TokenBitmask::max_rows() const { return impl_->max_rows; }

std::span<uint64_t> TokenBitmask::row(int r) {
  impl_->begin_staging();
  if (r < 0 || r >= impl_->max_rows) return {};
  impl_->flags()[r] = 1;
  return {impl_->masks() + static_cast<size_t>(r) * impl_->words,
          static_cast<size_t>(impl_->words)};
}

Status TokenBitmask::stage(int r, std::span<const uint64_t> mask) {
  if (r < 0 || r >= impl_->max_rows) {
    return Error{"token bitmask: row " + std::to_string(r) + " out of range"};
  }
  if (static_cast<int64_t>(mask.size()) != impl_->words) {
    return Error{"token bitmask: mask has " + std::to_string(mask.size()) + " words, expected " +
                 std::to_string(impl_->words)};
  }
  std::span<uint64_t> dst = row(r);
  std::memcpy(dst.data(), mask.data(), mask.size_bytes());
  return Status::Ok();
}

void TokenBitmask::set_unconstrained(int r) {
  impl_->begin_staging();
  if (r >= 0 && r < impl_->max_rows) impl_->flags()[r] = 0;
}

Status TokenBitmask::apply(float* logits, int rows, int64_t row_stride) {
  Impl& m = *impl_;
  if (rows < 0 || rows > m.max_rows) {
    return Error{"token bitmask: " + std::to_string(rows) + " rows, at most " +
                 std::to_string(m.max_rows)};
  }
  if (row_stride < m.vocab) return Error{"token bitmask: row stride below the vocabulary size"};
  if (rows == 0) return Status::Ok();
  if (!logits) return Error{"token bitmask: null logits"};
  m.begin_staging();  // nothing staged since the last apply: all rows unconstrained
  // One copy: every flag, then the masks of the rows in use.
  const size_t bytes =
      (static_cast<size_t>(m.max_rows) + static_cast<size_t>(rows) * m.words) * sizeof(uint64_t);
  m.exec.to_device(m.device, m.staging, bytes);
  if (!m.exec.emulate) m.exec.note(cudaEventRecord(m.copied, m.exec.stream));
  m.pending = true;
  const uint64_t* flags = m.device;
  const uint64_t* masks = m.device + m.max_rows;
  if (m.exec.emulate) {
    for (int64_t r = 0; r < rows; ++r) {
      if (!flags[r]) continue;  // as the kernel's blocks of an unconstrained row
      for (int64_t t = 0; t < m.vocab; ++t) {
        mask_logit(flags, masks, logits, m.vocab, m.words, row_stride, r, t);
      }
    }
  } else {
    const dim3 grid(static_cast<unsigned>((m.vocab + kThreads - 1) / kThreads),
                    static_cast<unsigned>(rows));
    m.exec.launch(mask_kernel, grid, kThreads, 0, flags, masks, logits, m.vocab, m.words,
                  row_stride);
    m.exec.note(cudaGetLastError());
  }
  if (m.exec.error != cudaSuccess) {
    return Error{std::string("token bitmask: CUDA: ") + cudaGetErrorString(m.exec.error)};
  }
  return Status::Ok();
}

Status TokenBitmask::synchronize() { return impl_->exec.sync(); }

}  // namespace deepinfer::cuda
