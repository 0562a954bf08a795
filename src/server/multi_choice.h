// Chat Completions with n > 1 (non-streaming): n engine requests (seeds seed, seed+1, ...) whose
// complete responses are merged into one object with choices 0..n-1 and summed completion usage.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "server/http_types.h"

namespace deepinfer::server {

// A Responder that collects n complete replies and sends one merged reply to `target`.
// The first non-200 reply is forwarded as is. `make_one(i, responder)` starts choice i.
void run_multi_choice(int n, ResponderPtr target,
                      const std::function<void(int index, ResponderPtr responder)>& make_one);

}  // namespace deepinfer::server
