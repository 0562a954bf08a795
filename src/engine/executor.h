// Executor: the model side of a step. It keeps its own copy of every live sequence (tokens,
// parameters, block table) by state slot, applies a SchedulerOutput, runs the ModelRunner and
// samples the rows (in parallel, one Sampler per thread; rows are independent).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/model_runner.h"
#include "engine/sampler.h"
#include "engine/step.h"
#include "engine/structured_request.h"
#include "engine/thread_pool.h"

namespace deepinfer::engine {

class Executor {
 public:
  Executor(ModelRunner& runner, int32_t num_slots, int32_t num_threads, int32_t max_model_len);

  // Runs one step; never throws. A runner error is reported in out.status.
  void execute(const SchedulerOutput& in, ModelOutput& out);

 private:
  struct Slot {
    bool live = false;
    uint64_t request_id = 0;
    bool fresh = false;
    SamplingParams params;
    uint64_t seed = 0;
    int32_t num_prompt = 0;
    std::vector<int32_t> tokens;
    std::vector<int32_t> block_table;
    // Structured output: the request's automaton (replayed over known outputs on admission)
    // and its allowed-token bitmask, sized for the larger of the model and grammar vocabularies.
    std::unique_ptr<structured::StructuredConstraint> constraint;
    std::vector<uint64_t> mask;
  };

  ModelRunner& runner_;
  int64_t max_reserve_;
  std::vector<Slot> slots_;
  ThreadPool pool_;
  std::vector<Sampler> samplers_;  // one per thread
  std::vector<RunnerSequence> batch_;
  std::vector<int32_t> sample_slots_;
  std::vector<float> logits_;
  std::vector<DeviceSample> device_samples_;  // one per sampled row (pointers stay put per step)
  std::vector<int32_t> device_tokens_;        // the runner's tokens per sampled row, or -1
};

}  // namespace deepinfer::engine
