// Regular expressions (the ECMAScript/PCRE subset JSON Schema `pattern` and guided_regex use:
// literals, classes, escapes \d\w\s, groups, alternation, * + ? {m,n}, ^ $ at the ends) as
// grammar expressions over UTF-8 bytes. Unsupported features (backreferences, lookaround,
// word boundaries, inline flags) are errors naming the feature.
#pragma once

#include <string_view>

#include "common/result.h"
#include "engine/structured_grammar.h"

namespace deepinfer::engine::structured {

// The language of `pattern`, matched as a whole (anchors at the ends are accepted and ignored).
Result<Expr> regex_to_expr(std::string_view pattern);

// Rewrites an expression over raw characters into the bytes of a JSON string body that
// decodes to them: '"' and '\' become escapes, control characters become \uXXXX or short forms.
Expr json_string_escape(const Expr& e);

}  // namespace deepinfer::engine::structured
