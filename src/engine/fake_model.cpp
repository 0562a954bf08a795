// FakeModel: integer hashing only, so every result is bitwise reproducible.
#include "engine/fake_model.h"

#include <algorithm>
#include <string>

namespace deepinfer::engine {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t token_kv(uint64_t previous, int32_t token, int32_t position, int64_t work) {
  uint64_t h =
      mix(previous ^ mix(static_cast<uint64_t>(token) << 32 | static_cast<uint32_t>(position)));
  for (int64_t i = 0; i < work; ++i) h = mix(h);
  return h;
}

uint64_t window_hash(const std::vector<uint64_t>& ring, int32_t position, int32_t window) {
  uint64_t h = 0;
  for (int32_t k = 0; k < window; ++k) {  // oldest to newest
    const int32_t p = position - window + 1 + k;
    h = mix(h ^ (p >= 0 ? ring[p % window] : 0));
  }
  return h;
}

void fill_row(uint64_t state, std::span<float> row) {
  for (size_t v = 0; v < row.size(); ++v) {
    const uint64_t h = mix(state ^ (v * 0xD1B54A32D192ED03ull));
    row[v] = static_cast<float>(h >> 40) * (8.0f / 16777216.0f) - 4.0f;  // [-4, 4), 2^-21 grid
  }
}

}  // namespace

FakeModel::FakeModel(const FakeModelConfig& config) : config_(config) {}

Status FakeModel::allocate(const KvCacheConfig& config) {
  block_size_ = config.block_size;
  kv_.assign(static_cast<size_t>(config.num_blocks) * block_size_, 0);
  written_.assign(kv_.size(), 0);
  slots_.assign(config.num_state_slots, Window{std::vector<uint64_t>(config_.window, 0)});
  snapshots_.assign(config_.snapshots ? config.num_blocks : 0,
                    Window{std::vector<uint64_t>(config_.window, 0)});
  return Status::Ok();
}

Status FakeModel::execute(std::span<const RunnerSequence> batch, std::span<float> logits) {
  size_t row = 0;
  for (const RunnerSequence& seq : batch) {
    if (seq.slot < 0 || seq.slot >= static_cast<int32_t>(slots_.size()))
      return Error{"fake model: bad state slot " + std::to_string(seq.slot)};
    const int32_t end = seq.start + static_cast<int32_t>(seq.tokens.size());
    if (static_cast<int64_t>(seq.block_table.size()) * block_size_ < end)
      return Error{"fake model: block table too short"};
    Window& state = slots_[seq.slot];
    if (seq.fresh) {
      if (seq.start == 0) {
        std::fill(state.ring.begin(), state.ring.end(), 0);
      } else {
        if (!config_.snapshots || seq.start % block_size_ != 0)
          return Error{"fake model: a prefix hit needs snapshots at a block boundary"};
        state = snapshots_[seq.block_table[seq.start / block_size_ - 1]];
      }
    }
    auto at = [&](int32_t p) -> size_t {
      return static_cast<size_t>(seq.block_table[p / block_size_]) * block_size_ + p % block_size_;
    };
    uint64_t previous = 0;
    if (seq.start > 0) {
      const size_t i = at(seq.start - 1);
      if (!written_[i])
        return Error{"fake model: position " + std::to_string(seq.start - 1) +
                     " read before it was written"};
      previous = kv_[i];
    }
    for (int32_t k = 0; k < static_cast<int32_t>(seq.tokens.size()); ++k) {
      const int32_t p = seq.start + k;
      if (seq.tokens[k] < 0 || seq.tokens[k] >= config_.vocab_size)
        return Error{"fake model: token id out of range"};
      previous = token_kv(previous, seq.tokens[k], p, config_.work_per_token);
      kv_[at(p)] = previous;
      written_[at(p)] = 1;
      state.ring[p % config_.window] = mix(static_cast<uint64_t>(seq.tokens[k]) + 1);
      if (config_.snapshots && (p + 1) % block_size_ == 0)
        snapshots_[seq.block_table[(p + 1) / block_size_ - 1]] = state;
    }
    tokens_processed_ += static_cast<int64_t>(seq.tokens.size());
    if (seq.want_logits) {
      const uint64_t s = previous ^ window_hash(state.ring, end - 1, config_.window);
      fill_row(s, logits.subspan(row * config_.vocab_size, config_.vocab_size));
      ++row;
    }
  }
  return Status::Ok();
}

std::vector<float> FakeModel::reference_logits(const FakeModelConfig& config,
                                               std::span<const int32_t> tokens) {
  uint64_t previous = 0;
  std::vector<uint64_t> ring(config.window, 0);
  const auto n = static_cast<int32_t>(tokens.size());
  for (int32_t p = 0; p < n; ++p) {
    previous = token_kv(previous, tokens[p], p, config.work_per_token);
    ring[p % config.window] = mix(static_cast<uint64_t>(tokens[p]) + 1);
  }
  std::vector<float> row(config.vocab_size);
  fill_row(previous ^ window_hash(ring, n - 1, config.window), row);
  return row;
}

}  // namespace deepinfer::engine
