#include "recipe/render_tools.h"

#include <string>

#include "recipe/python_json.h"

namespace deepinfer::recipe {
namespace {

constexpr DsmlNames kV4Names{"tool_calls", "invoke", "parameter"};
constexpr DsmlNames kV41Names{" calls", " invoke", " parameter"};

MarkedText make_tool_prompt_head(const DsmlNames& n) {
  const std::string b(n.block), i(n.invoke), p(n.parameter);
  const std::string d(kDsml);
  std::string text =
      "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can "
      "invoke tools by writing a \"<" +
      d + b + ">\" block like the following:\n\n<" + d + b + ">\n<" + d + i +
      " name=\"$TOOL_NAME\">\n<" + d + p +
      " name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + d + p + ">\n...\n</" +
      d + i + ">\n<" + d + i + " name=\"$TOOL_NAME2\">\n...\n</" + d + i + ">\n</" + d + b +
      ">\n\nString parameters should be specified as is and set `string=\"true\"`. For all other "
      "types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
      "`string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by <think>), you MUST output "
      "your complete reasoning inside <think>...</think> BEFORE any tool calls or final "
      "response.\n\nOtherwise, output directly after </think> with tool calls or final "
      "response.\n\n### Available Tool Schemas\n\n";
  return mark_template_text(std::move(text));
}

const MarkedText& tool_prompt_head(EncodingVersion version) {
  static const MarkedText v4 = make_tool_prompt_head(kV4Names);
  static const MarkedText v41 = make_tool_prompt_head(kV41Names);
  return version == EncodingVersion::V4 ? v4 : v41;
}

constexpr std::string_view kToolPromptTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
    "tool calls.\n";

void append_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
  append_json_escaped(out, s);
  out.push_back('"');
}

// {"name": …, "description": … or "", "parameters": …} in Python-style JSON.
void append_schema_line(std::string& out, const ToolDefinition& tool) {
  out += "{\"name\": ";
  append_quoted(out, tool.name);
  out += ", \"description\": ";
  append_quoted(out, tool.description ? std::string_view(*tool.description) : std::string_view());
  out += ", \"parameters\": ";
  append_python_json(out, tool.parameters);
  out.push_back('}');
}

// `<｜DSML｜` + tag, or `</｜DSML｜` + tag when closing; the marker is the only special part.
void open_tag(PromptWriter& w, std::string_view tag, bool closing = false) {
  w.plain(closing ? "</" : "<");
  w.special(kDsml);
  w.plain(tag);
}

void append_param(PromptWriter& w, const DsmlNames& n, std::string_view key, const Json* value,
                  std::string_view raw) {
  open_tag(w, n.parameter);
  w.plain(" name=\"");
  w.plain(key);
  const bool is_string = value == nullptr || value->is_string();
  w.plain(is_string ? "\" string=\"true\">" : "\" string=\"false\">");
  if (value == nullptr) {
    w.plain(raw);
  } else if (is_string) {
    w.plain(value->get_string());
  } else {
    append_python_json(w.text(), *value);
  }
  open_tag(w, n.parameter, /*closing=*/true);
  w.plain(">");
}

void append_invoke(PromptWriter& w, const DsmlNames& n, const ToolCall& call) {
  open_tag(w, n.invoke);
  w.plain(" name=\"");
  w.plain(call.name);
  w.plain("\">\n");
  auto parsed = parse_json(call.arguments);
  if (parsed.ok() && parsed.value().is_object()) {
    bool first = true;
    for (const auto& member : parsed.value().get_object()) {
      if (!first) w.plain("\n");
      first = false;
      append_param(w, n, member.key(), &member.value(), {});
    }
  } else {
    append_param(w, n, "arguments", nullptr, call.arguments);
  }
  w.plain("\n");
  open_tag(w, n.invoke, /*closing=*/true);
  w.plain(">");
}

}  // namespace

DsmlNames dsml_names(EncodingVersion version) {
  return version == EncodingVersion::V4 ? kV4Names : kV41Names;
}

void append_tool_prompt(PromptWriter& w, const std::vector<ToolDefinition>& tools,
                        EncodingVersion version) {
  w.marked(tool_prompt_head(version));
  bool first = true;
  for (const ToolDefinition& tool : tools) {
    if (!first) w.plain("\n");
    first = false;
    append_schema_line(w.text(), tool);
  }
  w.plain(kToolPromptTail);
}

void append_dsml_block(PromptWriter& w, const std::vector<ToolCall>& calls,
                       EncodingVersion version) {
  const DsmlNames n = dsml_names(version);
  append_dsml_block_open(w, version);
  bool first = true;
  for (const ToolCall& call : calls) {
    if (!first) w.plain("\n");
    first = false;
    append_invoke(w, n, call);
  }
  w.plain("\n");
  open_tag(w, n.block, /*closing=*/true);
  w.plain(">");
}

void append_dsml_block_open(PromptWriter& w, EncodingVersion version) {
  open_tag(w, dsml_names(version).block);
  w.plain(">\n");
}

}  // namespace deepinfer::recipe
