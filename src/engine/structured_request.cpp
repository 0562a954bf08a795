// Request fields → constraint spec, grammar cache, thinking-aware per-request constraint.
#include "engine/structured_request.h"

#include <xxhash.h>

#include "engine/structured_json_schema.h"
#include "engine/structured_tool_calls.h"

namespace deepinfer::engine::structured {
namespace {

using Kind = ConstraintSpec::Kind;

Error field_error(const std::string& field, const std::string& what) {
  return Error{"'" + field + "' " + what};
}

// A schema given as an object (or, for guided_json, a JSON string holding one).
Result<ConstraintSpec> schema_spec(const Json& v, const std::string& field, bool allow_text) {
  if (v.is_object() || v.is_bool()) return ConstraintSpec{Kind::kJsonSchema, to_json(v), field};
  if (allow_text && v.is_string()) {
    auto parsed = parse_json(std::string(v.as_string()));
    if (!parsed.ok()) return field_error(field, "is not valid JSON: " + parsed.error().message);
    if (!parsed.value().is_object()) return field_error(field, "must hold a JSON Schema object");
    return ConstraintSpec{Kind::kJsonSchema, to_json(parsed.value()), field};
  }
  return field_error(field, "must be a JSON Schema object");
}

Result<ConstraintSpec> string_spec(const Json& v, Kind kind, const std::string& field) {
  if (!v.is_string()) return field_error(field, "must be a string");
  return ConstraintSpec{kind, std::string(v.as_string()), field};
}

Result<ConstraintSpec> choice_spec(const Json& v, const std::string& field) {
  if (!v.is_array() || v.as_array().empty())
    return field_error(field, "must be a non-empty array of strings");
  for (const Json& c : v.as_array())
    if (!c.is_string()) return field_error(field, "must be a non-empty array of strings");
  return ConstraintSpec{Kind::kChoice, to_json(v), field};
}

// response_format (Chat) and text.format (Responses): {type: text | json_object | json_schema}.
Result<std::optional<ConstraintSpec>> format_spec(const Json& v, const std::string& field,
                                                  bool nested_schema) {
  if (!v.is_object()) return field_error(field, "must be an object");
  const JsonObject& o = v.as_object();
  const Json* type = o.if_contains("type");
  if (type == nullptr || !type->is_string()) return field_error(field + ".type", "is required");
  const std::string t(type->as_string());
  if (t == "text") return std::optional<ConstraintSpec>{};
  if (t == "json_object") return std::optional<ConstraintSpec>{{Kind::kJsonObject, "", field}};
  if (t != "json_schema")
    return field_error(field + ".type", "must be 'text', 'json_object' or 'json_schema'");
  const JsonObject* holder = &o;
  std::string where = field;
  if (nested_schema) {
    const Json* js = o.if_contains("json_schema");
    if (js == nullptr || !js->is_object())
      return field_error(field + ".json_schema", "is required for type 'json_schema'");
    holder = &js->as_object();
    where = field + ".json_schema";
  }
  const Json* schema = holder->if_contains("schema");
  if (schema == nullptr) return field_error(where + ".schema", "is required");
  auto spec = schema_spec(*schema, where + ".schema", false);
  if (!spec.ok()) return spec.error();
  return std::optional<ConstraintSpec>{std::move(spec.value())};
}

}  // namespace

Result<std::optional<ConstraintSpec>> read_structured_output(const JsonObject& body) {
  std::vector<ConstraintSpec> found;
  auto add = [&](Result<ConstraintSpec> r) -> Status {
    if (!r.ok()) return r.error();
    found.push_back(std::move(r.value()));
    return Status::Ok();
  };
  auto add_opt = [&](Result<std::optional<ConstraintSpec>> r) -> Status {
    if (!r.ok()) return r.error();
    if (r.value()) found.push_back(std::move(*r.value()));
    return Status::Ok();
  };
  Status st;
  if (const Json* rf = body.if_contains("response_format"); rf && !rf->is_null())
    if (st = add_opt(format_spec(*rf, "response_format", true)); !st.ok()) return st.error();
  if (const Json* text = body.if_contains("text"); text && text->is_object())
    if (const Json* f = text->as_object().if_contains("format"); f && !f->is_null())
      if (st = add_opt(format_spec(*f, "text.format", false)); !st.ok()) return st.error();
  if (const Json* so = body.if_contains("structured_outputs"); so && !so->is_null()) {
    if (!so->is_object()) return field_error("structured_outputs", "must be an object");
    for (const auto& kv : so->as_object()) {
      const std::string key(kv.key());
      const std::string field = "structured_outputs." + key;
      if (kv.value().is_null()) continue;
      if (key == "json")
        st = add(schema_spec(kv.value(), field, true));
      else if (key == "regex")
        st = add(string_spec(kv.value(), Kind::kRegex, field));
      else if (key == "grammar")
        st = add(string_spec(kv.value(), Kind::kGrammar, field));
      else if (key == "choice")
        st = add(choice_spec(kv.value(), field));
      else if (key == "json_object") {
        if (kv.value().is_bool() && kv.value().as_bool())
          found.push_back({Kind::kJsonObject, "", field});
      } else if (key == "disable_any_whitespace" || key == "disable_fallback" ||
                 key == "disable_additional_properties" || key == "whitespace_pattern") {
        // Accepted; outputs are always compact.
      } else {
        return field_error(field, "is not supported");
      }
      if (!st.ok()) return st.error();
    }
  }
  struct Guided {
    const char* name;
    int kind;  // 0 json, 1 regex, 2 grammar, 3 choice
  };
  for (const Guided& g : {Guided{"guided_json", 0}, Guided{"guided_regex", 1},
                          Guided{"guided_grammar", 2}, Guided{"guided_choice", 3}}) {
    const Json* v = body.if_contains(g.name);
    if (v == nullptr || v->is_null()) continue;
    switch (g.kind) {
      case 0:
        st = add(schema_spec(*v, g.name, true));
        break;
      case 1:
        st = add(string_spec(*v, Kind::kRegex, g.name));
        break;
      case 2:
        st = add(string_spec(*v, Kind::kGrammar, g.name));
        break;
      default:
        st = add(choice_spec(*v, g.name));
        break;
    }
    if (!st.ok()) return st.error();
  }
  if (found.size() > 1)
    return Error{"only one structured output constraint may be given; found '" + found[0].field +
                 "' and '" + found[1].field + "'"};
  if (found.empty()) return std::optional<ConstraintSpec>{};
  return std::optional<ConstraintSpec>{std::move(found[0])};
}

Result<std::unique_ptr<Grammar>> build_grammar(const ConstraintSpec& spec, GrammarLimits limits) {
  Result<std::unique_ptr<Grammar>> g = Error{""};
  switch (spec.kind) {
    case Kind::kJsonObject:
      g = json_object_grammar(limits);
      break;
    case Kind::kRegex:
      g = regex_grammar(spec.source, limits);
      break;
    case Kind::kGrammar:
      g = parse_gbnf(spec.source, limits);
      break;
    case Kind::kChoice: {
      auto parsed = parse_json(spec.source);
      if (!parsed.ok() || !parsed.value().is_array())
        return field_error(spec.field, "must be a non-empty array of strings");
      std::vector<std::string> choices;
      for (const Json& c : parsed.value().as_array()) {
        if (!c.is_string()) return field_error(spec.field, "must be a non-empty array of strings");
        choices.emplace_back(c.as_string());
      }
      g = choice_grammar(choices, limits);
      break;
    }
    case Kind::kToolCalls: {
      auto parsed = parse_json(spec.source);
      if (!parsed.ok()) return field_error(spec.field, "is not valid JSON");
      g = tool_call_grammar(parsed.value(), limits);
      break;
    }
    case Kind::kJsonSchema: {
      auto parsed = parse_json(spec.source);
      if (!parsed.ok()) return field_error(spec.field, "is not valid JSON");
      g = json_schema_grammar(parsed.value(), limits);
      break;
    }
  }
  if (!g.ok() && !spec.field.empty()) return Error{"'" + spec.field + "': " + g.error().message};
  return g;
}

GrammarCache::GrammarCache(std::shared_ptr<const TokenTable> vocab, size_t capacity,
                           GrammarLimits limits)
    : vocab_(std::move(vocab)), capacity_(std::max<size_t>(capacity, 1)), limits_(limits) {}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCache::get(const ConstraintSpec& spec) {
  std::string key = std::to_string(static_cast<int>(spec.kind)) + ":" + spec.source;
  const uint64_t h = XXH3_64bits_withSeed(key.data(), key.size(), vocab_->fingerprint());
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(h);
    if (it != index_.end() && it->second->key == key) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      return it->second->grammar;
    }
    ++misses_;
  }
  auto g = build_grammar(spec, limits_);
  if (!g.ok()) return g.error();
  auto compiled = CompiledGrammar::compile(std::move(g.value()), vocab_);
  if (!compiled.ok()) {
    if (spec.field.empty()) return compiled.error();
    return Error{"'" + spec.field + "': " + compiled.error().message};
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(h);
  if (it != index_.end()) {
    lru_.erase(it->second);
    index_.erase(it);
  }
  lru_.push_front(Entry{std::move(key), compiled.value()});
  index_[h] = lru_.begin();
  while (lru_.size() > capacity_) {
    const std::string& k = lru_.back().key;
    index_.erase(XXH3_64bits_withSeed(k.data(), k.size(), vocab_->fingerprint()));
    lru_.pop_back();
  }
  return compiled.value();
}

StructuredConstraint::StructuredConstraint(std::shared_ptr<const CompiledGrammar> grammar,
                                           std::vector<int32_t> end_tokens, int32_t think_end)
    : matcher_(std::move(grammar), std::move(end_tokens)),
      think_end_(think_end),
      active_(think_end < 0) {}

bool StructuredConstraint::fill_mask(std::span<uint64_t> mask) {
  if (!active_) return false;
  matcher_.fill_mask(mask);
  return true;
}

bool StructuredConstraint::accept(int32_t token) {
  if (!active_) {
    if (token == think_end_) active_ = true;
    return true;
  }
  return matcher_.accept(token);
}

void StructuredConstraint::reset() {
  matcher_.reset();
  active_ = think_end_ < 0;
}

}  // namespace deepinfer::engine::structured
