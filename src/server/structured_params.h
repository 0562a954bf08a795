// Structured output of an API request: Chat `response_format`, Responses `text.format`, the
// vLLM `structured_outputs` / `guided_*` fields and tool definitions with `strict: true` (or a
// forced tool_choice) → the engine's StructuredOutput, compiled through the service's grammar
// cache. Errors are the 400 messages (they name the field or the unsupported keyword).
#pragma once

#include <memory>

#include "common/json.h"
#include "common/result.h"
#include "engine/structured_request.h"
#include "recipe/conversation.h"
#include "recipe/render.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

struct StructuredContext {
  engine::structured::GrammarCache* cache = nullptr;
  recipe::EncodingVersion encoding = recipe::EncodingVersion::V41;
  int32_t think_end = -1;  // the `</think>` id
};

// One cache per service, over the tokenizer's vocabulary (special markers mapped).
std::unique_ptr<engine::structured::GrammarCache> make_grammar_cache(
    const tokenizer::Tokenizer& tokenizer);

// nullptr when the request asks for no constraint. With thinking on, a response_format applies
// after `</think>`; a tool-call grammar covers the reasoning itself (so no DSML block can start
// inside it). tool_choice required/named constrains the block the prompt opened; `auto` with a
// strict tool allows text (or the response_format) followed by an optional block.
Result<std::shared_ptr<const engine::structured::StructuredOutput>> structured_from_request(
    const JsonObject& body, const recipe::ConversationRequest& request,
    const StructuredContext& context);

}  // namespace deepinfer::server
