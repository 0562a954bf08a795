#include "recipe/python_json.h"

#include <charconv>
#include <cstdio>
#include <cstring>

namespace deepinfer::recipe {
namespace {

void append_string(std::string& out, std::string_view s) {
  out.push_back('"');
  append_json_escaped(out, s);
  out.push_back('"');
}

void append_value(std::string& out, const Json& v, const char* item_sep, const char* key_sep) {
  switch (v.kind()) {
    case boost::json::kind::null:
      out += "null";
      break;
    case boost::json::kind::bool_:
      out += v.get_bool() ? "true" : "false";
      break;
    case boost::json::kind::int64: {
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof buf, v.get_int64());
      out.append(buf, r.ptr);
      break;
    }
    case boost::json::kind::uint64: {
      char buf[32];
      auto r = std::to_chars(buf, buf + sizeof buf, v.get_uint64());
      out.append(buf, r.ptr);
      break;
    }
    case boost::json::kind::double_:
      append_python_float(out, v.get_double());
      break;
    case boost::json::kind::string:
      append_string(out, v.get_string());
      break;
    case boost::json::kind::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& item : v.get_array()) {
        if (!first) out += item_sep;
        first = false;
        append_value(out, item, item_sep, key_sep);
      }
      out.push_back(']');
      break;
    }
    case boost::json::kind::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& member : v.get_object()) {
        if (!first) out += item_sep;
        first = false;
        append_string(out, member.key());
        out += key_sep;
        append_value(out, member.value(), item_sep, key_sep);
      }
      out.push_back('}');
      break;
    }
  }
}

}  // namespace

void append_json_escaped(std::string& out, std::string_view text) {
  static const char kHex[] = "0123456789abcdef";
  size_t run = 0;  // start of the pending run of bytes that need no escaping
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(text.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 15]);
    }
  }
  out.append(text.data() + run, text.size() - run);
}

void append_python_float(std::string& out, double value) {
  // Shortest round-trip digits in scientific form: d[.ddd]e±X
  char sci[64];
  auto r = std::to_chars(sci, sci + sizeof sci, value, std::chars_format::scientific);
  std::string_view s(sci, static_cast<size_t>(r.ptr - sci));
  bool negative = false;
  if (!s.empty() && s[0] == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  const size_t e_pos = s.find('e');
  std::string digits;
  for (char ch : s.substr(0, e_pos))
    if (ch != '.') digits.push_back(ch);
  int exp10 = 0;
  std::from_chars(s.data() + e_pos + 1 + (s[e_pos + 1] == '+'), s.data() + s.size(), exp10);
  // value = 0.d1d2... x 10^decpt
  const int decpt = exp10 + 1;
  if (negative) out.push_back('-');
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(decpt) - digits.size(), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<size_t>(decpt));
      out.push_back('.');
      out.append(digits, static_cast<size_t>(decpt));
    }
    return;
  }
  out.push_back(digits[0]);
  if (digits.size() > 1) {
    out.push_back('.');
    out.append(digits, 1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof ebuf, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  out += ebuf;
}

void append_python_json(std::string& out, const Json& value) { append_value(out, value, ", ", ": "); }
void append_compact_json(std::string& out, const Json& value) { append_value(out, value, ",", ":"); }

std::string to_python_json(const Json& value) {
  std::string out;
  append_python_json(out, value);
  return out;
}

std::string to_compact_json(const Json& value) {
  std::string out;
  append_compact_json(out, value);
  return out;
}

}  // namespace deepinfer::recipe
