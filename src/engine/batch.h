// Offline batch generation over an Engine: submit every request, wait for all of them, return
// the results in input order. A request rejected at submit gets its error in its own result.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace deepinfer::engine {

struct BatchResult {
  std::vector<int32_t> ids;            // generated token ids
  std::vector<SampleResult> logprobs;  // per token, when the request asked for logprobs
  FinishReason finish = FinishReason::kNone;
  Usage usage;
  std::string error;  // finish == kError
};

// progress(done, total) is called on the engine thread as requests finish.
std::vector<BatchResult> generate_batch(Engine& engine, std::vector<EngineRequest> requests,
                                        const std::function<void(size_t, size_t)>& progress = {});

}  // namespace deepinfer::engine
