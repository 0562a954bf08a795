#include "server/generation_session.h"

#include "server/api_errors.h"

namespace deepinfer::server {

GenerationSession::GenerationSession(SessionSetup setup, const tokenizer::Tokenizer& tokenizer,
                                     engine::Engine& engine, ResponderPtr responder,
                                     Metrics& metrics)
    : setup_(std::move(setup)),
      tokenizer_(tokenizer),
      engine_(engine),
      responder_(std::move(responder)),
      metrics_(metrics),
      decoder_(tokenizer),
      processor_(setup_.parsing),
      eos_token_id_(tokenizer.added_token_id("<｜end▁of▁sentence｜>")),
      started_at_(std::chrono::steady_clock::now()) {
  usage_.prompt_tokens = setup_.prompt_tokens;
  const bool chat = setup_.protocol == recipe::Protocol::ChatCompletions;
  if (setup_.logprobs >= 0 && (chat || setup_.make_generator)) {
    logprobs_ = std::make_unique<TokenLogprobs>(tokenizer, setup_.logprobs_format, setup_.logprobs);
    // Streams write each chunk's tokens; a complete Chat response gets them all at the end.
    if (setup_.stream || setup_.make_generator) setup_.events.chunk_logprobs = logprobs_.get();
  } else if (setup_.logprobs >= 0 && setup_.protocol == recipe::Protocol::Responses) {
    // Stream or not, the deltas carry them (the complete response accumulates the same events).
    text_logprobs_ =
        std::make_unique<OutputTextLogprobs>(tokenizer, setup_.parsing, setup_.logprobs);
    setup_.events.text_logprobs = text_logprobs_.get();
  }
  if (setup_.make_generator) {
    generator_ = setup_.make_generator(setup_.events, *this);
  } else {
    if (!setup_.stream)
      complete_ = recipe::make_response_accumulator(setup_.protocol, setup_.events.id,
                                                    setup_.events.model, setup_.events.created);
    generator_ = recipe::make_event_generator(setup_.protocol, setup_.events, *this);
  }
}

bool GenerationSession::start(engine::EngineRequest request) {
  auto self = shared_from_this();
  // The stream opens before the engine can produce a token: the first frames must follow the
  // headers.
  if (setup_.stream) responder_->open_stream(200, "text/event-stream");
  ++metrics_.requests_running;  // before the engine can finish it (close_exchange decrements)
  engine::EventCallback callback = [self](const engine::RequestEvent& ev) { self->enqueue(ev); };
  if (const int loop = responder_->loop_index(); setup_.batcher && loop >= 0)
    callback = [self, loop, batcher = setup_.batcher](const engine::RequestEvent& ev) {
      batcher->add(loop, self, ev);
    };
  auto submitted = engine_.submit(std::move(request), std::move(callback));
  if (!submitted.ok()) {
    --metrics_.requests_running;
    ++metrics_.requests_failed;
    closed_ = true;
    HttpResponse error = api_error(flavor_for(setup_.protocol), 400, submitted.error().message);
    if (setup_.stream) {
      // Headers are out: the error travels as the stream's only event.
      const bool anthropic = flavor_for(setup_.protocol) == ApiFlavor::Anthropic;
      responder_->write((anthropic ? "event: error\ndata: " : "data: ") + error.body + "\n\n");
      responder_->close();
    } else {
      responder_->send(std::move(error));
    }
    if (setup_.on_done) setup_.on_done();
    return false;
  }
  handle_ = submitted.value();
  std::weak_ptr<GenerationSession> weak = self;
  responder_->on_disconnect([weak] {
    if (auto s = weak.lock()) s->abort_engine();
  });
  if (abort_wanted_) abort_engine();
  return true;
}

void GenerationSession::abort_engine() {
  abort_wanted_ = true;
  if (const uint64_t h = handle_.load()) engine_.abort(h);
}

void GenerationSession::enqueue(const engine::RequestEvent& ev) {
  bool schedule = false;
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(inbox_mu_);
    const auto handed = handed_at(ev, now);
    if (inbox_.empty()) {
      inbox_handed_ = handed;
      inbox_since_ = now;
    }
    if (ev.has_token) inbox_stamp_.merge(token_stamp(handed, now));
    inbox_.push_back(ev);
    schedule = !scheduled_;
    scheduled_ = true;
  }
  if (schedule) responder_->post(shared_from_this());
}

void GenerationSession::run() {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(inbox_mu_);
    work_.swap(inbox_);
    begin_pass(inbox_handed_, inbox_since_, now);
    inbox_stamp_.picked = now;
    unsent_stamp_.merge(std::exchange(inbox_stamp_, {}));
    scheduled_ = false;
  }
  for (const auto& ev : work_) on_engine_event(ev);
  work_.clear();
  flush_frames();  // every token of this wake-up in one write
}

void GenerationSession::run_event(const engine::RequestEvent& ev,
                                  TokenStamp::Clock::time_point posted) {
  const auto now = std::chrono::steady_clock::now();
  const auto handed = handed_at(ev, posted);
  begin_pass(handed, posted, now);
  if (ev.has_token) {
    TokenStamp stamp = token_stamp(handed, posted);
    stamp.picked = now;
    unsent_stamp_.merge(stamp);
  }
  on_engine_event(ev);
  flush_frames();
}

TokenStamp::Clock::time_point GenerationSession::handed_at(const engine::RequestEvent& ev,
                                                           TokenStamp::Clock::time_point queued) {
  // An event from elsewhere than Engine::deliver (none today) counts from when it was queued.
  return ev.handed_over == TokenStamp::Clock::time_point{} ? queued : ev.handed_over;
}

TokenStamp GenerationSession::token_stamp(TokenStamp::Clock::time_point handed,
                                          TokenStamp::Clock::time_point queued) {
  TokenStamp stamp;
  stamp.produced = stamp.released = handed;
  stamp.queued = queued;
  stamp.tokens = 1;
  stamp.first = !token_queued_;
  token_queued_ = true;
  return stamp;
}

void GenerationSession::begin_pass(TokenStamp::Clock::time_point handed,
                                   TokenStamp::Clock::time_point queued,
                                   TokenStamp::Clock::time_point picked) {
  // Tokens an earlier pass held back waited for the engine until this pass's first event.
  unsent_stamp_.released = handed;
  unsent_stamp_.queued = queued;
  unsent_stamp_.picked = picked;
}

void GenerationSession::on_engine_event(const engine::RequestEvent& ev) {
  if (done_) return;
  if (!ready_sent_) {
    ready_sent_ = true;
    recipe::InferenceChunk ready;
    ready.kind = recipe::InferenceChunk::Kind::Ready;
    ready.prompt_tokens = setup_.prompt_tokens;
    ready.prompt_cache_hit_tokens = ev.usage.prompt_cache_hit_tokens;
    usage_.prompt_cache_hit_tokens = ev.usage.prompt_cache_hit_tokens;
    processor_.process(ready, *generator_);
  }
  if (ev.ttft_seconds >= 0) metrics_.ttft_seconds.observe(ev.ttft_seconds);
  if (ev.tpot_seconds >= 0) metrics_.tpot_seconds.observe(ev.tpot_seconds);
  if (ev.has_token) {
    ++metrics_.completion_tokens_total;
    const bool eos_like =
        ev.finish == engine::FinishReason::kStop && ev.sample.token == eos_token_id_;
    ++pending_tokens_;  // the EOS token counts as a completion token, like any other
    if (logprobs_ && !eos_like) logprobs_->add(ev.sample);
    if (text_logprobs_ && !eos_like) text_logprobs_->add(ev.sample);
    if (!eos_like) {
      text_.clear();
      // Special tokens stay text: the parser needs </think> and ｜DSML｜ (spec §4.10).
      if (decoder_.push(ev.sample.token, text_).ok() && !text_.empty()) {
        feed(text_, pending_tokens_);
        pending_tokens_ = 0;
      }
    }
  }
  if (ev.finish != engine::FinishReason::kNone && !done_) {
    // Bytes still held back (an incomplete UTF-8 tail) and uncounted tokens go out now.
    text_.clear();
    decoder_.finish(text_);
    if (pending_tokens_ > 0 || !text_.empty()) {
      feed(text_, pending_tokens_);
      pending_tokens_ = 0;
    }
  }
  if (ev.finish != engine::FinishReason::kNone && !done_) {
    switch (ev.finish) {
      case engine::FinishReason::kLength:
        finish(recipe::BackendFinish::Length);
        break;
      case engine::FinishReason::kError:
        if (!setup_.stream) {
          done_ = true;
          closed_ = true;
          ++metrics_.requests_failed;
          close_exchange();
          responder_->send(api_error(flavor_for(setup_.protocol), 500, ev.error));
        } else {
          finish(recipe::BackendFinish::Stop);
        }
        break;
      default:
        finish(recipe::BackendFinish::Stop);
    }
  }
}

void GenerationSession::feed(std::string_view text, int64_t tokens) {
  recipe::InferenceChunk chunk;
  chunk.kind = recipe::InferenceChunk::Kind::Text;
  chunk.content = text;
  chunk.content_tokens = tokens;
  usage_.completion_tokens += tokens;
  if (text_logprobs_) text_logprobs_->feed(text);
  if (!processor_.process(chunk, *generator_)) {
    // A stop sequence ended the answer: the rest of the generation is not needed.
    done_ = true;
    abort_engine();
    if (setup_.stream && setup_.protocol == recipe::Protocol::ChatCompletions && setup_.write_done)
      frames_ += "data: [DONE]\n\n";
  }
}

void GenerationSession::finish(recipe::BackendFinish reason) {
  if (done_) return;
  done_ = true;
  recipe::InferenceChunk chunk;
  chunk.kind = recipe::InferenceChunk::Kind::Finish;
  chunk.finish = reason;
  if (text_logprobs_) text_logprobs_->finish();
  processor_.process(chunk, *generator_);
  if (setup_.stream && setup_.protocol == recipe::Protocol::ChatCompletions && setup_.write_done)
    frames_ += "data: [DONE]\n\n";
}

void GenerationSession::on_event(std::string_view name, std::string_view data) {
  if (complete_) {
    complete_->on_event(name, data);
    return;
  }
  if (!setup_.stream) {  // a custom generator's complete object
    frames_.assign(data);
    return;
  }
  if (!name.empty()) {
    frames_ += "event: ";
    frames_ += name;
    frames_ += '\n';
  }
  frames_ += "data: ";
  frames_ += data;
  frames_ += "\n\n";
}

void GenerationSession::flush_frames() {
  if (setup_.stream) {
    if (!frames_.empty()) {
      // Tokens whose text the parser held back ride on this write with their first wait.
      unsent_stamp_.issued = std::chrono::steady_clock::now();
      responder_->write_stamped(frames_, std::exchange(unsent_stamp_, {}));
      frames_.clear();
    }
    if (done_ && !closed_) {
      closed_ = true;
      close_exchange();
      responder_->close();
    }
  } else if (done_ && !closed_) {
    closed_ = true;
    close_exchange();
    std::string body = complete_ ? complete_->response_text() : std::move(frames_);
    if (logprobs_ && complete_) {
      // OpenAI shape: choices[0].logprobs = {"content":[…],"refusal":null}.
      auto v = parse_json(body);
      const std::string_view text = logprobs_->next_chunk_logprobs();
      auto lp =
          parse_json(text.empty() ? std::string_view(R"({"content":[],"refusal":null})") : text);
      if (v.ok() && v.value().is_object() && lp.ok())
        if (auto* c = v.value().as_object().if_contains("choices"); c && c->is_array())
          if (!c->as_array().empty() && c->as_array()[0].is_object()) {
            c->as_array()[0].as_object()["logprobs"] = std::move(lp).value();
            body = to_json(v.value());
          }
    }
    responder_->send(HttpResponse{200, "application/json", std::move(body), {}});
    frames_.clear();
  }
}

// Runs just before the final bytes go to the client, so that a client that sees its answer
// also sees the request counted as finished (metrics, admission slot).
void GenerationSession::close_exchange() {
  if (setup_.on_usage) setup_.on_usage(usage_);
  --metrics_.requests_running;
  metrics_.e2e_seconds.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at_).count());
  if (setup_.on_done) setup_.on_done();
}

}  // namespace deepinfer::server
