#include "recipe/render_normalize.h"

#include <algorithm>
#include <string_view>

namespace deepinfer::recipe {
namespace {

bool is_user_or_tool(const Message& m) { return m.role == Role::User || m.role == Role::Tool; }

void append_user(std::vector<Message>& out, const Message& m) {
  if (!out.empty() && out.back().role == Role::User) {
    Message& last = out.back();
    last.content += "\n\n";
    last.content += m.content;
    last.image_sources.insert(last.image_sources.end(), m.image_sources.begin(),
                              m.image_sources.end());
    return;
  }
  out.push_back(m);
}

// Rank of a tool result: index of its call id among the last assistant's calls (unknown ⇒ 0).
size_t call_rank(const std::vector<std::string_view>& order, std::string_view id) {
  const auto it = std::find(order.begin(), order.end(), id);
  return it == order.end() ? 0 : static_cast<size_t>(it - order.begin());
}

// §3.2 step 4 on one maximal run [begin, end) of user/tool messages.
void sort_tool_results(std::vector<Message>& n, size_t begin, size_t end,
                       const std::vector<std::string_view>& order) {
  std::vector<size_t> slots;
  for (size_t i = begin; i < end; ++i) {
    if (n[i].role == Role::Tool) slots.push_back(i);
  }
  if (slots.size() < 2 || order.empty()) return;
  std::vector<Message> tools;
  tools.reserve(slots.size());
  for (size_t slot : slots) tools.push_back(std::move(n[slot]));
  std::stable_sort(tools.begin(), tools.end(), [&](const Message& a, const Message& b) {
    return call_rank(order, a.tool_call_id) < call_rank(order, b.tool_call_id);
  });
  for (size_t k = 0; k < slots.size(); ++k) n[slots[k]] = std::move(tools[k]);
}

}  // namespace

std::vector<Message> normalize_messages(const std::vector<Message>& messages,
                                        EncodingVersion version) {
  std::vector<Message> n;
  n.reserve(messages.size() + 1);
  bool seen_non_system = false;
  for (const Message& m : messages) {
    if (m.role == Role::System && version == EncodingVersion::V4) {
      if (!seen_non_system) {
        if (!n.empty() && n.back().role == Role::System) {
          std::string& content = n.back().content;
          if (!content.empty() && !m.content.empty()) content += "\n\n";
          content += m.content;
        } else {
          n.push_back(m);
        }
      } else if (!m.content.empty()) {
        Message demoted;
        demoted.role = Role::User;
        demoted.content = m.content;
        append_user(n, demoted);
      }
      continue;
    }
    if (m.role != Role::System) seen_non_system = true;
    if (m.role == Role::User) {
      append_user(n, m);
    } else {
      n.push_back(m);
    }
  }

  std::vector<std::string_view> order;
  size_t i = 0;
  while (i < n.size()) {
    if (!is_user_or_tool(n[i])) {
      if (n[i].role == Role::Assistant && !n[i].tool_calls.empty()) {
        order.clear();
        for (const ToolCall& call : n[i].tool_calls) order.push_back(call.id);
      }
      ++i;
      continue;
    }
    size_t end = i;
    while (end < n.size() && is_user_or_tool(n[end])) ++end;
    sort_tool_results(n, i, end, order);
    i = end;
  }
  return n;
}

}  // namespace deepinfer::recipe
