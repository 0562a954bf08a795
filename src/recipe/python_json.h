// Python-style JSON text (encoding spec §3.7): what `json.dumps(v, ensure_ascii=False)` prints.
// Used for tool schemas, non-string historical tool arguments, the JSON-mode schema and
// Anthropic tool_use.input. The compact form uses "," and ":" with the same escaping.
#pragma once

#include <string>

#include "common/json.h"

namespace deepinfer::recipe {

// `", "` / `": "` separators, keys in stored order, non-ASCII raw, floats as Python repr.
std::string to_python_json(const Json& value);
void append_python_json(std::string& out, const Json& value);

// Same escaping and number format, no spaces (",", ":").
std::string to_compact_json(const Json& value);
void append_compact_json(std::string& out, const Json& value);

// Python repr of a double: shortest round-trip digits; exponent form when the decimal exponent
// is < -4 or >= 16 (`1e-05`, `1e+16`), otherwise fixed with a trailing `.0` for integers.
void append_python_float(std::string& out, double value);

// JSON string body escaping (no quotes): \" \\ \n \r \t \b \f, other C0 as \u00xx, rest raw.
void append_json_escaped(std::string& out, std::string_view text);

}  // namespace deepinfer::recipe
