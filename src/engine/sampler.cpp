// Sampler implementation; see sampler.h for the order of operations.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "engine/philox.h"

namespace deepinfer::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Top-p first sorts only this many best candidates, and more only when they carry < top_p.
constexpr size_t kTopPHead = 1024;

// The largest value, NaNs skipped (as std::max(max, x) from -inf skips them): eight running
// maxima the compiler keeps in registers instead of one serial chain; max is exact, so the
// order does not change the value (a ±0 tie only picks the zero's sign, and x - (±0) and
// exp(±0) do not depend on it).
float row_max(const float* r, size_t n) {
  float m0 = kNegInf, m1 = kNegInf, m2 = kNegInf, m3 = kNegInf, m4 = kNegInf, m5 = kNegInf,
        m6 = kNegInf, m7 = kNegInf;
  const size_t whole = n - n % 8;
  for (size_t i = 0; i < whole; i += 8) {
    m0 = std::max(m0, r[i]);
    m1 = std::max(m1, r[i + 1]);
    m2 = std::max(m2, r[i + 2]);
    m3 = std::max(m3, r[i + 3]);
    m4 = std::max(m4, r[i + 4]);
    m5 = std::max(m5, r[i + 5]);
    m6 = std::max(m6, r[i + 6]);
    m7 = std::max(m7, r[i + 7]);
  }
  for (size_t i = whole; i < n; ++i) m0 = std::max(m0, r[i]);
  return std::max(std::max(std::max(m0, m1), std::max(m2, m3)),
                  std::max(std::max(m4, m5), std::max(m6, m7)));
}

Error field_error(const char* field, const std::string& what) {
  return Error{std::string("sampling parameter '") + field + "' " + what};
}

}  // namespace

Status validate(const SamplingParams& p, int32_t vocab_size) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    return field_error("temperature", "must be a finite number >= 0");
  if (p.top_k < -1) return field_error("top_k", "must be -1, 0 (off) or a positive count");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return field_error("top_p", "must be in (0, 1]");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return field_error("min_p", "must be in [0, 1]");
  if (!(p.repetition_penalty > 0.0f) || !std::isfinite(p.repetition_penalty))
    return field_error("repetition_penalty", "must be a finite number > 0");
  if (!std::isfinite(p.presence_penalty) || std::fabs(p.presence_penalty) > 2.0f)
    return field_error("presence_penalty", "must be in [-2, 2]");
  if (!std::isfinite(p.frequency_penalty) || std::fabs(p.frequency_penalty) > 2.0f)
    return field_error("frequency_penalty", "must be in [-2, 2]");
  if (p.max_tokens < 1) return field_error("max_tokens", "must be >= 1");
  if (p.top_logprobs < 0 || p.top_logprobs > kMaxTopLogprobs)
    return field_error("top_logprobs", "must be in [0, 20]");
  if (p.top_logprobs > 0 && !p.logprobs)
    return field_error("top_logprobs", "needs logprobs to be true");
  for (const auto& [token, bias] : p.logit_bias) {
    if (token < 0 || token >= vocab_size)
      return field_error("logit_bias", "names token " + std::to_string(token) +
                                           " outside the vocabulary of " +
                                           std::to_string(vocab_size));
    if (!std::isfinite(bias) || std::fabs(bias) > 100.0f)
      return field_error("logit_bias", "values must be in [-100, 100]");
  }
  for (int32_t token : p.stop_token_ids)
    if (token < 0 || token >= vocab_size)
      return field_error("stop_token_ids",
                         "names token " + std::to_string(token) + " outside the vocabulary");
  return Status::Ok();
}

bool device_samplable(const SamplingParams& p, int32_t max_top_k) {
  if (p.logprobs || !p.logit_bias.empty() || p.repetition_penalty != 1.0f ||
      p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f || p.structured)
    return false;
  if (p.temperature < kGreedyEpsilon) return true;
  if (p.top_k > max_top_k) return false;
  return p.top_p >= 1.0f || p.top_k > 0;
}

Sampler::Sampler(int32_t vocab_size)
    : vocab_size_(vocab_size),
      work_(vocab_size),
      candidates_(vocab_size),
      probs_(vocab_size),
      cumulative_(vocab_size),
      count_stamp_(vocab_size, 0),
      rep_stamp_(vocab_size, 0),
      counts_(vocab_size, 0) {}

void Sampler::apply_bias_and_penalties(const SampleContext& ctx) {
  const SamplingParams& p = ctx.params;
  for (const auto& [token, bias] : p.logit_bias) work_[token] += bias;
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool counted = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!repetition && !counted) return;
  if (++epoch_ == 0) {  // stamps wrapped: clear once every 2^32 tokens
    std::fill(count_stamp_.begin(), count_stamp_.end(), 0);
    std::fill(rep_stamp_.begin(), rep_stamp_.end(), 0);
    epoch_ = 1;
  }
  auto penalize_repeat = [&](int32_t token) {
    if (rep_stamp_[token] == epoch_) return;
    rep_stamp_[token] = epoch_;
    float& l = work_[token];
    l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
  };
  if (repetition) {
    for (int32_t t : ctx.prompt) penalize_repeat(t);
    for (int32_t t : ctx.output) penalize_repeat(t);
  }
  if (counted) {
    for (int32_t t : ctx.output) {
      if (count_stamp_[t] != epoch_) {
        count_stamp_[t] = epoch_;
        counts_[t] = 0;
      }
      ++counts_[t];
    }
    for (int32_t t : ctx.output) {
      if (counts_[t] == 0) continue;  // already applied for this token
      work_[t] -= p.frequency_penalty * static_cast<float>(counts_[t]) + p.presence_penalty;
      counts_[t] = 0;
    }
  }
}

void Sampler::fill_logprobs(std::span<const float> logits, int32_t token, int32_t num_top,
                            SampleResult& out) const {
  float max = kNegInf;
  for (float l : logits) max = std::max(max, l);
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
  const double log_z = max + std::log(sum);
  out.logprob = static_cast<float>(logits[token] - log_z);
  // Keep the num_top best in a small sorted array (value desc, id asc): no allocation.
  int32_t n = 0;
  for (int32_t i = 0; i < vocab_size_ && num_top > 0; ++i) {
    const float l = logits[i];
    if (n == num_top && !(l > logits[out.top[n - 1].token])) continue;
    int32_t pos = n < num_top ? n++ : n - 1;
    while (pos > 0 && l > logits[out.top[pos - 1].token]) {
      out.top[pos] = out.top[pos - 1];
      --pos;
    }
    out.top[pos].token = i;
  }
  out.num_top = n;
  for (int32_t k = 0; k < n; ++k)
    out.top[k].logprob = static_cast<float>(logits[out.top[k].token] - log_z);
}

SampleResult Sampler::sample(std::span<const float> logits, const SampleContext& ctx) {
  const SamplingParams& p = ctx.params;
  SampleResult result;
  const bool greedy = p.temperature < kGreedyEpsilon;
  const float inv_t = greedy ? 1.0f : 1.0f / p.temperature;
  // The row is read in place unless something rewrites it (x * 1 == x: temperature 1 does not).
  const bool rewritten = !p.logit_bias.empty() || p.repetition_penalty != 1.0f ||
                         p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f ||
                         !ctx.allowed.empty() || inv_t != 1.0f;
  const float* w = logits.data();
  if (rewritten) {
    std::copy(logits.begin(), logits.end(), work_.begin());
    apply_bias_and_penalties(ctx);
    if (!ctx.allowed.empty()) {
      // Word at a time: all-allowed words are skipped, all-masked words filled.
      for (int32_t base = 0; base < vocab_size_; base += 64) {
        const uint64_t bits = ctx.allowed[static_cast<size_t>(base) >> 6];
        if (bits == ~uint64_t{0}) continue;
        const int32_t end = std::min(base + 64, vocab_size_);
        if (bits == 0) {
          std::fill(work_.begin() + base, work_.begin() + end, kNegInf);
          continue;
        }
        for (int32_t i = base; i < end; ++i)
          if (!((bits >> (i - base)) & 1u)) work_[i] = kNegInf;
      }
    }
    if (inv_t != 1.0f)
      for (int32_t i = 0; i < vocab_size_; ++i) work_[i] *= inv_t;
    w = work_.data();
  }

  if (greedy) {
    int32_t best = 0;
    for (int32_t i = 1; i < vocab_size_; ++i)
      if (w[i] > w[best]) best = i;
    result.token = best;
  } else {
    const float max = row_max(w, static_cast<size_t>(vocab_size_));
    // min_p: p_i / p_max = exp(l_i - l_max).
    const float min_logit =
        p.min_p > 0.0f ? max + std::log(p.min_p) : -std::numeric_limits<float>::max();
    // Without top-k / top-p the candidates keep id order: their exps are taken in the same
    // pass (the inverse-CDF terms below), with no second pass gathering them by id.
    const bool exps_in_order = !(p.top_k > 0) && !(p.top_p < 1.0f);
    size_t n = 0;
    if (exps_in_order) {
      for (int32_t i = 0; i < vocab_size_; ++i)
        if (w[i] >= min_logit) {
          candidates_[n] = i;
          probs_[n++] = std::exp(w[i] - max);
        }
    } else {
      for (int32_t i = 0; i < vocab_size_; ++i)
        if (w[i] >= min_logit) candidates_[n++] = i;
    }
    if (n == 0) {  // all -inf (fully biased away): fall back to id 0
      candidates_[n++] = 0;
      probs_[0] = std::exp(w[0] - max);
    }
    auto better = [w](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
    auto first = candidates_.begin();
    bool sorted = false;
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
      std::nth_element(first, first + p.top_k, first + n, better);
      n = static_cast<size_t>(p.top_k);
      std::sort(first, first + n, better);
      sorted = true;
    }
    if (p.top_p < 1.0f) {
      double total = 0.0;
      for (size_t k = 0; k < n; ++k) total += std::exp(w[candidates_[k]] - max);
      const double target = static_cast<double>(p.top_p) * total;
      // Sort only as far as needed: the best kTopPHead, then 4x more each time the sorted
      // head carries less than top_p of the mass.
      size_t sorted_end = sorted ? n : 0, keep = 0;
      double before = 0.0;
      for (size_t head = std::min(n, kTopPHead);; head = std::min(n, head * 4)) {
        if (sorted_end < head) {
          if (head < n) std::nth_element(first + sorted_end, first + head, first + n, better);
          std::sort(first + sorted_end, first + head, better);
          sorted_end = head;
        }
        while (keep < sorted_end && before < target)
          before += std::exp(w[candidates_[keep++]] - max);
        if (before >= target || sorted_end == n) break;
      }
      n = std::max<size_t>(keep, 1);
    }
    // Inverse CDF: each exp once (independent calls), then the running sums in candidate
    // order; the first running sum above the target (a binary search: the sums never decrease)
    // is the token a linear scan adding the same terms in the same order would stop at.
    if (!exps_in_order)
      for (size_t k = 0; k < n; ++k) probs_[k] = std::exp(w[candidates_[k]] - max);
    double total = 0.0;
    for (size_t k = 0; k < n; ++k) {
      total += probs_[k];
      cumulative_[k] = total;
    }
    const double target = philox_uniform(ctx.seed, ctx.output.size()) * total;
    const auto hit = std::upper_bound(cumulative_.begin(),
                                      cumulative_.begin() + static_cast<ptrdiff_t>(n), target);
    result.token = hit == cumulative_.begin() + static_cast<ptrdiff_t>(n)
                       ? candidates_[n - 1]
                       : candidates_[static_cast<size_t>(hit - cumulative_.begin())];
  }
  if (p.logprobs) fill_logprobs(logits, result.token, p.top_logprobs, result);
  return result;
}

}  // namespace deepinfer::engine
