// A ModelRunner for server tests that "generates" a fixed script of token ids whatever the
// prompt: the logits row of a sequence's k-th decode step is one-hot at script[k] (then EOS).
// It lets the HTTP tests check real reasoning / tool-call output end to end without weights.
#pragma once

#include <map>
#include <mutex>
#include <vector>

#include "engine/model_runner.h"

namespace deepinfer::server::testing {

class ScriptedModel final : public engine::ModelRunner {
 public:
  ScriptedModel(int32_t vocab_size, std::vector<int32_t> script, int32_t eos)
      : vocab_(vocab_size), script_(std::move(script)), eos_(eos) {}

  int32_t vocab_size() const override { return vocab_; }
  int64_t bytes_per_block(int32_t block_size) const override { return block_size; }
  int64_t bytes_per_slot() const override { return 1; }
  bool exact_prefix_snapshots() const override { return false; }
  Status allocate(const engine::KvCacheConfig&) override { return Status::Ok(); }

  Status execute(std::span<const engine::RunnerSequence> batch, std::span<float> logits) override {
    size_t row = 0;
    for (const auto& seq : batch) {
      if (seq.fresh) steps_[seq.slot] = 0;
      if (!seq.want_logits) continue;
      float* out = logits.data() + row * static_cast<size_t>(vocab_);
      std::fill(out, out + vocab_, -30.0f);
      size_t& k = steps_[seq.slot];
      const int32_t next = k < script_.size() ? script_[k] : eos_;
      ++k;
      out[next] = 30.0f;
      ++row;
    }
    return Status::Ok();
  }

 private:
  int32_t vocab_;
  std::vector<int32_t> script_;
  int32_t eos_;
  std::map<int32_t, size_t> steps_;  // per state slot: decode steps so far
};

}  // namespace deepinfer::server::testing
