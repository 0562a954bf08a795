#include "server/step_batcher.h"

#include <chrono>

#include "server/generation_session.h"

namespace deepinfer::server {

// Emptied batches, for the engine thread to fill again: a steady stream allocates nothing.
struct StepBatcher::Pool {
  std::mutex mu;
  std::vector<std::shared_ptr<Batch>> free;
};

class StepBatcher::Batch final : public PostedWork, public std::enable_shared_from_this<Batch> {
 public:
  explicit Batch(const std::shared_ptr<Pool>& pool) : pool_(pool) {}
  std::vector<Entry> entries;
  TokenStamp::Clock::time_point posted{};

  // On the batch's I/O thread.
  void run() override {
    for (Entry& e : entries) e.session->run_event(e.event, posted);
    entries.clear();  // the sessions' last references may go here, on their own thread
    if (auto pool = pool_.lock()) {
      std::lock_guard lock(pool->mu);
      pool->free.push_back(shared_from_this());
    }
  }

 private:
  std::weak_ptr<Pool> pool_;  // the pool holds the batches it keeps: no cycle
};

StepBatcher::StepBatcher() : pool_(std::make_shared<Pool>()) {}
StepBatcher::~StepBatcher() = default;

void StepBatcher::add(int loop, std::shared_ptr<GenerationSession> session,
                      const engine::RequestEvent& event) {
  const size_t i = static_cast<size_t>(loop);
  if (pending_.size() <= i) pending_.resize(i + 1);
  auto& batch = pending_[i];
  if (!batch) {
    std::lock_guard lock(pool_->mu);
    if (!pool_->free.empty()) {
      batch = std::move(pool_->free.back());
      pool_->free.pop_back();
    }
  }
  if (!batch) batch = std::make_shared<Batch>(pool_);
  batch->entries.push_back(Entry{std::move(session), event});
}

void StepBatcher::flush() {
  const auto now = TokenStamp::Clock::now();
  for (auto& batch : pending_) {
    if (!batch) continue;
    batch->posted = now;
    // Every entry's exchange runs on this thread: any of their responders posts there.
    Responder& via = batch->entries.front().session->responder();
    via.post(std::move(batch));
    batch = nullptr;
  }
}

}  // namespace deepinfer::server
