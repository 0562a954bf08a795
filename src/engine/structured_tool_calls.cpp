// DSML tool-call grammar: markup literals around per-tool parameter expressions.
#include "engine/structured_tool_calls.h"

#include <set>
#include <string>
#include <vector>

#include "engine/structured_json_schema.h"
#include "engine/structured_mask.h"
#include "engine/structured_regex.h"

namespace deepinfer::engine::structured {
namespace {

struct Tags {
  std::string block, invoke, parameter;
};

Error fail(const std::string& path, const std::string& what) { return Error{path + ": " + what}; }

// "<" M tag, where M is the DSML marker token's byte.
std::string open_tag(const std::string& tag) {
  return std::string("<") + static_cast<char>(kDsmlByte) + tag;
}
std::string close_tag(const std::string& tag) {
  return std::string("</") + static_cast<char>(kDsmlByte) + tag + ">";
}

bool json_bool(const JsonObject& o, const char* key) {
  const Json* v = o.if_contains(key);
  return v != nullptr && v->is_bool() && v->as_bool();
}

// Top-level keywords of a tool's parameters object that this grammar understands.
bool parameters_keyword(const std::string& k) {
  static const std::set<std::string> known = {
      "type",    "properties",  "required", "additionalProperties",
      "$defs",   "definitions", "title",    "description",
      "$schema", "$id",         "$comment", "strict"};
  return known.count(k) > 0;
}

class ToolGrammarBuilder {
 public:
  ToolGrammarBuilder(Grammar& g, const Tags& tags) : g_(g), tags_(tags) {}

  // Free text: any UTF-8 except U+FF5C (so that no DSML marker can be spelled as text), as
  // one right-recursive rule (cheap to precompute, unlike a repetition helper).
  Expr text() {
    if (!text_rule_) text_rule_ = chars_rule("text", ByteSet{});
    return Expr::ref(*text_rule_);
  }
  uint32_t chars_rule(const char* name, const ByteSet& ascii_excluded) {
    const uint32_t r = g_.add_rule(name);
    Expr any = utf8_any_char_except_dsml_bar(ascii_excluded);
    std::vector<Expr> alts;
    for (Expr& branch : any.items) alts.push_back(Expr::seq({std::move(branch), Expr::ref(r)}));
    alts.push_back(Expr::empty());
    g_.define(r, Expr::alt(std::move(alts)));
    return r;
  }

  // One parameter element around its value.
  Expr parameter(Expr name, bool string_value, Expr value) {
    return Expr::seq(
        {Expr::literal(open_tag(tags_.parameter) + " name=\""), std::move(name),
         Expr::literal(std::string("\" string=\"") + (string_value ? "true" : "false") + "\">"),
         std::move(value), Expr::literal(close_tag(tags_.parameter))});
  }

  // Any parameters: names without '"', raw string or JSON values.
  Expr loose_parameters(JsonSchemaBuilder& json) {
    if (!key_rule_) key_rule_ = chars_rule("key", ByteSet::of('"'));
    Expr name = Expr::ref(*key_rule_);
    Expr one = Expr::alt({parameter(name, true, text()), parameter(name, false, json.any_value())});
    return Expr::optional(Expr::seq({one, Expr::star(Expr::seq({Expr::byte('\n'), one}))}));
  }

  // Parameters per the schema: declared properties in order, required ones present.
  Result<Expr> schema_parameters(const Json& schema, JsonSchemaBuilder& json,
                                 const std::string& path) {
    if (!schema.is_object()) return fail(path, "must be a JSON Schema object");
    const JsonObject& s = schema.as_object();
    for (const auto& kv : s) {
      const std::string key(kv.key());
      if (!parameters_keyword(key)) return fail(path, "unsupported keyword '" + key + "'");
    }
    if (const Json* t = s.if_contains("type"); t && !(t->is_string() && t->as_string() == "object"))
      return fail(path, "must be a JSON Schema of type object");
    std::vector<std::string> required;
    if (const Json* r = s.if_contains("required")) {
      if (!r->is_array()) return fail(path, "'required' must be an array");
      for (const Json& n : r->as_array()) {
        if (!n.is_string()) return fail(path, "'required' entries must be strings");
        required.emplace_back(n.as_string());
      }
    }
    auto is_required = [&](const std::string& n) {
      for (const std::string& r : required)
        if (r == n) return true;
      return false;
    };
    struct Param {
      std::string name;
      Expr element;
      bool required;
    };
    std::vector<Param> params;
    auto check_name = [&](const std::string& name) -> Status {
      if (name.find('"') != std::string::npos)
        return fail(path, "parameter name '" + name + "' holds '\"', which DSML cannot carry");
      return Status::Ok();
    };
    if (const Json* p = s.if_contains("properties")) {
      if (!p->is_object()) return fail(path, "'properties' must be an object");
      for (const auto& kv : p->as_object()) {
        const std::string name(kv.key());
        if (Status st = check_name(name); !st.ok()) return st.error();
        const std::string where = path + "/properties/" + name;
        auto raw = json.raw_string(kv.value(), where);
        if (!raw.ok()) return raw.error();
        Expr element = Expr::empty();
        if (raw.value()) {
          element = parameter(Expr::literal(name), true, std::move(*raw.value()));
        } else {
          auto value = json.json(kv.value(), where);
          if (!value.ok()) return value.error();
          element = parameter(Expr::literal(name), false, std::move(value.value()));
        }
        params.push_back({name, std::move(element), is_required(name)});
      }
    }
    const Json* ap = s.if_contains("additionalProperties");
    for (const std::string& name : required) {
      bool found = false;
      for (const Param& p : params) found |= p.name == name;
      if (found) continue;
      if (ap && ap->is_bool() && !ap->as_bool())
        return fail(path, "required parameter '" + name + "' is not among the properties");
      if (Status st = check_name(name); !st.ok()) return st.error();
      params.push_back({name, parameter(Expr::literal(name), false, json.any_value()), true});
    }
    // first[k]: parameters k.. with none written yet; rest[k]: the same after one ("\n" first).
    const size_t n = params.size();
    std::vector<Expr> first(n + 1), rest(n + 1);
    for (size_t k = n; k-- > 0;) {
      const uint32_t fr = g_.add_rule("params_first"), rr = g_.add_rule("params_rest");
      Expr with_rest = Expr::seq({params[k].element, rest[k + 1]});
      Expr nl_rest = Expr::seq({Expr::byte('\n'), params[k].element, rest[k + 1]});
      if (params[k].required) {
        g_.define(fr, with_rest);
        g_.define(rr, nl_rest);
      } else {
        g_.define(fr, Expr::alt({with_rest, first[k + 1]}));
        g_.define(rr, Expr::alt({nl_rest, rest[k + 1]}));
      }
      first[k] = Expr::ref(fr);
      rest[k] = Expr::ref(rr);
    }
    return first[0];
  }

  Expr invoke(const std::string& name, Expr params) {
    return Expr::seq({Expr::literal(open_tag(tags_.invoke) + " name=\"" + name + "\">\n"),
                      std::move(params), Expr::literal("\n" + close_tag(tags_.invoke))});
  }

 private:
  Grammar& g_;
  const Tags& tags_;
  std::optional<uint32_t> text_rule_, key_rule_;
};

// The answer's content expression (response_format next to tools).
Result<Expr> content_expr(const JsonObject& content, JsonSchemaBuilder& json) {
  const Json* kind = content.if_contains("kind");
  const Json* source = content.if_contains("source");
  if (kind == nullptr || !kind->is_string() || source == nullptr)
    return Error{"tool-call grammar: content needs kind and source"};
  const std::string k(kind->as_string());
  if (k == "json_schema") return json.json(*source, "");
  if (k == "json_object") return json.any_object();
  if (k == "regex") {
    if (!source->is_string()) return Error{"tool-call grammar: regex source must be a string"};
    return regex_to_expr(source->as_string());
  }
  if (k == "choice") {
    if (!source->is_array() || source->as_array().empty())
      return Error{"tool-call grammar: choices must be a non-empty array of strings"};
    std::vector<Expr> alts;
    for (const Json& c : source->as_array()) {
      if (!c.is_string()) return Error{"tool-call grammar: choices must be strings"};
      alts.push_back(Expr::literal(c.as_string()));
    }
    return Expr::alt(std::move(alts));
  }
  return Error{"a '" + k + "' constraint cannot be combined with tool calls"};
}

}  // namespace

Result<std::unique_ptr<Grammar>> tool_call_grammar(const Json& spec, GrammarLimits limits) {
  if (!spec.is_object()) return Error{"tool-call grammar: the spec must be an object"};
  const JsonObject& o = spec.as_object();
  const Json* enc = o.if_contains("encoding");
  const bool v41 = enc == nullptr || !enc->is_string() || enc->as_string() != "v4";
  const Tags tags =
      v41 ? Tags{" calls", " invoke", " parameter"} : Tags{"tool_calls", "invoke", "parameter"};
  const bool required = json_bool(o, "required");
  const bool thinking = json_bool(o, "thinking");
  const Json* tools = o.if_contains("tools");
  if (tools == nullptr || !tools->is_array() || tools->as_array().empty())
    return Error{"tool-call grammar: no tools"};

  auto g = std::make_unique<Grammar>(limits);
  const uint32_t root = g->add_rule("root");
  ToolGrammarBuilder b(*g, tags);
  const Json empty;
  // One builder for every schema document: the value and string rules (each costs a
  // full-vocabulary precompute) are shared; $refs resolve against the current document.
  JsonSchemaBuilder json(*g, empty, true);
  auto builder_for = [&](const Json& root_doc) -> JsonSchemaBuilder& {
    json.set_root(root_doc);
    return json;
  };

  std::vector<Expr> invokes;
  size_t index = 0;
  for (const Json& t : tools->as_array()) {
    const std::string path = "tools[" + std::to_string(index++) + "]";
    if (!t.is_object()) return Error{path + ": must be an object"};
    const JsonObject& to = t.as_object();
    const Json* name = to.if_contains("name");
    if (name == nullptr || !name->is_string() || name->as_string().empty())
      return Error{path + ": needs a name"};
    const std::string tool_name(name->as_string());
    if (tool_name.find('"') != std::string::npos)
      return Error{path + ": a tool name cannot hold '\"'"};
    const bool strict = json_bool(to, "strict");
    const Json* params = to.if_contains("parameters");
    Expr body = Expr::empty();
    bool typed = false;
    if ((strict || required) && params != nullptr) {
      auto e = b.schema_parameters(*params, builder_for(*params), path + ".parameters");
      if (e.ok()) {
        body = std::move(e.value());
        typed = true;
      } else if (strict) {
        return e.error();
      }
    }
    if (!typed) body = b.loose_parameters(builder_for(empty));
    invokes.push_back(b.invoke(tool_name, std::move(body)));
  }
  const uint32_t invoke_rule = g->add_rule("invoke");
  g->define(invoke_rule, Expr::alt(std::move(invokes)));
  // invokes "\n" block-end
  const Json* parallel = o.if_contains("parallel");
  const bool many = parallel == nullptr || !parallel->is_bool() || parallel->as_bool();
  Expr more =
      many ? Expr::star(Expr::seq({Expr::byte('\n'), Expr::ref(invoke_rule)})) : Expr::empty();
  Expr calls = Expr::seq(
      {Expr::ref(invoke_rule), std::move(more), Expr::literal("\n" + close_tag(tags.block))});
  Expr answer = Expr::empty();
  if (required) {
    answer = std::move(calls);
  } else {
    Expr block = Expr::seq({Expr::literal(open_tag(tags.block) + ">\n"), std::move(calls)});
    const Json* content = o.if_contains("content");
    if (content != nullptr && !content->is_null()) {
      if (!content->is_object()) return Error{"tool-call grammar: content must be an object"};
      const Json* source = content->as_object().if_contains("source");
      auto c = content_expr(content->as_object(), builder_for(source ? *source : empty));
      if (!c.ok()) return c.error();
      answer = Expr::alt({Expr::seq({std::move(c.value()),
                                     Expr::optional(Expr::seq({Expr::literal("\n\n"), block}))}),
                          block});
    } else {
      answer = Expr::seq({b.text(), Expr::optional(std::move(block))});
    }
  }
  if (thinking) answer = Expr::seq({b.text(), Expr::byte(kThinkEndByte), std::move(answer)});
  g->define(root, std::move(answer));
  if (Status st = g->finalize(root); !st.ok()) return st.error();
  return g;
}

}  // namespace deepinfer::engine::structured
