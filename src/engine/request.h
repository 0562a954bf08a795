// Request: one generation's data as the scheduler sees it (plain struct; the Scheduler owns the
// policy, the KvCacheManager the memory). Lifecycle: waiting → running (chunked prefill, then
// decode) → finished; preemption returns a running request to the front of the queue.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace deepinfer::engine {

enum class FinishReason { kNone, kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "abort", "error"

enum class RequestStatus { kWaiting, kRunning, kFinished };

using Clock = std::chrono::steady_clock;

// The KV memory a request holds: block ids covering positions [0, block_table.size() * B),
// the hashes of its leading full blocks, and its slot of bounded per-sequence state.
struct SequenceKv {
  std::vector<int32_t> block_table;
  std::vector<uint64_t> block_hashes;  // hashes of blocks [0, block_hashes.size())
  int32_t num_cached_blocks = 0;       // leading blocks already published to the prefix cache
  int32_t state_slot = -1;
};

struct Request {
  uint64_t id = 0;
  SamplingParams params;
  uint64_t seed = 0;            // params.seed or drawn at submit
  std::vector<int32_t> tokens;  // prompt, then every known output token
  int32_t num_prompt = 0;
  int32_t num_computed = 0;   // positions whose KV is computed or scheduled in a step in flight
  int32_t num_confirmed = 0;  // positions whose KV a finished step has written
  int32_t num_pending = 0;    // tokens sampled by steps in flight, ids not known yet
  int32_t num_cached_prompt = -1;  // prompt tokens served by the prefix cache (first admission)
  int32_t num_preemptions = 0;
  RequestStatus status = RequestStatus::kWaiting;
  FinishReason finish_reason = FinishReason::kNone;
  SequenceKv kv;
  Clock::time_point arrival, first_token, last_token;

  int32_t num_output() const { return static_cast<int32_t>(tokens.size()) - num_prompt; }
  // Tokens the request will have once the steps in flight report back.
  int32_t num_tokens_ahead() const { return static_cast<int32_t>(tokens.size()) + num_pending; }
};

}  // namespace deepinfer::engine
