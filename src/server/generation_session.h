// One API generation in flight: the engine's token events → incremental detokenizer (special
// tokens kept as text, spec §4.10) → recipe StreamProcessor → the API's event generator →
// SSE frames on the Responder (stream) or the complete response (non-stream). The engine thread
// only queues each event; the work runs on the responder's executor (Responder::post), all the
// events queued by then at once, so their frames leave in one write. A client disconnect or a
// matched stop sequence aborts the engine request.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "recipe/complete_response.h"
#include "recipe/output_parser.h"
#include "recipe/stream_events.h"
#include "server/http_types.h"
#include "server/logprobs.h"
#include "server/metrics.h"
#include "server/output_text_logprobs.h"
#include "server/step_batcher.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

struct SessionSetup {
  recipe::Protocol protocol = recipe::Protocol::ChatCompletions;
  recipe::ParsingOptions parsing;
  recipe::EventOptions events;
  bool stream = false;
  int64_t prompt_tokens = 0;
  // Per-token logprobs: -1 = not asked, else the top_logprobs count; in the Chat or legacy
  // Completions shape, on every stream chunk or on the complete response; Responses: on the
  // output_text deltas and parts (the message text's tokens only).
  int logprobs = -1;
  LogprobsFormat logprobs_format = LogprobsFormat::Chat;
  // Builds the event generator; default: recipe::make_event_generator(protocol, ...). The legacy
  // Completions API plugs its own generator in here. `events` is this session's copy of
  // `events` above, with chunk_logprobs set when logprobs are asked for on a stream.
  std::function<std::unique_ptr<recipe::OutputSink>(const recipe::EventOptions& events,
                                                    recipe::EventSink&)>
      make_generator;
  // Chat-framed streams end with `data: [DONE]`; false when one stream carries several sessions
  // (n > 1) and the caller ends it.
  bool write_done = true;
  // Once, when the generation has ended (before the exchange closes): prompt and completion
  // token counts, as on the finish event.
  std::function<void(const recipe::Usage&)> on_usage;
  std::function<void()> on_done;  // once, when the exchange has been answered
  // Hands the engine's events to the I/O threads a step at a time (exchanges that run on one,
  // Responder::loop_index() >= 0); null: each event is queued by its own callback.
  std::shared_ptr<StepBatcher> batcher;
};

class GenerationSession final : public recipe::EventSink,
                                public PostedWork,
                                public std::enable_shared_from_this<GenerationSession> {
 public:
  GenerationSession(SessionSetup setup, const tokenizer::Tokenizer& tokenizer,
                    engine::Engine& engine, ResponderPtr responder, Metrics& metrics);

  // Submits to the engine; on a submit error answers 400 and returns false.
  bool start(engine::EngineRequest request);

  // Stops the generation (client gone, shutdown); the exchange still ends cleanly.
  void abort() { abort_engine(); }

  // Engine thread: queues the event and schedules run() on the responder's executor.
  void enqueue(const engine::RequestEvent& event);
  // On the responder's executor: processes every queued event, then writes their frames at once.
  void run() override;
  // On the responder's executor, from a StepBatcher batch posted at `posted`: one event, then its
  // frames.
  void run_event(const engine::RequestEvent& event, TokenStamp::Clock::time_point posted);
  Responder& responder() { return *responder_; }
  void on_event(std::string_view name, std::string_view data) override;

 private:
  void on_engine_event(const engine::RequestEvent& event);
  // When the engine began handing `event`'s step over (`queued` if it was not stamped).
  static TokenStamp::Clock::time_point handed_at(const engine::RequestEvent& event,
                                                 TokenStamp::Clock::time_point queued);
  // A token event's stamp; the stream's first token is marked (under inbox_mu_ on the enqueue
  // path).
  TokenStamp token_stamp(TokenStamp::Clock::time_point handed,
                         TokenStamp::Clock::time_point queued);
  // A pass over new events begins: what an earlier pass held back waited for the engine until
  // then.
  void begin_pass(TokenStamp::Clock::time_point handed, TokenStamp::Clock::time_point queued,
                  TokenStamp::Clock::time_point picked);
  void feed(std::string_view text, int64_t tokens);
  void finish(recipe::BackendFinish reason);
  void abort_engine();
  void flush_frames();
  void close_exchange();

  SessionSetup setup_;
  const tokenizer::Tokenizer& tokenizer_;
  engine::Engine& engine_;
  ResponderPtr responder_;
  Metrics& metrics_;
  tokenizer::IncrementalDecoder decoder_;
  std::string text_;            // the text completed by the current token
  int64_t pending_tokens_ = 0;  // tokens whose text has not been fed yet
  recipe::StreamProcessor processor_;
  std::unique_ptr<recipe::ResponseAccumulator> complete_;
  std::unique_ptr<recipe::OutputSink> generator_;
  std::unique_ptr<TokenLogprobs> logprobs_;
  std::unique_ptr<OutputTextLogprobs> text_logprobs_;  // Responses
  recipe::Usage usage_;  // prompt side from the first event; completion = tokens fed
  std::string frames_;   // SSE frames of the events being processed
  std::mutex inbox_mu_;
  std::vector<engine::RequestEvent> inbox_;  // queued by the engine thread
  std::vector<engine::RequestEvent> work_;   // being processed (swapped with inbox_)
  bool scheduled_ = false;                   // run() is posted and has not started
  TokenStamp inbox_stamp_;                   // the inbox's tokens (guarded by inbox_mu_)
  bool token_queued_ = false;                // a token was queued before (guarded by inbox_mu_)
  // The inbox's first event: handed over by the engine, queued here (guarded by inbox_mu_).
  std::chrono::steady_clock::time_point inbox_handed_, inbox_since_;
  TokenStamp unsent_stamp_;  // processed tokens not yet written
  std::atomic<uint64_t> handle_{0};
  std::atomic<bool> abort_wanted_{false};
  bool ready_sent_ = false;
  bool done_ = false;    // no more model output is wanted
  bool closed_ = false;  // the HTTP exchange has been answered
  int32_t eos_token_id_ = -1;
  std::chrono::steady_clock::time_point started_at_;
};

}  // namespace deepinfer::server
