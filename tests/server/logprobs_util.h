// Logprobs tests: the engine's own sample results for the scripted output (its logits do not
// depend on the prompt, so a direct engine request yields the tokens, logprobs and top lists an
// HTTP request gets) and a token's text as the APIs spell it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "server/logprobs.h"
#include "service_harness.h"

namespace deepinfer::server::testing {

// The scripted output's samples with `top` top_logprobs each (EOS dropped, as the APIs drop it).
inline std::vector<engine::SampleResult> engine_samples(ServiceHarness& h, int top) {
  engine::EngineRequest req;
  req.prompt = {10, 11, 12};
  req.params.logprobs = true;
  req.params.top_logprobs = top;
  req.params.max_tokens = 64;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::vector<engine::SampleResult> out;
  auto handle = h.engine().submit(std::move(req), [&](const engine::RequestEvent& ev) {
    std::lock_guard lock(mu);
    if (ev.has_token) out.push_back(ev.sample);
    if (ev.finish != engine::FinishReason::kNone) {
      done = true;
      cv.notify_all();
    }
  });
  EXPECT_TRUE(handle.ok());
  std::unique_lock lock(mu);
  EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return done; }));
  if (!out.empty() && out.back().token == h.eos()) out.pop_back();
  return out;
}

inline std::string token_text(const ServiceHarness& h, int32_t id) {
  std::string s;
  append_valid_utf8(s, h.tokenizer().token_bytes(id));
  return s;
}

}  // namespace deepinfer::server::testing
