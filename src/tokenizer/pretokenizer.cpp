// PCRE2-based pre-tokenizer (see pretokenizer.h).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <string>

namespace deepinfer::tokenizer {

struct PreTokenizer::Step {
  pcre2_code* code = nullptr;
  bool jit = false;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  ~Step() { pcre2_code_free(code); }
};

PreTokenizer::Workspace::~Workspace() {
  for (void* m : match) pcre2_match_data_free(static_cast<pcre2_match_data*>(m));
  pcre2_match_context_free(static_cast<pcre2_match_context*>(context));
  pcre2_jit_stack_free(static_cast<pcre2_jit_stack*>(jit_stack));
}

std::string translate_oniguruma_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 16);
  bool in_class = false;
  size_t class_start = 0;  // index in out where the current class began
  bool class_negated = false;
  bool class_has_space = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char n = p[i + 1];
      if (!in_class && n == 's') {
        out += "(?:(?!\\x{180e})\\s)";
      } else if (!in_class && n == 'S') {
        out += "(?:\\S|\\x{180e})";
      } else {
        if (in_class && n == 's') class_has_space = true;
        out += c;
        out += n;
      }
      ++i;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      class_start = out.size();
      class_negated = i + 1 < p.size() && p[i + 1] == '^';
      class_has_space = false;
      out += c;
      if (class_negated) {
        out += '^';
        ++i;
      }
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == ']') {
        out += ']';
        ++i;
      }
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      const size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') {
      out += c;
      in_class = false;
      if (class_has_space) {
        const std::string cls = out.substr(class_start);
        out.resize(class_start);
        out += class_negated ? "(?:\\x{180e}|" + cls + ")" : "(?:(?!\\x{180e})" + cls + ")";
      }
      continue;
    }
    out += c;
  }
  return out;
}

PreTokenizer::~PreTokenizer() {
  for (Step* s : steps_) delete s;
}

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::create(std::vector<SplitRule> rules) {
  std::unique_ptr<PreTokenizer> pt(new PreTokenizer());
  for (const SplitRule& r : rules) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    // PCRE2 allows only UTF (not UCP) together with LITERAL.
    const uint32_t options = r.literal ? (PCRE2_UTF | PCRE2_LITERAL) : (PCRE2_UTF | PCRE2_UCP);
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(r.pattern.data()),
                                     r.pattern.size(), options, &err, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return Error{"pre-tokenizer regex does not compile at offset " + std::to_string(offset) +
                   ": " + reinterpret_cast<const char*>(msg)};
    }
    auto* step = new Step();
    step->code = code;
    step->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    step->behavior = r.behavior;
    step->invert = r.invert;
    pt->steps_.push_back(step);
  }
  return pt;
}

std::unique_ptr<PreTokenizer::Workspace> PreTokenizer::make_workspace() const {
  std::unique_ptr<Workspace> ws(new Workspace());
  // Linear-time patterns (the DeepSeek and GPT-2 ones) may still backtrack across a whole
  // whitespace run: allow that for multi-megabyte inputs instead of giving up early.
  auto* ctx = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(ctx, 1u << 30);
  pcre2_set_depth_limit(ctx, 1u << 24);
  auto* stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
  if (stack != nullptr) pcre2_jit_stack_assign(ctx, nullptr, stack);
  ws->context = ctx;
  ws->jit_stack = stack;
  for (const Step* s : steps_) {
    ws->match.push_back(pcre2_match_data_create_from_pattern(s->code, nullptr));
    ws->segments.emplace_back();
  }
  return ws;
}

void PreTokenizer::emit_piece(size_t k, std::string_view text, uint32_t begin, uint32_t end,
                              Workspace& ws, Emit emit, void* ctx) const {
  if (begin >= end) return;
  if (k + 1 < steps_.size()) {
    run(k + 1, text, begin, end, ws, emit, ctx);
  } else {
    emit(ctx, begin, end);
  }
}

void PreTokenizer::run(size_t k, std::string_view text, uint32_t begin, uint32_t end, Workspace& ws,
                       Emit emit, void* ctx) const {
  if (steps_.empty()) {
    emit(ctx, begin, end);
    return;
  }
  const Step& step = *steps_[k];
  auto* md = static_cast<pcre2_match_data*>(ws.match[k]);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
  const PCRE2_SIZE length = end - begin;
  const bool streaming =
      step.behavior == SplitBehavior::kIsolated || step.behavior == SplitBehavior::kRemoved;
  auto& segs = ws.segments[k];
  if (!streaming) segs.clear();
  // Segments of this piece: the matches and the gaps between them (roles swapped by invert).
  auto segment = [&](uint32_t b, uint32_t e, bool is_match) {
    if (b >= e) return;
    if (step.invert) is_match = !is_match;
    if (streaming) {
      if (step.behavior == SplitBehavior::kRemoved && is_match) return;
      emit_piece(k, text, begin + b, begin + e, ws, emit, ctx);
    } else {
      segs.push_back({begin + b, begin + e, is_match});
    }
  };
  PCRE2_SIZE pos = 0;
  PCRE2_SIZE prev = 0;
  while (pos <= length) {
    const int rc =
        step.jit ? pcre2_jit_match(step.code, subject, length, pos, PCRE2_NO_UTF_CHECK, md, nullptr)
                 : pcre2_match(step.code, subject, length, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    PCRE2_SIZE ms = ov[0], me = ov[1];
    if (me <= ms) {
      // Empty match (as HF's onig iterator reports it): it ends the gap before it, makes no
      // piece itself, and the search continues one character later.
      segment(static_cast<uint32_t>(prev), static_cast<uint32_t>(ms), false);
      prev = ms;
      if (ms >= length) break;
      pos = ms + 1;
      while (pos < length && (subject[pos] & 0xC0) == 0x80) ++pos;
      continue;
    }
    segment(static_cast<uint32_t>(prev), static_cast<uint32_t>(ms), false);
    // The nested steps reuse their own match blocks, so this step's ovector stays valid only
    // until here; the values were copied.
    segment(static_cast<uint32_t>(ms), static_cast<uint32_t>(me), true);
    prev = pos = me;
  }
  segment(static_cast<uint32_t>(prev), static_cast<uint32_t>(length), false);
  if (streaming) return;

  // HF's merging behaviors over the collected segments. Nested steps use their own segment
  // vectors, so copying out of segs is unnecessary, but segs must not be resized while iterating.
  const size_t n = segs.size();
  switch (step.behavior) {
    case SplitBehavior::kMergedWithPrevious: {
      // A match (not following a match) is appended to the previous piece.
      uint32_t pb = 0, pe = 0;
      bool have = false, prev_match = false;
      for (size_t i = 0; i < n; ++i) {
        const auto s = segs[i];
        if (s.is_match && !prev_match && have) {
          pe = s.end;
        } else {
          if (have) emit_piece(k, text, pb, pe, ws, emit, ctx);
          pb = s.begin, pe = s.end, have = true;
        }
        prev_match = s.is_match;
      }
      if (have) emit_piece(k, text, pb, pe, ws, emit, ctx);
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      // A match followed by a non-match is prepended to it.
      for (size_t i = 0; i < n; ++i) {
        const auto s = segs[i];
        if (s.is_match && i + 1 < n && !segs[i + 1].is_match) {
          emit_piece(k, text, s.begin, segs[i + 1].end, ws, emit, ctx);
          ++i;
        } else {
          emit_piece(k, text, s.begin, s.end, ws, emit, ctx);
        }
      }
      break;
    }
    case SplitBehavior::kContiguous: {
      for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        if (segs[i].is_match) {
          while (j < n && segs[j].is_match) ++j;
        }
        emit_piece(k, text, segs[i].begin, segs[j - 1].end, ws, emit, ctx);
        i = j;
      }
      break;
    }
    default:
      break;
  }
}

std::vector<std::string> PreTokenizer::split_to_strings(std::string_view text) const {
  auto ws = make_workspace();
  std::vector<std::string> out;
  split(text, *ws, [&](uint32_t b, uint32_t e) { out.emplace_back(text.substr(b, e - b)); });
  return out;
}

}  // namespace deepinfer::tokenizer
