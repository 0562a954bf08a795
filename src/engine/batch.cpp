// generate_batch: callbacks fill per-request results; a condition variable counts the ends.
#include "engine/batch.h"

#include <condition_variable>
#include <mutex>

namespace deepinfer::engine {

std::vector<BatchResult> generate_batch(Engine& engine, std::vector<EngineRequest> requests,
                                        const std::function<void(size_t, size_t)>& progress) {
  const size_t total = requests.size();
  std::vector<BatchResult> results(total);
  std::mutex mutex;
  std::condition_variable cv;
  size_t done = 0;
  for (size_t i = 0; i < total; ++i) {
    const bool want_logprobs = requests[i].params.logprobs;
    auto submitted =
        engine.submit(std::move(requests[i]), [&, i, want_logprobs](const RequestEvent& ev) {
          BatchResult& r = results[i];
          if (ev.has_token) {
            r.ids.push_back(ev.sample.token);
            if (want_logprobs) r.logprobs.push_back(ev.sample);
          }
          if (ev.finish == FinishReason::kNone) return;
          r.finish = ev.finish;
          r.usage = ev.usage;
          r.error = ev.error;
          // Under the lock: once `done` reaches total the waiting caller returns and destroys
          // cv, mutex and (its caller) progress, so nothing may touch them after the unlock.
          std::lock_guard lock(mutex);
          const size_t now = ++done;
          if (progress) progress(now, total);
          cv.notify_one();
        });
    if (!submitted.ok()) {
      results[i].finish = FinishReason::kError;
      results[i].error = submitted.error().message;
      std::lock_guard lock(mutex);
      ++done;
    }
  }
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return done == total; });
  return results;
}

}  // namespace deepinfer::engine
