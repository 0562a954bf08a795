// Chat / legacy Completions with n > 1: n engine requests (seeds seed, seed+1, ...) behind one
// exchange. Complete replies are merged into one object with choices 0..n-1 and summed
// completion usage; streams share one SSE stream, the choices' chunks interleaved as produced,
// then one usage chunk (when asked) and `data: [DONE]` after the last choice has ended.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "recipe/output_chunk.h"
#include "server/http_types.h"

namespace deepinfer::server {

// A Responder that collects n complete replies and sends one merged reply to `target`.
// The first non-200 reply is forwarded as is. `make_one(i, responder)` starts choice i.
void run_multi_choice(int n, ResponderPtr target,
                      const std::function<void(int index, ResponderPtr responder)>& make_one);

// The stream form: opens the SSE stream on `target` at once. Choice i's session writes its
// frames (no `[DONE]`) to its responder and reports its usage through `on_usage` before it
// closes. When all have closed: `usage_chunk(total)` as one `data:` frame unless it returns "",
// then `data: [DONE]`. Total = the first choice's prompt side + the sum of completion tokens.
using UsageCallback = std::function<void(const recipe::Usage&)>;
void run_multi_choice_stream(
    int n, ResponderPtr target, std::function<std::string(const recipe::Usage&)> usage_chunk,
    const std::function<void(int index, ResponderPtr responder, UsageCallback on_usage)>& make_one);

}  // namespace deepinfer::server
