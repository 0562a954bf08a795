// `deepinfer recipe encode`: API request → DeepSeek V4 / V4.1 prompt and its token ids.
//
// stdin:  the envelope of `recipe render` ({"protocol", "encoding"?, "request"}).
// stdout: {"prompt": "<rendered prompt>", "token_ids": [...]}, exit 0. Only the spans the
//         renderer marks special become special ids; all request text is plain BPE even when it
//         spells a special token (encoding spec §5).
// --tokenizer DIR: tokenizer.json directory; default the cached tokenizer of the envelope's
//         encoding (scripts/build_tokenizers.sh).
// Errors: stdout {"error":{"type":...,"message":...}}, exit 1; request problems are
//         invalid_request_error, a missing or unusable tokenizer is internal_error.
#include <iostream>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/recipe_io.h"
#include "recipe/render.h"
#include "tokenizer/cache_dir.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

void run_encode(const std::string& tokenizer_dir) {
  auto envelope = read_recipe_envelope(std::cin);
  if (!envelope.ok()) fail_recipe(envelope.error());
  auto request = convert_envelope(envelope.value());
  if (!request.ok()) fail_recipe(request.error());
  const recipe::EncodingVersion version = envelope.value().encoding;
  const recipe::RenderedPrompt rendered =
      recipe::render_prompt(request.value().conversation, version);

  const std::string dir =
      tokenizer_dir.empty()
          ? tokenizer::deepseek_tokenizer_dir(version == recipe::EncodingVersion::V41)
          : tokenizer_dir;
  auto tok = tokenizer::Tokenizer::from_path(dir);
  if (!tok) fail_recipe(RecipeError{"internal_error", tok.error().message});
  std::vector<tokenizer::TextSpan> spans;
  spans.reserve(rendered.special_spans.size());
  for (const auto& s : rendered.special_spans) spans.push_back({s.begin, s.end});
  auto ids = tok.value()->encode_segments(rendered.prompt, spans, /*threads=*/0);
  if (!ids) fail_recipe(RecipeError{"internal_error", ids.error().message});

  JsonArray token_ids;
  token_ids.reserve(ids.value().size());
  for (tokenizer::TokenId id : ids.value()) token_ids.push_back(id);
  JsonObject out;
  out["prompt"] = rendered.prompt;
  out["token_ids"] = std::move(token_ids);
  print_json_line(std::cout, out);
}

void setup(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto* cmd = recipe_command(app).add_subcommand(
      "encode", "Render an API request (JSON envelope on stdin) and encode it to token ids");
  cmd->add_option("--tokenizer", *dir,
                  "Directory with tokenizer.json (default: the cached tokenizer of `encoding`)");
  cmd->callback([dir] { run_encode(*dir); });
}

DEEPINFER_COMMAND(setup);

}  // namespace
}  // namespace deepinfer::cli
