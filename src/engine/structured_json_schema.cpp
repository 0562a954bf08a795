// JSON Schema compiler: schema nodes → grammar expressions, shared rules for JSON values.
#include "engine/structured_json_schema.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "engine/structured_regex.h"

namespace deepinfer::engine::structured {
namespace {

constexpr int kMaxSchemaDepth = 64;

Expr must_regex(std::string_view re) {
  auto e = regex_to_expr(re);
  return e.ok() ? std::move(e.value()) : Expr::empty();
}

// Integer ranges as decimal grammars (no leading zeros).
Expr same_length_range(const std::string& x, const std::string& y) {
  const size_t n = x.size();
  auto byte_range = [](char a, char b) {
    return Expr::byteset(ByteSet::range(static_cast<uint8_t>(a), static_cast<uint8_t>(b)));
  };
  auto digits = [](size_t k) {
    return Expr::repeat(Expr::byteset(ByteSet::range('0', '9')), static_cast<int32_t>(k),
                        static_cast<int32_t>(k));
  };
  if (n == 1) return byte_range(x[0], y[0]);
  const std::string xr = x.substr(1), yr = y.substr(1);
  if (x[0] == y[0])
    return Expr::seq({Expr::byte(static_cast<uint8_t>(x[0])), same_length_range(xr, yr)});
  if (xr == std::string(n - 1, '0') && yr == std::string(n - 1, '9'))
    return Expr::seq({byte_range(x[0], y[0]), digits(n - 1)});
  std::vector<Expr> alts;
  alts.push_back(Expr::seq(
      {Expr::byte(static_cast<uint8_t>(x[0])), same_length_range(xr, std::string(n - 1, '9'))}));
  if (x[0] + 1 <= y[0] - 1)
    alts.push_back(Expr::seq(
        {byte_range(static_cast<char>(x[0] + 1), static_cast<char>(y[0] - 1)), digits(n - 1)}));
  alts.push_back(Expr::seq(
      {Expr::byte(static_cast<uint8_t>(y[0])), same_length_range(std::string(n - 1, '0'), yr)}));
  return Expr::alt(std::move(alts));
}

uint64_t pow10(size_t k) {
  uint64_t v = 1;
  for (size_t i = 0; i < k; ++i) v *= 10;
  return v;
}

// [a, b] over non-negative integers; b absent = unbounded.
Expr nonneg_range(uint64_t a, std::optional<uint64_t> b) {
  const size_t la = std::to_string(a).size();
  std::vector<Expr> alts;
  const size_t lb = b ? std::to_string(*b).size() : std::min<size_t>(la, 19);
  for (size_t len = la; len <= lb; ++len) {
    const uint64_t lo = std::max<uint64_t>(a, len == 1 ? 0 : pow10(len - 1));
    const uint64_t hi = b && len == lb ? *b : pow10(len) - 1;
    if (lo > hi) continue;
    alts.push_back(same_length_range(std::to_string(lo), std::to_string(hi)));
  }
  if (!b && la < 19) {
    // Every number with more digits than `a`.
    alts.push_back(Expr::seq(
        {Expr::byteset(ByteSet::range('1', '9')),
         Expr::repeat(Expr::byteset(ByteSet::range('0', '9')), static_cast<int32_t>(la), 18)}));
  }
  return Expr::alt(std::move(alts));
}

// [lo, hi] over integers; absent = unbounded.
Expr int_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<Expr> alts;
  if (!lo || *lo < 0) {
    // Negative part: -(|x|) for x in [lo, min(hi, -1)].
    const int64_t top = hi ? std::min<int64_t>(*hi, -1) : -1;
    if (!lo || *lo <= top) {
      std::optional<uint64_t> mag_hi;
      if (lo) mag_hi = static_cast<uint64_t>(-(*lo + 1)) + 1;
      alts.push_back(Expr::seq(
          {Expr::byte('-'), nonneg_range(static_cast<uint64_t>(-(top + 1)) + 1, mag_hi)}));
    }
  }
  if (!hi || *hi >= 0) {
    const uint64_t a = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> b;
    if (hi) b = static_cast<uint64_t>(*hi);
    if (!b || a <= *b) alts.push_back(nonneg_range(a, b));
  }
  return Expr::alt(std::move(alts));
}

class Compiler {
 public:
  Compiler(Grammar& g, const Json& root, bool exclude_dsml_bar = false)
      : g_(g), root_(&root), exclude_dsml_bar_(exclude_dsml_bar) {}
  // Another document for $refs (rules for plain values and strings stay shared).
  void set_root(const Json& root) {
    root_ = &root;
    refs_.clear();
  }

  Result<Expr> compile(const Json& s, const std::string& path, int depth);
  // The raw characters (no JSON quoting or escaping) of a schema that admits only strings;
  // nullopt for other schemas.
  Result<std::optional<Expr>> raw_string(const Json& s, const std::string& path);
  Expr any_value() { return Expr::ref(value_rule()); }
  Expr any_object() {
    value_rule();
    return Expr::ref(object_rule_);
  }

 private:
  Error fail(const std::string& path, const std::string& what) const {
    return Error{"json_schema" + (path.empty() ? std::string() : " at " + path) + ": " + what};
  }
  uint32_t value_rule();
  uint32_t chars_rule();
  Expr string_expr() {
    return Expr::seq({Expr::byte('"'), Expr::ref(chars_rule()), Expr::byte('"')});
  }
  Expr one_char();
  Expr escape_expr();
  Result<Expr> compile_ref(const std::string& ref, const std::string& path);
  Result<Expr> compile_type(const JsonObject& s, const std::string& type, const std::string& path,
                            int depth);
  Result<Expr> compile_object(const JsonObject& s, const std::string& path, int depth);
  Result<Expr> compile_array(const JsonObject& s, const std::string& path, int depth);
  Result<Expr> compile_string(const JsonObject& s, const std::string& path, bool raw = false);
  Expr any_char(const ByteSet& ascii_excluded) const {
    return exclude_dsml_bar_ ? utf8_any_char_except_dsml_bar(ascii_excluded)
                             : utf8_any_char(ascii_excluded);
  }
  Expr raw_char() const { return any_char(ByteSet{}); }
  // Raw characters, any number: one right-recursive rule shared by every raw string (a
  // repetition helper per use would cost a full-vocabulary precompute each).
  uint32_t raw_chars_rule();
  Result<Expr> compile_number(const JsonObject& s, bool integer, const std::string& path);

  Grammar& g_;
  const Json* root_;
  std::map<std::string, uint32_t> refs_;
  std::optional<uint32_t> value_, chars_, raw_chars_;
  uint32_t object_rule_ = 0;
  bool exclude_dsml_bar_ = false;
};

Expr Compiler::escape_expr() {
  return Expr::seq(
      {Expr::byte('\\'),
       Expr::alt({Expr::byteset([] {
                    ByteSet s;
                    for (char c : std::string_view("\"\\/bfnrt")) s.set(static_cast<uint8_t>(c));
                    return s;
                  }()),
                  must_regex("u([0-9a-cA-CefEF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})")})});
}

uint32_t Compiler::chars_rule() {
  if (chars_) return *chars_;
  const uint32_t r = g_.add_rule("string_chars");
  chars_ = r;
  ByteSet excluded = ByteSet::range(0, 0x1f);
  excluded.set('"');
  excluded.set('\\');
  Expr any = any_char(excluded);
  std::vector<Expr> alts;
  for (Expr& branch : any.items) alts.push_back(Expr::seq({std::move(branch), Expr::ref(r)}));
  alts.push_back(Expr::seq({escape_expr(), Expr::ref(r)}));
  alts.push_back(Expr::empty());
  g_.define(r, Expr::alt(std::move(alts)));
  return r;
}

uint32_t Compiler::raw_chars_rule() {
  if (raw_chars_) return *raw_chars_;
  const uint32_t r = g_.add_rule("raw_chars");
  raw_chars_ = r;
  Expr any = raw_char();
  std::vector<Expr> alts;
  for (Expr& branch : any.items) alts.push_back(Expr::seq({std::move(branch), Expr::ref(r)}));
  alts.push_back(Expr::empty());
  g_.define(r, Expr::alt(std::move(alts)));
  return r;
}

Expr Compiler::one_char() {
  ByteSet excluded = ByteSet::range(0, 0x1f);
  excluded.set('"');
  excluded.set('\\');
  Expr any = any_char(excluded);
  any.items.push_back(escape_expr());
  return any;
}

uint32_t Compiler::value_rule() {
  if (value_) return *value_;
  const uint32_t v = g_.add_rule("value");
  value_ = v;
  object_rule_ = g_.add_rule("object");
  const uint32_t array = g_.add_rule("array");
  Expr member = Expr::seq({string_expr(), Expr::byte(':'), Expr::ref(v)});
  g_.define(object_rule_,
            Expr::seq({Expr::byte('{'),
                       Expr::optional(
                           Expr::seq({member, Expr::star(Expr::seq({Expr::byte(','), member}))})),
                       Expr::byte('}')}));
  g_.define(array,
            Expr::seq({Expr::byte('['),
                       Expr::optional(Expr::seq(
                           {Expr::ref(v), Expr::star(Expr::seq({Expr::byte(','), Expr::ref(v)}))})),
                       Expr::byte(']')}));
  g_.define(v, Expr::alt({Expr::ref(object_rule_), Expr::ref(array), string_expr(),
                          must_regex("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?"),
                          Expr::literal("true"), Expr::literal("false"), Expr::literal("null")}));
  return v;
}

const std::set<std::string>& known_keywords() {
  static const std::set<std::string> k = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "items",
                                          "prefixItems",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "format",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "$ref",
                                          "$defs",
                                          "definitions",
                                          "nullable",
                                          "title",
                                          "description",
                                          "default",
                                          "examples",
                                          "$schema",
                                          "$id",
                                          "$comment",
                                          "strict",
                                          "deprecated",
                                          "readOnly",
                                          "writeOnly"};
  return k;
}

bool is_annotation(const std::string& k) {
  return k == "title" || k == "description" || k == "default" || k == "examples" ||
         k == "$schema" || k == "$id" || k == "$comment" || k == "strict" || k == "deprecated" ||
         k == "readOnly" || k == "writeOnly" || k == "$defs" || k == "definitions";
}

Result<Expr> Compiler::compile_ref(const std::string& ref, const std::string& path) {
  auto it = refs_.find(ref);
  if (it != refs_.end()) return Expr::ref(it->second);
  if (ref.empty() || ref[0] != '#') return fail(path, "only local $ref ('#...') is supported");
  const Json* node = root_;
  size_t i = 1;
  while (i < ref.size()) {
    if (ref[i] != '/') return fail(path, "malformed $ref '" + ref + "'");
    size_t j = ref.find('/', i + 1);
    if (j == std::string::npos) j = ref.size();
    std::string token = ref.substr(i + 1, j - i - 1);
    for (size_t p; (p = token.find("~1")) != std::string::npos;) token.replace(p, 2, "/");
    for (size_t p; (p = token.find("~0")) != std::string::npos;) token.replace(p, 2, "~");
    if (node->is_object() && node->as_object().contains(token)) {
      node = &node->as_object().at(token);
    } else if (node->is_array() && !token.empty() &&
               token.find_first_not_of("0123456789") == std::string::npos &&
               std::stoul(token) < node->as_array().size()) {
      node = &node->as_array()[std::stoul(token)];
    } else {
      return fail(path, "$ref '" + ref + "' does not resolve");
    }
    i = j;
  }
  const uint32_t r = g_.add_rule("ref" + std::to_string(refs_.size()));
  refs_[ref] = r;
  auto e = compile(*node, ref, 0);
  if (!e.ok()) return e;
  g_.define(r, std::move(e.value()));
  return Expr::ref(r);
}

Result<Expr> Compiler::compile(const Json& sj, const std::string& path, int depth) {
  if (depth > kMaxSchemaDepth) return fail(path, "schema nested too deeply");
  if (sj.is_bool()) {
    if (sj.as_bool()) return any_value();
    return fail(path, "schema 'false' admits no value");
  }
  if (!sj.is_object()) return fail(path, "a schema must be an object or a boolean");
  const JsonObject& s = sj.as_object();
  for (const auto& kv : s) {
    const std::string key(kv.key());
    if (!known_keywords().count(key)) return fail(path, "unsupported keyword '" + key + "'");
  }
  if (const Json* n = s.if_contains("nullable"); n && n->is_bool() && n->as_bool()) {
    JsonObject rest = s;
    rest.erase("nullable");
    auto e = compile(rest, path, depth + 1);
    if (!e.ok()) return e;
    return Expr::alt({std::move(e.value()), Expr::literal("null")});
  }
  if (const Json* r = s.if_contains("$ref")) {
    if (!r->is_string()) return fail(path, "'$ref' must be a string");
    for (const auto& kv : s) {
      const std::string key(kv.key());
      if (key != "$ref" && !is_annotation(key))
        return fail(path, "keyword '" + key + "' next to '$ref' is not supported");
    }
    return compile_ref(std::string(r->as_string()), path);
  }
  if (const Json* c = s.if_contains("const")) return Expr::literal(to_json(*c));
  if (const Json* e = s.if_contains("enum")) {
    if (!e->is_array() || e->as_array().empty())
      return fail(path, "'enum' must be a non-empty array");
    std::vector<Expr> alts;
    for (const Json& v : e->as_array()) alts.push_back(Expr::literal(to_json(v)));
    return Expr::alt(std::move(alts));
  }
  for (const char* comb : {"anyOf", "oneOf"}) {
    const Json* a = s.if_contains(comb);
    if (a == nullptr) continue;
    if (!a->is_array() || a->as_array().empty())
      return fail(path, std::string("'") + comb + "' must be a non-empty array");
    for (const auto& kv : s) {
      const std::string key(kv.key());
      if (key != comb && !is_annotation(key))
        return fail(path, "keyword '" + key + "' next to '" + comb + "' is not supported");
    }
    std::vector<Expr> alts;
    size_t i = 0;
    for (const Json& branch : a->as_array()) {
      auto e = compile(branch, path + "/" + comb + "/" + std::to_string(i++), depth + 1);
      if (!e.ok()) return e;
      alts.push_back(std::move(e.value()));
    }
    return Expr::alt(std::move(alts));
  }
  const Json* t = s.if_contains("type");
  std::vector<std::string> types;
  if (t == nullptr) {
    if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required"))
      types.push_back("object");
    else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") ||
             s.contains("maxItems"))
      types.push_back("array");
    else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") ||
             s.contains("maxLength"))
      types.push_back("string");
    else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
             s.contains("exclusiveMaximum"))
      types.push_back("number");
    else
      return any_value();
  } else if (t->is_string()) {
    types.push_back(std::string(t->as_string()));
  } else if (t->is_array() && !t->as_array().empty()) {
    for (const Json& x : t->as_array()) {
      if (!x.is_string()) return fail(path, "'type' entries must be strings");
      types.push_back(std::string(x.as_string()));
    }
  } else {
    return fail(path, "'type' must be a string or a non-empty array of strings");
  }
  std::vector<Expr> alts;
  for (const std::string& type : types) {
    auto e = compile_type(s, type, path, depth);
    if (!e.ok()) return e;
    alts.push_back(std::move(e.value()));
  }
  return Expr::alt(std::move(alts));
}

Result<Expr> Compiler::compile_type(const JsonObject& s, const std::string& type,
                                    const std::string& path, int depth) {
  if (type == "object") return compile_object(s, path, depth);
  if (type == "array") return compile_array(s, path, depth);
  if (type == "string") return compile_string(s, path);
  if (type == "number") return compile_number(s, false, path);
  if (type == "integer") return compile_number(s, true, path);
  if (type == "boolean") return Expr::alt({Expr::literal("true"), Expr::literal("false")});
  if (type == "null") return Expr::literal("null");
  return fail(path, "unknown type '" + type + "'");
}

Result<Expr> Compiler::compile_object(const JsonObject& s, const std::string& path, int depth) {
  struct Prop {
    std::string name;
    Expr value;
    bool required = false;
  };
  std::vector<Prop> props;
  std::set<std::string> required;
  if (const Json* r = s.if_contains("required")) {
    if (!r->is_array()) return fail(path, "'required' must be an array");
    for (const Json& n : r->as_array()) {
      if (!n.is_string()) return fail(path, "'required' entries must be strings");
      required.insert(std::string(n.as_string()));
    }
  }
  const Json* ap = s.if_contains("additionalProperties");
  if (const Json* p = s.if_contains("properties")) {
    if (!p->is_object()) return fail(path, "'properties' must be an object");
    for (const auto& kv : p->as_object()) {
      const std::string name(kv.key());
      auto e = compile(kv.value(), path + "/properties/" + name, depth + 1);
      if (!e.ok()) return e;
      props.push_back({name, std::move(e.value()), required.count(name) > 0});
    }
  }
  for (const std::string& name : required) {
    bool found = false;
    for (const Prop& p : props) found |= p.name == name;
    if (found) continue;
    Expr value = any_value();
    if (ap && ap->is_object()) {
      auto e = compile(*ap, path + "/additionalProperties", depth + 1);
      if (!e.ok()) return e;
      value = std::move(e.value());
    } else if (ap && ap->is_bool() && !ap->as_bool()) {
      return fail(path, "required property '" + name + "' is not allowed by additionalProperties");
    }
    props.push_back({name, std::move(value), true});
  }
  if (props.empty() && !(ap && ap->is_bool() && !ap->as_bool())) {
    // A map: any keys with values of additionalProperties (or any value).
    Expr value = any_value();
    if (ap && ap->is_object()) {
      auto e = compile(*ap, path + "/additionalProperties", depth + 1);
      if (!e.ok()) return e;
      value = std::move(e.value());
    }
    Expr member = Expr::seq({string_expr(), Expr::byte(':'), value});
    return Expr::seq(
        {Expr::byte('{'),
         Expr::optional(Expr::seq({member, Expr::star(Expr::seq({Expr::byte(','), member}))})),
         Expr::byte('}')});
  }
  // first[i]: members i.. with none emitted yet; rest[i]: members i.. after one was emitted.
  const size_t n = props.size();
  std::vector<Expr> first(n + 1), rest(n + 1);
  for (size_t k = n; k-- > 0;) {
    Expr key = Expr::literal(to_json(Json(props[k].name)) + ":");
    Expr member = Expr::seq({key, props[k].value});
    const uint32_t fr = g_.add_rule("obj_first"), rr = g_.add_rule("obj_rest");
    Expr with_rest = Expr::seq({member, rest[k + 1]});
    Expr comma_rest = Expr::seq({Expr::byte(','), member, rest[k + 1]});
    if (props[k].required) {
      g_.define(fr, with_rest);
      g_.define(rr, comma_rest);
    } else {
      g_.define(fr, Expr::alt({with_rest, first[k + 1]}));
      g_.define(rr, Expr::alt({comma_rest, rest[k + 1]}));
    }
    first[k] = Expr::ref(fr);
    rest[k] = Expr::ref(rr);
  }
  return Expr::seq({Expr::byte('{'), first[0], Expr::byte('}')});
}

Result<Expr> Compiler::compile_array(const JsonObject& s, const std::string& path, int depth) {
  auto count = [&](const char* key, int64_t& out) -> Status {
    const Json* v = s.if_contains(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_int64() && !v->is_uint64())
      return fail(path, std::string("'") + key + "' must be a non-negative integer");
    const int64_t x = v->is_int64() ? v->as_int64() : static_cast<int64_t>(v->as_uint64());
    if (x < 0) return fail(path, std::string("'") + key + "' must be a non-negative integer");
    out = x;
    return Status::Ok();
  };
  int64_t min_items = 0, max_items = -1;
  if (Status st = count("minItems", min_items); !st.ok()) return st.error();
  if (Status st = count("maxItems", max_items); !st.ok()) return st.error();
  if (max_items >= 0 && max_items < min_items) return fail(path, "maxItems < minItems");
  std::vector<Expr> prefix;
  if (const Json* p = s.if_contains("prefixItems")) {
    if (!p->is_array()) return fail(path, "'prefixItems' must be an array");
    size_t i = 0;
    for (const Json& item : p->as_array()) {
      auto e = compile(item, path + "/prefixItems/" + std::to_string(i++), depth + 1);
      if (!e.ok()) return e;
      prefix.push_back(std::move(e.value()));
    }
  }
  std::optional<Expr> item;
  if (const Json* it = s.if_contains("items")) {
    if (!(it->is_bool() && !it->as_bool())) {
      auto e = compile(*it, path + "/items", depth + 1);
      if (!e.ok()) return e;
      item = std::move(e.value());
    }
  } else {
    item = any_value();
  }
  if (!item && min_items > static_cast<int64_t>(prefix.size()))
    return fail(path, "minItems exceeds the prefixItems allowed");
  if (max_items >= 0 && max_items <= static_cast<int64_t>(prefix.size())) {
    prefix.resize(static_cast<size_t>(max_items));
    item.reset();
  }
  const auto k = static_cast<int64_t>(prefix.size());
  // Extra items after the prefix: count in [lo, hi].
  const int64_t lo = std::max<int64_t>(0, min_items - k);
  const int64_t hi = !item ? 0 : max_items < 0 ? -1 : max_items - k;
  if (lo > 100000 || hi > 100000) return fail(path, "minItems/maxItems too large to compile");
  Expr tail = Expr::empty();
  if (item) {
    Expr sep_item = Expr::seq({Expr::byte(','), *item});
    if (prefix.empty()) {
      if (hi == 0) {
        tail = Expr::empty();
      } else {
        Expr more = Expr::repeat(sep_item, static_cast<int32_t>(std::max<int64_t>(lo - 1, 0)),
                                 hi < 0 ? kUnbounded : static_cast<int32_t>(hi - 1));
        tail = Expr::seq({*item, std::move(more)});
        if (lo == 0) tail = Expr::optional(std::move(tail));
      }
    } else {
      tail = Expr::repeat(sep_item, static_cast<int32_t>(lo),
                          hi < 0 ? kUnbounded : static_cast<int32_t>(hi));
    }
  }
  // Prefix item j may end the array only when j >= minItems; tail only after the full prefix.
  Expr body = std::move(tail);
  for (size_t j = prefix.size(); j-- > 0;) {
    Expr elem = j == 0 ? prefix[j] : Expr::seq({Expr::byte(','), prefix[j]});
    Expr here = Expr::seq({std::move(elem), std::move(body)});
    body = static_cast<int64_t>(j) >= min_items ? Expr::optional(std::move(here)) : std::move(here);
  }
  return Expr::seq({Expr::byte('['), std::move(body), Expr::byte(']')});
}

Result<std::optional<Expr>> Compiler::raw_string(const Json& sj, const std::string& path) {
  using Out = std::optional<Expr>;
  if (!sj.is_object()) return Out{};
  const JsonObject& s = sj.as_object();
  for (const auto& kv : s) {
    const std::string key(kv.key());
    if (!known_keywords().count(key)) return fail(path, "unsupported keyword '" + key + "'");
  }
  if (s.contains("nullable") || s.contains("$ref") || s.contains("anyOf") || s.contains("oneOf"))
    return Out{};
  auto all_strings = [](const Json& v) {
    if (v.is_string()) return true;
    if (!v.is_array() || v.as_array().empty()) return false;
    for (const Json& x : v.as_array())
      if (!x.is_string()) return false;
    return true;
  };
  if (const Json* c = s.if_contains("const"))
    return c->is_string() ? Out{Expr::literal(std::string(c->as_string()))} : Out{};
  if (const Json* e = s.if_contains("enum")) {
    if (!all_strings(*e) || !e->is_array()) return Out{};
    std::vector<Expr> alts;
    for (const Json& v : e->as_array()) alts.push_back(Expr::literal(std::string(v.as_string())));
    return Out{Expr::alt(std::move(alts))};
  }
  const Json* t = s.if_contains("type");
  const bool string_type = t ? t->is_string() && t->as_string() == "string"
                             : s.contains("pattern") || s.contains("format") ||
                                   s.contains("minLength") || s.contains("maxLength");
  if (!string_type) return Out{};
  auto e = compile_string(s, path, true);
  if (!e.ok()) return e.error();
  return Out{std::move(e.value())};
}

Result<Expr> Compiler::compile_string(const JsonObject& s, const std::string& path, bool raw) {
  const Json* pattern = s.if_contains("pattern");
  const Json* format = s.if_contains("format");
  const bool lengths = s.contains("minLength") || s.contains("maxLength");
  if ((pattern != nullptr) + (format != nullptr) + lengths > 1)
    return fail(path, "combining pattern, format and minLength/maxLength is not supported");
  auto quoted = [raw](Expr body) {
    if (raw) return body;
    return Expr::seq({Expr::byte('"'), std::move(body), Expr::byte('"')});
  };
  if (pattern) {
    if (!pattern->is_string()) return fail(path, "'pattern' must be a string");
    std::string re(pattern->as_string());
    auto e = regex_to_expr(re);
    if (!e.ok()) return fail(path, "pattern: " + e.error().message);
    return quoted(raw ? std::move(e.value()) : json_string_escape(e.value()));
  }
  if (format) {
    if (!format->is_string()) return fail(path, "'format' must be a string");
    const std::string f(format->as_string());
    const char* date =
        "[0-9]{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|"
        "(0[13578]|1[02])-31)";
    const char* time =
        "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):"
        "[0-5][0-9])";
    std::string re;
    if (f == "date")
      re = date;
    else if (f == "time")
      re = time;
    else if (f == "date-time")
      re = std::string(date) + "T" + time;
    else if (f == "uuid")
      re = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
    else if (f == "email")
      re = "[a-z0-9]+(\\.[a-z0-9]+)*@[a-z0-9]+(\\.[a-z0-9]+)+";  // unambiguous subset
    else if (f == "ipv4")
      re = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|"
           "[1-9]?[0-9])){3}";
    else
      return fail(path, "unsupported string format '" + f + "'");
    return quoted(must_regex(re));
  }
  if (lengths) {
    int64_t lo = 0, hi = -1;
    for (const char* key : {"minLength", "maxLength"}) {
      const Json* v = s.if_contains(key);
      if (v == nullptr) continue;
      if (!v->is_int64() || v->as_int64() < 0)
        return fail(path, std::string("'") + key + "' must be a non-negative integer");
      (std::string(key) == "minLength" ? lo : hi) = v->as_int64();
    }
    if (hi >= 0 && hi < lo) return fail(path, "maxLength < minLength");
    if (lo > 10000 || hi > 10000) return fail(path, "minLength/maxLength above 10000");
    const Expr one = raw ? raw_char() : one_char();
    const Expr more = Expr::ref(raw ? raw_chars_rule() : chars_rule());
    if (hi < 0)
      return quoted(
          Expr::seq({Expr::repeat(one, static_cast<int32_t>(lo), static_cast<int32_t>(lo)), more}));
    return quoted(Expr::repeat(one, static_cast<int32_t>(lo), static_cast<int32_t>(hi)));
  }
  return raw ? Expr::ref(raw_chars_rule()) : string_expr();
}

Result<Expr> Compiler::compile_number(const JsonObject& s, bool integer, const std::string& path) {
  std::optional<double> lo, hi;
  bool lo_ex = false, hi_ex = false;
  for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    const Json* v = s.if_contains(key);
    if (v == nullptr) continue;
    if (!v->is_number()) return fail(path, std::string("'") + key + "' must be a number");
    const double x = v->to_number<double>();
    const std::string k(key);
    if (k == "minimum" || k == "exclusiveMinimum") {
      if (!lo || x > *lo || (x == *lo && k == "exclusiveMinimum")) lo = x, lo_ex = k[0] == 'e';
    } else {
      if (!hi || x < *hi || (x == *hi && k == "exclusiveMaximum")) hi = x, hi_ex = k[0] == 'e';
    }
  }
  const char* int_re = "-?(0|[1-9][0-9]{0,15})";
  const char* num_re = "-?(0|[1-9][0-9]{0,15})(\\.[0-9]{1,15})?([eE][+-]?[1-9][0-9]?)?";
  if (!lo && !hi) return must_regex(integer ? int_re : num_re);
  constexpr double kLimit = 9.0e15;
  if ((lo && std::fabs(*lo) > kLimit) || (hi && std::fabs(*hi) > kLimit))
    return fail(path, "numeric bounds beyond ±9e15 are not supported");
  std::optional<int64_t> ilo, ihi;
  if (lo) {
    double c = std::ceil(*lo);
    if (lo_ex && c == *lo) c += 1;
    ilo = static_cast<int64_t>(c);
  }
  if (hi) {
    double f = std::floor(*hi);
    if (hi_ex && f == *hi) f -= 1;
    ihi = static_cast<int64_t>(f);
  }
  std::vector<Expr> alts;
  if (!ilo || !ihi || *ilo <= *ihi) alts.push_back(int_range(ilo, ihi));
  if (!integer) {
    // i.f in (i, i+1) with i >= 0, i >= lo and i + 1 <= hi.
    std::optional<int64_t> flo = std::max<int64_t>(ilo.value_or(0), 0);
    if (lo && !lo_ex && static_cast<double>(*flo) < *lo) *flo += 1;
    std::optional<int64_t> fhi;
    if (hi) fhi = static_cast<int64_t>(std::floor(*hi)) - 1;
    if (!fhi || *flo <= *fhi)
      alts.push_back(Expr::seq({int_range(flo, fhi), must_regex("\\.[0-9]{0,14}[1-9]")}));
  }
  if (alts.empty()) return fail(path, "the numeric range admits no value this engine generates");
  return Expr::alt(std::move(alts));
}

Result<std::unique_ptr<Grammar>> finish(std::unique_ptr<Grammar> g, uint32_t root) {
  Status st = g->finalize(root);
  if (!st.ok()) return st.error();
  return g;
}

}  // namespace

class JsonSchemaBuilder::Impl : public Compiler {
 public:
  using Compiler::Compiler;
};

JsonSchemaBuilder::JsonSchemaBuilder(Grammar& g, const Json& root, bool exclude_dsml_bar)
    : impl_(std::make_unique<Impl>(g, root, exclude_dsml_bar)) {}
JsonSchemaBuilder::~JsonSchemaBuilder() = default;
Result<Expr> JsonSchemaBuilder::json(const Json& schema, const std::string& path) {
  return impl_->compile(schema, path, 0);
}
Result<std::optional<Expr>> JsonSchemaBuilder::raw_string(const Json& schema,
                                                          const std::string& path) {
  return impl_->raw_string(schema, path);
}
Expr JsonSchemaBuilder::any_value() { return impl_->any_value(); }
void JsonSchemaBuilder::set_root(const Json& root) { impl_->set_root(root); }
Expr JsonSchemaBuilder::any_object() { return impl_->any_object(); }

Result<std::unique_ptr<Grammar>> json_schema_grammar(const Json& schema, GrammarLimits limits) {
  auto g = std::make_unique<Grammar>(limits);
  const uint32_t root = g->add_rule("root");
  Compiler c(*g, schema);
  auto e = c.compile(schema, "", 0);
  if (!e.ok()) return e.error();
  g->define(root, std::move(e.value()));
  return finish(std::move(g), root);
}

Result<std::unique_ptr<Grammar>> json_object_grammar(GrammarLimits limits) {
  auto g = std::make_unique<Grammar>(limits);
  const uint32_t root = g->add_rule("root");
  const Json empty;
  Compiler c(*g, empty);
  g->define(root, c.any_object());
  return finish(std::move(g), root);
}

Result<std::unique_ptr<Grammar>> regex_grammar(std::string_view pattern, GrammarLimits limits) {
  auto e = regex_to_expr(pattern);
  if (!e.ok()) return e.error();
  auto g = std::make_unique<Grammar>(limits);
  const uint32_t root = g->add_rule("root");
  g->define(root, std::move(e.value()));
  return finish(std::move(g), root);
}

Result<std::unique_ptr<Grammar>> choice_grammar(const std::vector<std::string>& choices,
                                                GrammarLimits limits) {
  if (choices.empty()) return Error{"guided_choice must be a non-empty array of strings"};
  auto g = std::make_unique<Grammar>(limits);
  const uint32_t root = g->add_rule("root");
  std::vector<Expr> alts;
  for (const std::string& c : choices) alts.push_back(Expr::literal(c));
  g->define(root, Expr::alt(std::move(alts)));
  return finish(std::move(g), root);
}

}  // namespace deepinfer::engine::structured
