// Request fields → constraint spec (engine/structured_request.h) or tool-call grammar spec
// (engine/structured_tool_calls.h) → compiled grammar from the cache.
#include "server/structured_params.h"

namespace deepinfer::server {
namespace {

namespace st = engine::structured;
using Kind = st::ConstraintSpec::Kind;

// The response_format as the content part of a tool-call grammar.
Result<Json> content_json(const st::ConstraintSpec& spec) {
  JsonObject c;
  switch (spec.kind) {
    case Kind::kJsonObject:
      c["kind"] = "json_object";
      c["source"] = JsonObject{};
      return Json(std::move(c));
    case Kind::kRegex:
      c["kind"] = "regex";
      c["source"] = spec.source;
      return Json(std::move(c));
    case Kind::kJsonSchema:
    case Kind::kChoice: {
      auto parsed = parse_json(spec.source);
      if (!parsed.ok()) return Error{"'" + spec.field + "' is not valid JSON"};
      c["kind"] = spec.kind == Kind::kChoice ? "choice" : "json_schema";
      c["source"] = std::move(parsed.value());
      return Json(std::move(c));
    }
    default:
      return Error{"'" + spec.field + "' cannot be combined with strict tools"};
  }
}

}  // namespace

std::unique_ptr<st::GrammarCache> make_grammar_cache(const tokenizer::Tokenizer& tokenizer) {
  return std::make_unique<st::GrammarCache>(st::TokenTable::from_tokenizer(tokenizer));
}

Result<std::shared_ptr<const st::StructuredOutput>> structured_from_request(
    const JsonObject& body, const recipe::ConversationRequest& request,
    const StructuredContext& context) {
  using Out = std::shared_ptr<const st::StructuredOutput>;
  auto spec = st::read_structured_output(body);
  if (!spec.ok()) return spec.error();
  const recipe::Conversation& conv = request.conversation;
  const bool tools_on = !conv.tools.empty() && conv.tool_choice != recipe::ToolChoice::None;
  const bool required = tools_on && conv.tool_choice == recipe::ToolChoice::Required;
  bool strict = false;
  for (const auto& t : conv.tools) strict |= t.strict.value_or(false);
  auto out = std::make_shared<st::StructuredOutput>();
  if (tools_on && (strict || required)) {
    // Chat / Responses `parallel_tool_calls: false`, Messages `disable_parallel_tool_use`.
    bool parallel = !request.inference_options.disable_parallel_tool_use.value_or(false);
    if (const Json* p = body.if_contains("parallel_tool_calls"); p && p->is_bool())
      parallel = parallel && p->as_bool();
    JsonArray tools;
    for (const auto& t : conv.tools)
      tools.push_back(JsonObject{
          {"name", t.name}, {"parameters", t.parameters}, {"strict", t.strict.value_or(false)}});
    JsonObject tool_spec{
        {"encoding", context.encoding == recipe::EncodingVersion::V4 ? "v4" : "v41"},
        {"required", required},
        {"thinking", !required && conv.thinking_mode},
        {"parallel", parallel},
        {"tools", std::move(tools)},
        {"content", nullptr}};
    if (spec.value() && !required) {
      auto content = content_json(*spec.value());
      if (!content.ok()) return content.error();
      tool_spec["content"] = std::move(content.value());
    }
    auto g = context.cache->get({Kind::kToolCalls, to_json(Json(std::move(tool_spec))), "tools"});
    if (!g.ok()) return g.error();
    out->grammar = std::move(g.value());
    return Out(std::move(out));
  }
  if (!spec.value()) return Out{};
  auto g = context.cache->get(*spec.value());
  if (!g.ok()) return g.error();
  out->grammar = std::move(g.value());
  out->think_end = conv.thinking_mode ? context.think_end : -1;
  return Out(std::move(out));
}

}  // namespace deepinfer::server
