// Hands a step's engine events to the I/O threads one batch per thread. The engine thread runs
// each request's callback in turn; with a thousand streams, doing a session's queueing work
// there (its lock, its inbox, a post to its thread) costs ~0.7 µs of cache misses per event, and
// the last session of the step waits for all of it. Here a callback only appends (session,
// event) to its I/O thread's batch, which lives on the engine thread; after the step's events
// (Engine::set_after_deliver) each thread's batch is posted once and the sessions' work runs
// there, in the order the engine produced the events.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "engine/scheduler.h"
#include "server/http_types.h"

namespace deepinfer::server {

class GenerationSession;

class StepBatcher {
 public:
  StepBatcher();
  ~StepBatcher();
  // Engine thread: `event` for `session`, whose exchange runs on I/O thread `loop` (>= 0).
  void add(int loop, std::shared_ptr<GenerationSession> session, const engine::RequestEvent& event);
  // Engine thread, after the step's events: posts each thread's batch.
  void flush();

 private:
  struct Entry {
    std::shared_ptr<GenerationSession> session;
    engine::RequestEvent event;
  };
  class Batch;
  struct Pool;
  std::shared_ptr<Pool> pool_;                   // batches come back here once run
  std::vector<std::shared_ptr<Batch>> pending_;  // engine thread only: by I/O thread
};

}  // namespace deepinfer::server
