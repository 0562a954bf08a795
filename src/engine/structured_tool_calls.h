// Strict tool calls: a grammar for DeepSeek V4 / V4.1 output that ends in a DSML tool-call
// block (encoding spec §3.8): markers exact (the DSML marker is its special token), tool names
// from the declared list, parameters per each tool's JSON Schema (string parameters raw with
// string="true", all others compact JSON with string="false"), optional reasoning and answer
// text before the block.
#pragma once

#include <memory>

#include "common/json.h"
#include "common/result.h"
#include "engine/structured_grammar.h"

namespace deepinfer::engine::structured {

// The grammar's description as JSON (also the grammar-cache key):
//   {"encoding": "v4" | "v41",
//    "required": bool,   // the prompt already opened the block (tool_choice required / named):
//                        // the output is one or more invokes and the block end, nothing else
//    "thinking": bool,   // the output starts with free reasoning closed by </think>
//    "parallel": bool,   // default true; false: exactly one invoke per block
//    "tools": [{"name": s, "parameters": <JSON Schema>, "strict": bool}],
//    "content": null | {"kind": "json_schema" | "json_object" | "regex" | "choice",
//                       "source": <schema object | regex string | array of strings>}}
// Without "required", the answer is free text (or `content`, when given) followed by an
// optional block; with `content` the answer is the content, the block, or both.
// Parameters follow the schema for strict tools and, when `required`, for every tool whose
// schema compiles; other tools take any parameter names with raw or JSON values. A strict
// tool whose schema uses an unsupported keyword is an error naming it.
Result<std::unique_ptr<Grammar>> tool_call_grammar(const Json& spec, GrammarLimits limits = {});

}  // namespace deepinfer::engine::structured
