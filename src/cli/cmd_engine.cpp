// `deepinfer generate --batch`: JSONL requests → engine::generate_batch → JSONL results.
#include "cli/cmd_engine.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/command.h"
#include "cli/engine_device.h"
#include "common/byte_size.h"
#include "common/io.h"
#include "common/json.h"
#include "common/progress.h"
#include "engine/batch.h"
#include "engine/v41_engine_model.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

using engine::EngineRequest;
using engine::SamplingParams;

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "deepinfer: " << message << "\n";
  throw CliExit{1};
}

// A number field, or the fallback when absent or null; an error names the field.
Result<double> number(const JsonObject& o, const char* key, double fallback) {
  const auto it = o.find(key);
  if (it == o.end() || it->value().is_null()) return fallback;
  const Json& v = it->value();
  if (v.is_int64()) return static_cast<double>(v.as_int64());
  if (v.is_uint64()) return static_cast<double>(v.as_uint64());
  if (v.is_double()) return v.as_double();
  return Error{std::string("\"") + key + "\" must be a number"};
}

Result<std::vector<int32_t>> id_list(const Json& v, const char* key) {
  if (!v.is_array()) return Error{std::string("\"") + key + "\" must be an array of token ids"};
  std::vector<int32_t> out;
  for (const Json& x : v.as_array()) {
    if (!x.is_int64() || x.as_int64() < 0 || x.as_int64() > INT32_MAX)
      return Error{std::string("\"") + key + "\" must hold non-negative integers"};
    out.push_back(static_cast<int32_t>(x.as_int64()));
  }
  return out;
}

struct Line {
  EngineRequest request;
  std::string error;  // the line cannot run
};

Status read_params(const JsonObject& o, SamplingParams& p) {
  struct Field {
    const char* key;
    double fallback;
    double* out;
  };
  double max_tokens, temperature, top_p, top_k, min_p, presence, frequency, repetition, top_lp;
  const Field fields[] = {
      {"max_tokens", 16, &max_tokens},
      {"temperature", 0, &temperature},
      {"top_p", 1, &top_p},
      {"top_k", 0, &top_k},
      {"min_p", 0, &min_p},
      {"presence_penalty", 0, &presence},
      {"frequency_penalty", 0, &frequency},
      {"repetition_penalty", 1, &repetition},
      {"top_logprobs", 0, &top_lp},
  };
  for (const Field& f : fields) {
    auto v = number(o, f.key, f.fallback);
    if (!v.ok()) return v.error();
    *f.out = v.value();
  }
  if (max_tokens < 1 || max_tokens > 1e7) return Error{"\"max_tokens\" must be in [1, 10^7]"};
  if (top_k < -1 || top_k > 1e9) return Error{"\"top_k\" must be -1, 0 or a positive count"};
  p.max_tokens = static_cast<int32_t>(max_tokens);
  p.temperature = static_cast<float>(temperature);
  p.top_p = static_cast<float>(top_p);
  p.top_k = static_cast<int32_t>(top_k);
  p.min_p = static_cast<float>(min_p);
  p.presence_penalty = static_cast<float>(presence);
  p.frequency_penalty = static_cast<float>(frequency);
  p.repetition_penalty = static_cast<float>(repetition);
  p.top_logprobs = static_cast<int32_t>(top_lp);
  if (auto it = o.find("seed"); it != o.end() && !it->value().is_null()) {
    if (it->value().is_int64())
      p.seed = static_cast<uint64_t>(it->value().as_int64());
    else if (it->value().is_uint64())
      p.seed = it->value().as_uint64();
    else
      return Error{"\"seed\" must be an integer"};
  } else {
    p.seed = 0;  // as the single-request generate: reproducible by default
  }
  for (const char* key : {"ignore_eos", "logprobs"}) {
    const auto it = o.find(key);
    if (it == o.end() || it->value().is_null()) continue;
    if (!it->value().is_bool()) return Error{std::string("\"") + key + "\" must be a boolean"};
    (std::string(key) == "logprobs" ? p.logprobs : p.ignore_eos) = it->value().as_bool();
  }
  if (auto it = o.find("stop_token_ids"); it != o.end() && !it->value().is_null()) {
    auto ids = id_list(it->value(), "stop_token_ids");
    if (!ids.ok()) return ids.error();
    p.stop_token_ids = std::move(ids.value());
  }
  if (auto it = o.find("logit_bias"); it != o.end() && !it->value().is_null()) {
    if (!it->value().is_object()) return Error{"\"logit_bias\" must map token ids to numbers"};
    for (const auto& kv : it->value().as_object()) {
      int32_t id = -1;
      try {
        id = std::stoi(std::string(kv.key()));
      } catch (const std::exception&) {
        return Error{"\"logit_bias\" key '" + std::string(kv.key()) + "' is not a token id"};
      }
      if (!kv.value().is_number()) return Error{"\"logit_bias\" values must be numbers"};
      p.logit_bias.emplace_back(id, static_cast<float>(kv.value().to_number<double>()));
    }
  }
  return Status::Ok();
}

// tokenizer_config.json's add_bos_token (a text prompt then starts with BOS, as HF encodes it).
bool adds_bos(const std::string& dir) {
  auto text = read_file(dir + "/tokenizer_config.json");
  if (!text.ok()) return false;
  auto json = parse_json(text.value());
  if (!json.ok() || !json.value().is_object()) return false;
  const auto it = json.value().as_object().find("add_bos_token");
  return it != json.value().as_object().end() && it->value().is_bool() && it->value().as_bool();
}

Line parse_line(std::string_view text, const tokenizer::Tokenizer* tok, int32_t bos) {
  Line line;
  auto json = parse_json(text);
  if (!json.ok()) return {{}, json.error().message};
  if (!json.value().is_object()) return {{}, "each line must hold one JSON object"};
  const JsonObject& o = json.value().as_object();
  if (auto it = o.find("ids"); it != o.end()) {
    auto ids = id_list(it->value(), "ids");
    if (!ids.ok()) return {{}, ids.error().message};
    line.request.prompt = std::move(ids.value());
  } else if (auto p = o.find("prompt"); p != o.end()) {
    if (!p->value().is_string()) return {{}, "\"prompt\" must be a string"};
    if (!tok) return {{}, "\"prompt\" needs tokenizer.json in the model folder"};
    auto enc = tok->encode(std::string_view(p->value().as_string()));
    if (!enc.ok()) return {{}, "prompt: " + enc.error().message};
    if (bos >= 0) line.request.prompt.push_back(bos);
    line.request.prompt.insert(line.request.prompt.end(), enc.value().begin(), enc.value().end());
  } else {
    return {{}, "a request needs \"ids\" or \"prompt\""};
  }
  if (Status s = read_params(o, line.request.params); !s.ok()) return {{}, s.error().message};
  return line;
}

std::string error_line(const std::string& message) {
  JsonObject err;
  err["type"] = "invalid_request_error";
  err["message"] = message;
  JsonObject o;
  o["error"] = std::move(err);
  return to_json(o);
}

}  // namespace

void add_batch_options(CLI::App& generate, BatchFlags& f) {
  generate.add_option("--batch", f.batch_file,
                      "JSONL file, one request per line (same fields as stdin); results in order");
  generate.add_option("--kv-cache-memory", f.kv_cache_memory,
                      "KV cache budget for --batch (e.g. 512M, 4G); default: --kv-blocks");
  generate.add_option("--kv-blocks", f.kv_blocks, "KV blocks for --batch")->capture_default_str();
  generate.add_option("--block-size", f.block_size, "Tokens per KV block")->capture_default_str();
  generate.add_option("--max-num-seqs", f.max_num_seqs, "Requests running at once")
      ->capture_default_str();
  generate.add_option("--max-batched-tokens", f.max_batched_tokens, "Token budget per step")
      ->capture_default_str();
  generate.add_option("--max-model-len", f.max_model_len, "Prompt + output tokens at most")
      ->capture_default_str();
  generate.add_flag("--no-prefix-cache", f.no_prefix_cache, "Disable prefix caching");
}

void run_generate_batch(const std::string& model_dir, int threads, const BatchFlags& f,
                        const std::string& device) {
  auto cuda = engine_uses_cuda(device, "deepinfer");
  if (!cuda.ok()) fail(cuda.error().message);
  std::string text;
  if (f.batch_file == "-") {
    text = read_all(std::cin);
  } else {
    auto file = read_file(f.batch_file);
    if (!file.ok()) fail("--batch: " + file.error().message);
    text = std::move(file.value());
  }
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::error_code ec;
  if (std::filesystem::exists(model_dir + "/tokenizer.json", ec)) {
    auto t = tokenizer::Tokenizer::from_path(model_dir + "/tokenizer.json");
    if (!t.ok()) fail("tokenizer.json: " + t.error().message);
    tok = std::move(t.value());
  }
  // V4 or V4.1 from config.json; either runs through the engine.
  auto loaded = engine::load_engine_model(model_dir, threads, false);
  if (!loaded.ok()) fail(loaded.error().message);
  engine::EngineModel& model = loaded.value();
  for (const std::string& note : model.notes) std::cerr << "deepinfer: note: " << note << "\n";
  const int32_t bos = adds_bos(model_dir) ? model.bos_token_id : -1;
  std::vector<Line> lines;
  std::istringstream in(text);
  for (std::string row; std::getline(in, row);) {
    if (row.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines
    lines.push_back(parse_line(row, tok.get(), bos));
  }
  engine::EngineConfig config;
  config.kv.block_size = f.block_size;
  config.kv.num_blocks = f.kv_blocks;
  config.kv.prefix_caching = !f.no_prefix_cache;
  if (!f.kv_cache_memory.empty()) {
    auto bytes = parse_byte_size(f.kv_cache_memory, "--kv-cache-memory");
    if (!bytes.ok()) fail(bytes.error().message);
    config.kv_cache_memory = bytes.value();
  }
  config.scheduler.max_num_seqs = f.max_num_seqs;
  config.scheduler.max_num_batched_tokens = f.max_batched_tokens;
  config.scheduler.max_model_len = f.max_model_len;
  for (int id : model.eos_token_ids) config.scheduler.eos_token_ids.push_back(id);
  if (f.block_size < 1 || f.max_num_seqs < 1 || f.max_batched_tokens < f.block_size)
    fail("--block-size, --max-num-seqs must be >= 1 and --max-batched-tokens >= --block-size");
  if (cuda.value()) {  // fixed device slots: as long as the longest request needs
    int64_t longest = 2;
    for (const Line& l : lines)
      if (l.error.empty())
        longest = std::max<int64_t>(
            longest, static_cast<int64_t>(l.request.prompt.size()) + l.request.params.max_tokens);
    config.scheduler.max_model_len =
        static_cast<int32_t>(std::min<int64_t>(config.scheduler.max_model_len, longest));
  }
  std::string note;
  std::unique_ptr<engine::ModelRunner> runner = std::move(model.runner);  // V4.1 on the CPU
  if (model.is_v41()) {
    if (cuda.value()) {
      auto r = make_cuda_v41_runner(*model.v41, config.kv_cache_memory, config, note);
      if (!r.ok()) fail(r.error().message);
      runner = std::move(r.value());
    }
  } else {
    auto r = make_engine_runner(*model.v4, cuda.value(), config.kv_cache_memory, config, note);
    if (!r.ok()) fail(r.error().message);
    runner = std::move(r.value());
  }
  if (!note.empty()) std::cerr << "deepinfer: " << note << "\n";
  auto eng = engine::Engine::create(config, *runner);
  if (!eng.ok()) fail(eng.error().message);

  std::vector<EngineRequest> requests;
  std::vector<size_t> line_of;  // request index → line index
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!lines[i].error.empty()) continue;
    requests.push_back(std::move(lines[i].request));
    line_of.push_back(i);
  }
  ProgressBar progress("generate", requests.size(), "requests");
  auto results = engine::generate_batch(*eng.value(), std::move(requests),
                                        [&](size_t, size_t) { progress.advance(); });
  progress.finish();
  std::vector<std::string> out(lines.size());
  for (size_t i = 0; i < lines.size(); ++i)
    if (!lines[i].error.empty())
      out[i] = error_line("line " + std::to_string(i + 1) + ": " + lines[i].error);
  for (size_t k = 0; k < results.size(); ++k) {
    const engine::BatchResult& r = results[k];
    const size_t i = line_of[k];
    if (r.finish == engine::FinishReason::kError) {
      out[i] = error_line("line " + std::to_string(i + 1) + ": " + r.error);
      continue;
    }
    JsonObject o;
    JsonArray ids;
    for (int32_t t : r.ids) ids.push_back(t);
    o["ids"] = std::move(ids);
    if (tok) {
      auto decoded = tok->decode(r.ids);
      o["text"] = decoded.ok() ? Json(decoded.value()) : Json(nullptr);
    } else {
      o["text"] = nullptr;
    }
    o["finish_reason"] = engine::finish_reason_name(r.finish);
    if (!r.logprobs.empty()) {
      JsonArray lps;
      for (const engine::SampleResult& s : r.logprobs) {
        JsonObject e;
        e["id"] = s.token;
        e["logprob"] = s.logprob;
        JsonArray top;
        for (int32_t t = 0; t < s.num_top; ++t) {
          JsonObject c;
          c["id"] = s.top[t].token;
          c["logprob"] = s.top[t].logprob;
          top.push_back(std::move(c));
        }
        e["top_logprobs"] = std::move(top);
        lps.push_back(std::move(e));
      }
      o["logprobs"] = std::move(lps);
    }
    JsonObject usage;
    usage["prompt_tokens"] = r.usage.prompt_tokens;
    usage["completion_tokens"] = r.usage.completion_tokens;
    usage["prompt_cache_hit_tokens"] = r.usage.prompt_cache_hit_tokens;
    o["usage"] = std::move(usage);
    out[i] = to_json(o);
  }
  for (const std::string& row : out) std::cout << row << "\n";
  std::cout.flush();
}

}  // namespace deepinfer::cli
