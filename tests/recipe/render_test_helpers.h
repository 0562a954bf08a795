// Builders and span helpers shared by the prompt-rendering tests (tests/recipe/render_*_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "recipe/render.h"

namespace deepinfer::recipe::testing {

inline Message system_msg(std::string content) {
  Message m;
  m.role = Role::System;
  m.content = std::move(content);
  return m;
}

inline Message user_msg(std::string content) {
  Message m;
  m.role = Role::User;
  m.content = std::move(content);
  return m;
}

inline Message assistant_msg(std::string content, std::string reasoning = "",
                             std::vector<ToolCall> calls = {}) {
  Message m;
  m.role = Role::Assistant;
  m.content = std::move(content);
  m.reasoning_content = std::move(reasoning);
  m.tool_calls = std::move(calls);
  return m;
}

inline Message tool_msg(std::string call_id, std::string content) {
  Message m;
  m.role = Role::Tool;
  m.tool_call_id = std::move(call_id);
  m.content = std::move(content);
  return m;
}

inline Message reminder_msg(std::string content) {
  Message m;
  m.role = Role::LatestReminder;
  m.content = std::move(content);
  return m;
}

inline ToolDefinition tool_def(std::string name, std::string parameters_json,
                               std::optional<std::string> description = std::nullopt) {
  ToolDefinition t;
  t.name = std::move(name);
  t.description = std::move(description);
  auto parsed = parse_json(parameters_json);
  EXPECT_TRUE(parsed.ok()) << parameters_json;
  if (parsed.ok()) t.parameters = parsed.value();
  return t;
}

// The texts of the special spans, in order; also checks they are ascending and non-overlapping.
inline std::vector<std::string> span_texts(const RenderedPrompt& r) {
  std::vector<std::string> out;
  size_t last_end = 0;
  for (const SpecialSpan& s : r.special_spans) {
    EXPECT_LE(last_end, s.begin);
    EXPECT_LT(s.begin, s.end);
    EXPECT_LE(s.end, r.prompt.size());
    last_end = s.end;
    out.emplace_back(std::string_view(r.prompt).substr(s.begin, s.end - s.begin));
  }
  return out;
}

inline std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  size_t at = 0;
  while ((at = s.find(from, at)) != std::string::npos) {
    s.replace(at, from.size(), to);
    at += to.size();
  }
  return s;
}

}  // namespace deepinfer::recipe::testing
