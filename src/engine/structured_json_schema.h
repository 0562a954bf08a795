// JSON Schema (the subset OpenAI structured outputs accept) → Grammar producing compact JSON
// (no whitespace) that validates against the schema. Unsupported keywords are errors naming
// the keyword and where it is. Also: the any-JSON-object grammar (json_object mode), a regex
// grammar, a choice grammar.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "engine/structured_grammar.h"

namespace deepinfer::engine::structured {

// Supported: type (also arrays of types), properties, required, additionalProperties, enum,
// const, anyOf / oneOf (as alternatives), items, prefixItems, minItems, maxItems, minLength,
// maxLength, pattern, format (date, time, date-time, uuid, email, ipv4), minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, $ref / $defs / definitions, nullable, and annotations
// (title, description, default, examples, $schema, $id, $comment, strict, deprecated).
// Bounded numbers are generated as integers in range and non-negative decimals i.f with
// i and i+1 in range (a subset of the valid values).
Result<std::unique_ptr<Grammar>> json_schema_grammar(const Json& schema, GrammarLimits limits = {});

// Schema expressions inside a larger grammar (e.g. tool-call parameters): `root` is the
// document $refs resolve against; it must outlive the builder. With exclude_dsml_bar, strings
// never hold U+FF5C (the bar of the DSML marker, which in text could end a tool-call value).
class JsonSchemaBuilder {
 public:
  JsonSchemaBuilder(Grammar& g, const Json& root, bool exclude_dsml_bar = false);
  ~JsonSchemaBuilder();
  JsonSchemaBuilder(const JsonSchemaBuilder&) = delete;
  JsonSchemaBuilder& operator=(const JsonSchemaBuilder&) = delete;
  // Compact JSON valid against `schema`; errors name the keyword and `path`.
  Result<Expr> json(const Json& schema, const std::string& path);
  // The raw characters of a schema that admits only strings (type string, string enum or
  // const), with its pattern / format / length; nullopt for any other schema.
  Result<std::optional<Expr>> raw_string(const Json& schema, const std::string& path);
  Expr any_value();
  Expr any_object();
  // Resolves later $refs against another document (the shared value and string rules stay).
  void set_root(const Json& root);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Any JSON object (response_format json_object).
Result<std::unique_ptr<Grammar>> json_object_grammar(GrammarLimits limits = {});

// The whole output matches `pattern`.
Result<std::unique_ptr<Grammar>> regex_grammar(std::string_view pattern, GrammarLimits limits = {});

// The whole output is exactly one of `choices`.
Result<std::unique_ptr<Grammar>> choice_grammar(const std::vector<std::string>& choices,
                                                GrammarLimits limits = {});

}  // namespace deepinfer::engine::structured
