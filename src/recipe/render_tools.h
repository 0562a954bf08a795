// DSML text of the V4 / V4.1 templates (encoding spec §3.6, §3.8): the tool prompt appended to
// the system message, historical assistant tool calls as a DSML block, and the tag names that
// differ between the versions. Only the `｜DSML｜` markers (and the `<think>` spellings of the
// tool-prompt prose) are special spans; names, schemas and arguments are plain text.
#pragma once

#include <string_view>
#include <vector>

#include "recipe/conversation.h"
#include "recipe/render.h"
#include "recipe/render_writer.h"

namespace deepinfer::recipe {

struct DsmlNames {
  std::string_view block;      // "tool_calls" | " calls"
  std::string_view invoke;     // "invoke" | " invoke"
  std::string_view parameter;  // "parameter" | " parameter"
};

DsmlNames dsml_names(EncodingVersion version);

// "## Tools\n\n…### Available Tool Schemas\n\n" + one Python-style JSON line per tool +
// "\n\nYou MUST strictly follow … tool calls.\n"
void append_tool_prompt(PromptWriter& w, const std::vector<ToolDefinition>& tools,
                        EncodingVersion version);

// "<｜DSML｜B>\n" + invokes joined by "\n" + "\n</｜DSML｜B>"
void append_dsml_block(PromptWriter& w, const std::vector<ToolCall>& calls,
                       EncodingVersion version);

// "<｜DSML｜B>\n": the opening the prompt ends with when tool_choice is required.
void append_dsml_block_open(PromptWriter& w, EncodingVersion version);

}  // namespace deepinfer::recipe
