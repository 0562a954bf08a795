// Scheduler implementation (see scheduler.h for the policy).
#include "engine/scheduler.h"

#include <algorithm>
#include <string>

namespace deepinfer::engine {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
    case FinishReason::kNone:
      break;
  }
  return "none";
}

Scheduler::Scheduler(const SchedulerConfig& config, const KvCacheConfig& kv_config)
    : config_(config),
      max_model_len_(std::min(config.max_model_len, kv_config.num_blocks * kv_config.block_size)),
      kv_(KvCacheConfig{kv_config.num_blocks, kv_config.block_size,
                        std::min(kv_config.num_state_slots, config.max_num_seqs),
                        kv_config.prefix_caching}) {
  running_.reserve(config.max_num_seqs);
  hit_.reserve(kv_config.num_blocks);
}

const Request* Scheduler::find(uint64_t id) const {
  const auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

Status Scheduler::add(std::unique_ptr<Request> request) {
  const auto prompt = static_cast<int32_t>(request->tokens.size());
  if (prompt == 0) return Error{"the prompt is empty"};
  if (prompt >= max_model_len_)
    return Error{"the prompt has " + std::to_string(prompt) +
                 " tokens; this engine holds at most " + std::to_string(max_model_len_ - 1) +
                 " prompt tokens (max_model_len " + std::to_string(max_model_len_) + ")"};
  if (requests_.count(request->id)) return Error{"duplicate request id"};
  request->num_prompt = prompt;
  request->status = RequestStatus::kWaiting;
  request->tokens.reserve(static_cast<size_t>(
      std::min<int64_t>(int64_t{prompt} + request->params.max_tokens, max_model_len_)));
  Request* raw = request.get();
  requests_.emplace(raw->id, std::move(request));
  waiting_.push_back(raw);
  return Status::Ok();
}

bool Scheduler::done_ahead(const Request& req) const {
  return req.num_output() + req.num_pending >= req.params.max_tokens ||
         req.num_tokens_ahead() >= max_model_len_;
}

// 0: wait for a step with more budget (only while other work fills this one).
int32_t Scheduler::chunk_size(int32_t start, int32_t wanted, int32_t budget,
                              bool step_has_work) const {
  if (wanted <= budget) return wanted;
  if (!config_.block_aligned_chunks) return budget;
  const int32_t bs = kv_.config().block_size;
  const int32_t aligned = (start + budget) / bs * bs - start;
  return aligned > 0 ? aligned : step_has_work ? 0 : budget;
}

void Scheduler::preempt(Request& req, SchedulerOutput& out) {
  out.released.push_back({req.id, req.kv.state_slot});
  kv_.free(req);
  req.num_computed = req.num_confirmed = 0;
  req.status = RequestStatus::kWaiting;
  ++req.num_preemptions;
  ++stats_.num_preemptions;
  ++out.num_preempted;
  waiting_.push_front(&req);
}

void Scheduler::schedule(SchedulerOutput& out) {
  out.clear();
  out.step = ++step_;
  out.released.insert(out.released.end(), released_.begin(), released_.end());
  released_.clear();
  int32_t budget = config_.max_num_batched_tokens;

  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* req = running_[i];
    const int32_t ahead = req->num_tokens_ahead();
    const int32_t num_new =
        chunk_size(req->num_computed, ahead - req->num_computed, budget, out.num_tokens > 0);
    if (num_new <= 0 || done_ahead(*req)) {
      ++i;
      continue;
    }
    const auto table_before = static_cast<int32_t>(req->kv.block_table.size());
    bool scheduled = true;
    while (!kv_.grow(*req, req->num_computed + num_new)) {
      Request* victim = running_.back();
      running_.pop_back();
      preempt(*victim, out);
      if (victim == req) {
        scheduled = false;
        break;
      }
    }
    if (!scheduled) break;
    ScheduledSequence entry;
    entry.request_id = req->id;
    entry.slot = req->kv.state_slot;
    entry.start = req->num_computed;
    entry.num_new = num_new;
    entry.sample = req->num_computed + num_new == ahead;
    entry.new_blocks_begin = static_cast<int32_t>(out.new_block_ids.size());
    entry.new_blocks_count = static_cast<int32_t>(req->kv.block_table.size()) - table_before;
    out.new_block_ids.insert(out.new_block_ids.end(), req->kv.block_table.begin() + table_before,
                             req->kv.block_table.end());
    out.scheduled.push_back(entry);
    req->num_computed += num_new;
    req->num_pending += entry.sample;
    budget -= num_new;
    out.num_tokens += num_new;
    ++i;
  }

  // Waiting requests, FCFS; none in a step that had to preempt.
  while (out.num_preempted == 0 && !waiting_.empty() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
    Request* req = waiting_.front();
    if (req->num_pending > 0) break;  // its last token is still in flight
    kv_.find_cached_prefix(*req, hit_);
    const int32_t cached = static_cast<int32_t>(hit_.size()) * kv_.config().block_size;
    const auto total = static_cast<int32_t>(req->tokens.size());
    int32_t num_new = total - cached;
    if (!config_.chunked_prefill && num_new > budget) break;
    num_new = chunk_size(cached, num_new, budget, out.num_tokens > 0);
    if (num_new == 0) break;
    if (!kv_.admit(*req, hit_, cached + num_new)) break;
    waiting_.pop_front();
    if (req->num_cached_prompt < 0) {
      req->num_cached_prompt = std::min(cached, req->num_prompt);
      stats_.prefix_query_tokens += req->num_prompt;
      stats_.prefix_hit_tokens += req->num_cached_prompt;
    }
    req->status = RequestStatus::kRunning;
    req->num_computed = req->num_confirmed = cached;
    running_.push_back(req);

    NewSequence& seq = out.new_sequences.emplace_back();
    seq.request_id = req->id;
    seq.slot = req->kv.state_slot;
    seq.params = req->params;
    seq.seed = req->seed;
    seq.tokens = req->tokens;
    seq.num_prompt = req->num_prompt;
    seq.num_computed = cached;
    seq.block_table = req->kv.block_table;
    ScheduledSequence entry;
    entry.request_id = req->id;
    entry.slot = req->kv.state_slot;
    entry.start = cached;
    entry.num_new = num_new;
    entry.sample = cached + num_new == total;
    entry.new_blocks_begin = static_cast<int32_t>(out.new_block_ids.size());
    out.scheduled.push_back(entry);
    req->num_computed += num_new;
    req->num_pending += entry.sample;
    budget -= num_new;
    out.num_tokens += num_new;
  }
}

FinishReason Scheduler::check_stop(const Request& req, int32_t token) const {
  const SamplingParams& p = req.params;
  if (!p.ignore_eos && std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(),
                                 token) != config_.eos_token_ids.end())
    return FinishReason::kStop;
  if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end())
    return FinishReason::kStop;
  if (req.num_output() >= p.max_tokens) return FinishReason::kLength;
  if (static_cast<int32_t>(req.tokens.size()) >= max_model_len_) return FinishReason::kLength;
  return FinishReason::kNone;
}

void Scheduler::finish(Request& req, FinishReason reason, std::vector<RequestEvent>& events,
                       std::string error) {
  if (req.status == RequestStatus::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), &req));
    released_.push_back({req.id, req.kv.state_slot});
  } else if (req.status == RequestStatus::kWaiting) {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &req));
  }
  kv_.free(req);
  req.status = RequestStatus::kFinished;
  req.finish_reason = reason;
  if (events.empty() || events.back().request_id != req.id ||
      events.back().finish != FinishReason::kNone)
    events.push_back(event_for(req.id));
  RequestEvent& ev = events.back();
  ev.finish = reason;
  ev.error = std::move(error);
  ev.usage = {req.num_prompt, req.num_output(), std::max(0, req.num_cached_prompt)};
  requests_.erase(req.id);  // last use of req
}

bool Scheduler::abort(uint64_t id, std::vector<RequestEvent>& events) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  events.push_back(event_for(id));
  finish(*it->second, FinishReason::kAbort, events);
  return true;
}

void Scheduler::update(const SchedulerOutput& done, const ModelOutput& result,
                       std::vector<RequestEvent>& events) {
  if (!result.status.ok()) {
    for (const ScheduledSequence& entry : done.scheduled) {
      const auto it = requests_.find(entry.request_id);
      if (it == requests_.end()) continue;
      events.push_back(event_for(entry.request_id));
      finish(*it->second, FinishReason::kError, events, result.status.error().message);
    }
    return;
  }
  for (const ScheduledSequence& entry : done.scheduled) {
    const auto it = requests_.find(entry.request_id);
    if (it == requests_.end() || it->second->status != RequestStatus::kRunning) continue;
    Request& req = *it->second;
    req.num_confirmed = std::max(req.num_confirmed, entry.start + entry.num_new);
    kv_.cache_computed_blocks(req);
  }
  const Clock::time_point now = Clock::now();
  for (const SampledToken& s : result.sampled) {
    const auto it = requests_.find(s.request_id);
    if (it == requests_.end()) continue;  // aborted while in flight
    Request& req = *it->second;
    --req.num_pending;
    req.tokens.push_back(s.result.token);
    ++stats_.generated_tokens;
    RequestEvent ev = event_for(req.id);
    ev.has_token = true;
    ev.sample = s.result;
    if (req.num_output() == 1) {
      req.first_token = now;
      ev.ttft_seconds = std::chrono::duration<double>(now - req.arrival).count();
      stats_.prompt_tokens += req.num_prompt;
      // The prompt side of the usage is known now: the server reports cache hits up front.
      ev.usage = {req.num_prompt, 1, std::max(0, req.num_cached_prompt)};
    } else {
      ev.tpot_seconds = std::chrono::duration<double>(now - req.last_token).count();
    }
    req.last_token = now;
    events.push_back(ev);
    const FinishReason reason = check_stop(req, s.result.token);
    if (reason != FinishReason::kNone) finish(req, reason, events);
  }
}

void Scheduler::drop_released(SchedulerOutput& next) {
  if (released_.empty()) return;
  auto ended = [this](uint64_t id) {
    return std::any_of(released_.begin(), released_.end(),
                       [id](const RequestSlot& r) { return r.request_id == id; });
  };
  std::erase_if(next.scheduled, [&](const ScheduledSequence& s) { return ended(s.request_id); });
  std::erase_if(next.new_sequences, [&](const NewSequence& s) { return ended(s.request_id); });
  next.released.insert(next.released.end(), released_.begin(), released_.end());
  released_.clear();
}

}  // namespace deepinfer::engine
