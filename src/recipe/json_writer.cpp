#include "recipe/json_writer.h"

#include <cmath>
#include <cstdlib>

namespace deepinfer::recipe {

void append_json_float(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  if (value == 0.0) {
    out += std::signbit(value) ? "-0.0" : "0.0";
    return;
  }
  char sci[64];
  const auto r = std::to_chars(sci, sci + sizeof sci, value, std::chars_format::scientific);
  std::string_view s(sci, static_cast<size_t>(r.ptr - sci));
  if (s.front() == '-') {
    out.push_back('-');
    s.remove_prefix(1);
  }
  const size_t e_pos = s.find('e');
  char digits[32];
  size_t n = 0;
  for (char ch : s.substr(0, e_pos))
    if (ch != '.') digits[n++] = ch;
  const int exp10 = std::atoi(std::string(s.substr(e_pos + 1)).c_str());
  if (exp10 >= -5 && exp10 < 16) {
    if (exp10 < 0) {
      out += "0.";
      out.append(static_cast<size_t>(-exp10 - 1), '0');
      out.append(digits, n);
    } else if (static_cast<size_t>(exp10) + 1 >= n) {
      out.append(digits, n);
      out.append(static_cast<size_t>(exp10) + 1 - n, '0');
      out += ".0";
    } else {
      out.append(digits, static_cast<size_t>(exp10) + 1);
      out.push_back('.');
      out.append(digits + exp10 + 1, n - static_cast<size_t>(exp10) - 1);
    }
    return;
  }
  out.push_back(digits[0]);
  if (n > 1) {
    out.push_back('.');
    out.append(digits + 1, n - 1);
  }
  out.push_back('e');
  char ebuf[8];
  const auto er = std::to_chars(ebuf, ebuf + sizeof ebuf, exp10);
  out.append(ebuf, er.ptr);
}

void append_json_value(std::string& out, const Json& value) {
  JsonWriter w(out);
  switch (value.kind()) {
    case boost::json::kind::null:
      w.raw("null");
      break;
    case boost::json::kind::bool_:
      w.raw(value.get_bool() ? "true" : "false");
      break;
    case boost::json::kind::int64:
      w.num(value.get_int64());
      break;
    case boost::json::kind::uint64: {
      char buf[24];
      const auto r = std::to_chars(buf, buf + sizeof buf, value.get_uint64());
      out.append(buf, r.ptr);
      break;
    }
    case boost::json::kind::double_:
      append_json_float(out, value.get_double());
      break;
    case boost::json::kind::string:
      w.str(value.get_string());
      break;
    case boost::json::kind::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& item : value.get_array()) {
        if (!first) out.push_back(',');
        first = false;
        append_json_value(out, item);
      }
      out.push_back(']');
      break;
    }
    case boost::json::kind::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& member : value.get_object()) {
        if (!first) out.push_back(',');
        first = false;
        w.str(member.key());
        out.push_back(':');
        append_json_value(out, member.value());
      }
      out.push_back('}');
      break;
    }
  }
}

std::string json_value_text(const Json& value) {
  std::string out;
  append_json_value(out, value);
  return out;
}

}  // namespace deepinfer::recipe
