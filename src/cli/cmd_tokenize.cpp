// `deepinfer tokenize` (stdin: raw UTF-8 text → stdout {"ids":[...]}) and `deepinfer detokenize`
// (stdin {"ids":[...]} → stdout {"text":"..."}). tokenize behaves like HF
// `encode(text, add_special_tokens=False)`: added tokens spelled in the text (<｜User｜>,
// </think>, ...) become their ids; --plain turns that off (every byte is ordinary text, the rule
// for request text in prompts). Errors: {"error":{"type":"invalid_request_error",...}}, exit 1.
#include <iostream>
#include <string>

#include "cli/command.h"
#include "common/io.h"
#include "common/json.h"
#include "tokenizer/cache_dir.h"
#include "tokenizer/tokenizer.h"

namespace {

using deepinfer::tokenizer::Tokenizer;

[[noreturn]] void fail(const std::string& type, const std::string& message) {
  deepinfer::JsonObject inner;
  inner["type"] = type;
  inner["message"] = message;
  deepinfer::JsonObject outer;
  outer["error"] = std::move(inner);
  std::cout << deepinfer::to_json(outer) << '\n';
  throw deepinfer::cli::CliExit{1};
}

std::unique_ptr<Tokenizer> load(const std::string& dir) {
  const std::string path = dir.empty() ? deepinfer::tokenizer::deepseek_tokenizer_dir(true) : dir;
  auto tok = Tokenizer::from_path(path);
  if (!tok) fail("invalid_request_error", tok.error().message);
  return std::move(tok.value());
}

struct Options {
  std::string dir;
  bool plain = false;
  bool skip_special = false;
  int threads = 0;
};

void tokenize(const Options& opt) {
  auto tok = load(opt.dir);
  const std::string text = deepinfer::read_all(std::cin);
  auto ids = opt.plain ? tok->encode_plain(text, opt.threads) : tok->encode(text, opt.threads);
  if (!ids) fail("invalid_request_error", ids.error().message);
  std::string out = "{\"ids\":[";
  out.reserve(ids.value().size() * 7 + 16);
  for (size_t i = 0; i < ids.value().size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids.value()[i]);
  }
  out += "]}\n";
  std::cout << out;
}

void detokenize(const Options& opt) {
  auto tok = load(opt.dir);
  auto parsed = deepinfer::parse_json(deepinfer::read_all(std::cin));
  if (!parsed) fail("invalid_request_error", "stdin is not valid JSON: " + parsed.error().message);
  const auto* obj = parsed.value().if_object();
  const auto* ids = obj ? obj->if_contains("ids") : nullptr;
  if (ids == nullptr || !ids->is_array()) {
    fail("invalid_request_error", "stdin must be an object with an array field `ids`");
  }
  std::vector<deepinfer::tokenizer::TokenId> list;
  for (const auto& v : ids->as_array()) {
    if (!v.is_int64() || v.as_int64() < 0 || v.as_int64() > INT32_MAX) {
      fail("invalid_request_error",
           "`ids` must hold non-negative integers, got " + deepinfer::to_json(v));
    }
    list.push_back(static_cast<deepinfer::tokenizer::TokenId>(v.as_int64()));
  }
  auto text = tok->decode(list, opt.skip_special);
  if (!text) fail("invalid_request_error", text.error().message);
  deepinfer::JsonObject out;
  out["text"] = text.value();
  std::cout << deepinfer::to_json(out) << '\n';
}

void setup(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  auto* t = app.add_subcommand("tokenize", "Encode stdin text to token ids ({\"ids\":[...]})");
  t->add_option("--tokenizer", opt->dir,
                "Directory with tokenizer.json (default: the cached DeepSeek V4.1 tokenizer)");
  t->add_flag("--plain", opt->plain, "Do not recognize added/special tokens in the text");
  t->add_option("--threads", opt->threads, "Encoding threads for long texts (0: all cores)");
  t->callback([opt] { tokenize(*opt); });

  auto* d = app.add_subcommand("detokenize", "Decode {\"ids\":[...]} on stdin to {\"text\":...}");
  d->add_option("--tokenizer", opt->dir,
                "Directory with tokenizer.json (default: the cached DeepSeek V4.1 tokenizer)");
  d->add_flag("--skip-special", opt->skip_special, "Leave out special tokens");
  d->callback([opt] { detokenize(*opt); });
}

DEEPINFER_COMMAND(setup);

}  // namespace
