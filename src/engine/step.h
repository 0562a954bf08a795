// One engine step as values: the Scheduler writes a SchedulerOutput, the Executor runs it and
// writes a ModelOutput. Both are reused across steps (clear() keeps capacity), and carry copies,
// never pointers into requests, so a step can execute on another thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace deepinfer::engine {

// A request the executor has not seen (new, or resumed after preemption): everything it needs.
struct NewSequence {
  uint64_t request_id = 0;
  int32_t slot = 0;
  SamplingParams params;
  uint64_t seed = 0;
  std::vector<int32_t> tokens;  // prompt + known outputs
  int32_t num_prompt = 0;
  int32_t num_computed = 0;  // cached prefix length (a multiple of the block size)
  std::vector<int32_t> block_table;
};

// One request's share of the step: `num_new` tokens from position `start`. The token ids are
// the executor's own copy (it appends what it samples, so a decode needs no id from here).
struct ScheduledSequence {
  uint64_t request_id = 0;
  int32_t slot = 0;
  int32_t start = 0;
  int32_t num_new = 0;
  bool sample = false;           // the chunk ends at the last token: sample the next one
  int32_t new_blocks_begin = 0;  // range in SchedulerOutput::new_block_ids appended to the table
  int32_t new_blocks_count = 0;
};

struct RequestSlot {
  uint64_t request_id = 0;
  int32_t slot = 0;
};

struct SchedulerOutput {
  uint64_t step = 0;
  std::vector<RequestSlot> released;  // finished, aborted or preempted since the last step
  std::vector<NewSequence> new_sequences;
  std::vector<ScheduledSequence> scheduled;
  std::vector<int32_t> new_block_ids;
  int32_t num_tokens = 0;
  int32_t num_preempted = 0;

  bool empty() const { return scheduled.empty() && released.empty(); }
  void clear() {
    released.clear();
    new_sequences.clear();
    scheduled.clear();
    new_block_ids.clear();
    num_tokens = 0;
    num_preempted = 0;
  }
};

struct SampledToken {
  uint64_t request_id = 0;
  SampleResult result;
};

struct ModelOutput {
  uint64_t step = 0;
  Status status;                      // a model error fails every request of the step
  std::vector<SampledToken> sampled;  // one per ScheduledSequence with sample = true, in order
  double execute_seconds = 0.0;

  void clear() {
    status = Status::Ok();
    sampled.clear();
    execute_seconds = 0.0;
  }
};

}  // namespace deepinfer::engine
