// Loading tokenizer.json (HF `tokenizers` format) into a Tokenizer: model BPE, the pre-tokenizer
// sequence, added tokens, byte-level decoder. Anything this implementation does not reproduce
// exactly is rejected with a message instead of being approximated.
#include <filesystem>
#include <string>

#include "common/io.h"
#include "common/json.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_workspace.h"

namespace deepinfer::tokenizer {
namespace {

namespace json = boost::json;

// The GPT-2 pre-tokenizer regex HF's ByteLevel step applies when use_regex is true.
constexpr std::string_view kByteLevelRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string kind_of(const json::value& v) {
  if (v.is_object()) {
    if (const auto* t = v.as_object().if_contains("type"); t && t->is_string()) {
      return std::string(t->as_string());
    }
  }
  return "?";
}

const json::value* field(const json::object& o, std::string_view key) { return o.if_contains(key); }

bool is_null_or_missing(const json::object& o, std::string_view key) {
  const json::value* v = field(o, key);
  return v == nullptr || v->is_null();
}

Result<bool> get_bool(const json::object& o, std::string_view key, bool fallback) {
  const json::value* v = field(o, key);
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_bool()) return Error{"\"" + std::string(key) + "\" must be a boolean"};
  return v->as_bool();
}

Result<TokenId> get_id(const json::value& v, std::string_view what) {
  int64_t id = -1;
  if (v.is_int64()) {
    id = v.as_int64();
  } else if (v.is_uint64() && v.as_uint64() < (1u << 24)) {
    id = static_cast<int64_t>(v.as_uint64());
  }
  // Ids index dense tables; 2^24 is far above any real vocabulary.
  if (id < 0 || id >= (1 << 24)) return Error{std::string(what) + ": id out of range"};
  return static_cast<TokenId>(id);
}

Status add_split(const json::object& o, std::vector<SplitRule>& rules) {
  SplitRule rule;
  const json::value* pattern = field(o, "pattern");
  if (pattern == nullptr || !pattern->is_object()) return Error{"Split: missing \"pattern\""};
  const json::object& p = pattern->as_object();
  if (const auto* r = p.if_contains("Regex"); r && r->is_string()) {
    rule.pattern = translate_oniguruma_pattern(std::string_view(r->as_string()));
  } else if (const auto* s = p.if_contains("String"); s && s->is_string()) {
    rule.pattern = std::string(s->as_string());
    rule.literal = true;
    if (rule.pattern.empty()) return Error{"Split: empty String pattern"};
  } else {
    return Error{"Split: \"pattern\" needs a \"Regex\" or \"String\""};
  }
  const json::value* behavior = field(o, "behavior");
  const std::string b = behavior && behavior->is_string() ? std::string(behavior->as_string()) : "";
  if (b == "Isolated") {
    rule.behavior = SplitBehavior::kIsolated;
  } else if (b == "Removed") {
    rule.behavior = SplitBehavior::kRemoved;
  } else if (b == "MergedWithPrevious") {
    rule.behavior = SplitBehavior::kMergedWithPrevious;
  } else if (b == "MergedWithNext") {
    rule.behavior = SplitBehavior::kMergedWithNext;
  } else if (b == "Contiguous") {
    rule.behavior = SplitBehavior::kContiguous;
  } else {
    return Error{"Split: unknown behavior \"" + b + "\""};
  }
  auto invert = get_bool(o, "invert", false);
  if (!invert) return invert.error();
  rule.invert = invert.value();
  rules.push_back(std::move(rule));
  return Status::Ok();
}

// Collects the Split rules; sets *byte_level when a ByteLevel step is present.
Status add_pre_tokenizer(const json::value& v, std::vector<SplitRule>& rules, bool* byte_level,
                         int depth) {
  if (depth > 8) return Error{"pre_tokenizer: nesting too deep"};
  const std::string type = kind_of(v);
  const json::object& o = v.as_object();
  if (type == "Sequence") {
    const json::value* list = field(o, "pretokenizers");
    if (list == nullptr || !list->is_array()) return Error{"pre_tokenizer Sequence: no list"};
    for (const json::value& item : list->as_array()) {
      if (!item.is_object()) return Error{"pre_tokenizer Sequence: item is not an object"};
      if (Status s = add_pre_tokenizer(item, rules, byte_level, depth + 1); !s) return s;
    }
    return Status::Ok();
  }
  if (type == "Split") return add_split(o, rules);
  if (type == "ByteLevel") {
    if (*byte_level) return Error{"pre_tokenizer: more than one ByteLevel step"};
    auto prefix = get_bool(o, "add_prefix_space", false);
    if (!prefix) return prefix.error();
    if (prefix.value()) return Error{"pre_tokenizer ByteLevel: add_prefix_space is not supported"};
    auto use_regex = get_bool(o, "use_regex", true);
    if (!use_regex) return use_regex.error();
    if (use_regex.value()) {
      rules.push_back(
          {translate_oniguruma_pattern(kByteLevelRegex), false, SplitBehavior::kIsolated, false});
    }
    *byte_level = true;
    return Status::Ok();
  }
  return Error{"pre_tokenizer type \"" + type + "\" is not supported"};
}

Status check_normalizer(const json::value* v) {
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (kind_of(*v) == "Sequence") {
    const json::value* list = v->as_object().if_contains("normalizers");
    if (list != nullptr && list->is_array() && list->as_array().empty()) return Status::Ok();
  }
  return Error{"normalizer \"" + kind_of(*v) +
               "\" is not supported (only none or an empty "
               "Sequence)"};
}

Status check_decoder(const json::value* v) {
  if (v != nullptr && kind_of(*v) == "ByteLevel") return Status::Ok();
  return Error{"decoder must be ByteLevel (got \"" +
               (v == nullptr ? std::string("none") : kind_of(*v)) + "\")"};
}

Result<BpeModel::Config> read_model(const json::value* v) {
  if (v == nullptr || !v->is_object()) return Error{"missing \"model\""};
  const json::object& m = v->as_object();
  if (kind_of(*v) != "BPE") return Error{"model type \"" + kind_of(*v) + "\" is not supported"};
  BpeModel::Config cfg;
  if (const json::value* d = field(m, "dropout"); d && !d->is_null()) {
    if (!d->is_number() || d->to_number<double>() != 0.0) {
      return Error{"model: BPE dropout is not supported"};
    }
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json::value* s = field(m, key); s && !s->is_null()) {
      if (!s->is_string() || !s->as_string().empty()) {
        return Error{std::string("model: ") + key + " is not supported"};
      }
    }
  }
  auto byte_fallback = get_bool(m, "byte_fallback", false);
  if (!byte_fallback) return byte_fallback.error();
  if (byte_fallback.value()) return Error{"model: byte_fallback is not supported"};
  auto ignore = get_bool(m, "ignore_merges", false);
  if (!ignore) return ignore.error();
  cfg.ignore_merges = ignore.value();

  const json::value* vocab = field(m, "vocab");
  if (vocab == nullptr || !vocab->is_object()) return Error{"model: \"vocab\" must be an object"};
  cfg.vocab.reserve(vocab->as_object().size());
  for (const auto& kv : vocab->as_object()) {
    auto id = get_id(kv.value(), "model vocab");
    if (!id) return id.error();
    cfg.vocab.emplace_back(std::string(kv.key()), id.value());
  }
  if (!is_null_or_missing(m, "unk_token")) {
    const json::value* unk = field(m, "unk_token");
    if (!unk->is_string()) return Error{"model: unk_token must be a string"};
    for (const auto& [text, id] : cfg.vocab) {
      if (text == std::string_view(unk->as_string())) cfg.unk_id = id;
    }
  }
  const json::value* merges = field(m, "merges");
  if (merges == nullptr || !merges->is_array()) return Error{"model: \"merges\" must be a list"};
  cfg.merges.reserve(merges->as_array().size());
  for (const json::value& item : merges->as_array()) {
    if (item.is_string()) {
      const std::string_view s = item.as_string();
      const size_t space = s.find(' ');
      if (space == std::string_view::npos || space == 0 || space + 1 >= s.size() ||
          s.find(' ', space + 1) != std::string_view::npos) {
        return Error{"model: malformed merge \"" + std::string(s) + "\""};
      }
      cfg.merges.emplace_back(std::string(s.substr(0, space)), std::string(s.substr(space + 1)));
    } else if (item.is_array() && item.as_array().size() == 2 && item.as_array()[0].is_string() &&
               item.as_array()[1].is_string()) {
      cfg.merges.emplace_back(std::string(item.as_array()[0].as_string()),
                              std::string(item.as_array()[1].as_string()));
    } else {
      return Error{"model: a merge must be \"a b\" or [\"a\", \"b\"]"};
    }
  }
  return cfg;
}

Status read_added_tokens(const json::value* v, AddedVocabulary& added) {
  if (v == nullptr || v->is_null()) return Status::Ok();
  if (!v->is_array()) return Error{"\"added_tokens\" must be a list"};
  for (const json::value& item : v->as_array()) {
    if (!item.is_object()) return Error{"added_tokens: item is not an object"};
    const json::object& o = item.as_object();
    const json::value* id = field(o, "id");
    const json::value* content = field(o, "content");
    if (id == nullptr || content == nullptr || !content->is_string()) {
      return Error{"added_tokens: item needs \"id\" and \"content\""};
    }
    auto tid = get_id(*id, "added_tokens");
    if (!tid) return tid.error();
    AddedToken t;
    t.id = tid.value();
    t.content = std::string(content->as_string());
    if (t.content.empty()) return Error{"added_tokens: empty content"};
    for (const char* key : {"lstrip", "rstrip", "single_word"}) {
      auto b = get_bool(o, key, false);
      if (!b) return b.error();
      if (b.value()) {
        return Error{"added token \"" + t.content + "\": " + key + " is not supported"};
      }
    }
    auto special = get_bool(o, "special", false);
    auto normalized = get_bool(o, "normalized", false);
    if (!special) return special.error();
    if (!normalized) return normalized.error();
    t.special = special.value();
    t.normalized = normalized.value();
    added.add(std::move(t));
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_json(std::string_view text) {
  auto parsed = parse_json(text);
  if (!parsed) return Error{"tokenizer.json: " + parsed.error().message};
  if (!parsed.value().is_object()) return Error{"tokenizer.json: not a JSON object"};
  const json::object& root = parsed.value().as_object();
  auto fail = [](const Error& e) { return Error{"tokenizer.json: " + e.message}; };

  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  if (Status s = check_normalizer(field(root, "normalizer")); !s) return fail(s.error());
  if (Status s = check_decoder(field(root, "decoder")); !s) return fail(s.error());
  std::vector<SplitRule> rules;
  bool byte_level = false;
  const json::value* pre = field(root, "pre_tokenizer");
  if (pre != nullptr && !pre->is_null()) {
    if (!pre->is_object()) return fail(Error{"pre_tokenizer must be an object"});
    if (Status s = add_pre_tokenizer(*pre, rules, &byte_level, 0); !s) return fail(s.error());
  }
  if (!byte_level) return fail(Error{"pre_tokenizer has no ByteLevel step (not byte-level BPE)"});
  auto pre_tok = PreTokenizer::create(std::move(rules));
  if (!pre_tok) return fail(pre_tok.error());
  tok->pre_ = std::move(pre_tok.value());

  auto cfg = read_model(field(root, "model"));
  if (!cfg) return fail(cfg.error());
  auto bpe = BpeModel::create(std::move(cfg.value()));
  if (!bpe) return fail(bpe.error());
  tok->bpe_ = std::move(bpe.value());
  if (Status s = read_added_tokens(field(root, "added_tokens"), tok->added_); !s) {
    return fail(s.error());
  }

  size_t size = tok->bpe_->size();
  for (const AddedToken& t : tok->added_.tokens()) size = std::max(size, size_t(t.id) + 1);
  tok->vocab_size_ = size;
  tok->offsets_.assign(size + 1, 0);
  tok->flags_.assign(size, 0);
  for (size_t id = 0; id < size; ++id) {
    tok->offsets_[id] = static_cast<uint32_t>(tok->bytes_.size());
    const auto tid = static_cast<TokenId>(id);
    if (const AddedToken* t = tok->added_.find_id(tid)) {
      tok->bytes_ += byte_level_decode_token(t->content);
      tok->flags_[id] = 1 | (t->special ? 2 : 0) | 4;
    } else if (const std::string& s = tok->bpe_->id_to_text(tid); !s.empty()) {
      tok->bytes_ += byte_level_decode_token(s);
      tok->flags_[id] = 4;
    }
  }
  tok->offsets_[size] = static_cast<uint32_t>(tok->bytes_.size());
  return tok;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_path(const std::string& path) {
  std::error_code ec;
  const std::string file =
      std::filesystem::is_directory(path, ec) ? path + "/tokenizer.json" : path;
  auto text = read_file(file);
  if (!text) return Error{"cannot read " + file};
  return from_json(text.value());
}

}  // namespace deepinfer::tokenizer
