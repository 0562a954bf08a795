#include "recipe/render.h"

#include "recipe/render_effort.h"
#include "recipe/render_normalize.h"
#include "recipe/render_tools.h"
#include "recipe/render_writer.h"

namespace deepinfer::recipe {
namespace {

constexpr std::string_view kResponseFormatJson =
    "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n"
    "{\"type\": \"json_object\"}";

size_t estimate_size(const std::vector<Message>& n, const Conversation& c) {
  size_t size = 1024;
  for (const Message& m : n) size += m.content.size() + m.reasoning_content.size() + 64;
  if (!c.tools.empty()) size += 2048 + 256 * c.tools.size();
  return size;
}

}  // namespace

RenderedPrompt render_prompt(const Conversation& conversation, EncodingVersion version) {
  std::vector<Message> n = normalize_messages(conversation.messages, version);

  // §3.3: tools and JSON mode attach to a (possibly inserted, empty) first system message.
  const bool has_tools =
      conversation.tool_choice != ToolChoice::None && !conversation.tools.empty();
  const bool json = conversation.response_format == ResponseFormat::JsonObject;
  if ((has_tools || json) && (n.empty() || n.front().role != Role::System)) {
    Message system;
    system.role = Role::System;
    n.insert(n.begin(), std::move(system));
  }

  RenderedPrompt out;
  out.prompt.reserve(estimate_size(n, conversation));
  PromptWriter w(out);
  const bool v41 = version == EncodingVersion::V41;
  const bool thinking = conversation.thinking_mode;

  w.special(kBos);
  for (size_t i = 0; i < n.size(); ++i) {
    const Message& m = n[i];
    const std::string_view effort = i == 0 && thinking
                                        ? effort_prefix(version, conversation.reasoning_effort)
                                        : std::string_view();
    if (i == 0 && v41 && (!effort.empty() || m.role == Role::System)) w.special(kSystem);
    w.plain(effort);
    const bool after_user_turn =
        i > 0 && (n[i - 1].role == Role::User || n[i - 1].role == Role::Tool);
    switch (m.role) {
      case Role::System:
        if (i > 0 && v41) w.special(kSystem);
        w.plain(m.content);
        if (i == 0) {
          if (has_tools) {
            w.plain("\n\n");
            append_tool_prompt(w, conversation.tools, version);
          }
          if (json) w.plain(kResponseFormatJson);
        }
        break;
      case Role::User:
        if (after_user_turn) {
          w.plain("\n\n");
        } else {
          w.special(kUser);
        }
        w.content_with_images(m.content, m.image_sources.size());
        break;
      case Role::Tool:
        if (after_user_turn) {
          w.plain("\n\n");
        } else {
          w.special(kUser);
        }
        w.plain("<tool_result>");
        w.content_with_images(m.content, m.image_sources.size());
        w.plain("</tool_result>");
        break;
      case Role::LatestReminder:
        w.special(kLatestReminder);
        w.plain(m.content);
        break;
      case Role::Assistant:
        w.special(kAssistant);
        if (thinking && i > 0) {
          w.special(kThinkBegin);
          w.plain(m.reasoning_content);
        }
        w.special(kThinkEnd);
        w.plain(m.content);
        if (!m.tool_calls.empty()) {
          w.plain("\n\n");
          append_dsml_block(w, m.tool_calls, version);
        }
        w.special(kEos);
        break;
    }
    if (m.role == Role::User || m.role == Role::Tool) {
      out.image_sources.insert(out.image_sources.end(), m.image_sources.begin(),
                               m.image_sources.end());
    }
  }
  w.special(kAssistant);
  w.special(thinking ? kThinkBegin : kThinkEnd);
  if (conversation.tool_choice == ToolChoice::Required && !conversation.tools.empty()) {
    w.plain("\n\n");
    append_dsml_block_open(w, version);
  }
  return out;
}

std::optional<EncodingVersion> encoding_from_name(std::string_view name) {
  if (name == "v4") return EncodingVersion::V4;
  if (name == "v41") return EncodingVersion::V41;
  return std::nullopt;
}

}  // namespace deepinfer::recipe
