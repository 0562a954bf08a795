#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace deepinfer::model {

RopeTable make_rope_table(const RopeConfig& rope, int rope_dim) {
  RopeTable t;
  t.attention_factor = static_cast<float>(rope.attention_factor);
  const int half = rope_dim / 2;
  t.inv_freq.resize(static_cast<size_t>(half));
  const float base = static_cast<float>(rope.theta);
  std::vector<float> pos_freq(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    pos_freq[static_cast<size_t>(i)] =
        std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rope_dim));
  }
  if (!rope.yarn) {
    for (int i = 0; i < half; ++i)
      t.inv_freq[static_cast<size_t>(i)] = 1.0f / pos_freq[static_cast<size_t>(i)];
    return t;
  }
  const double dim = rope_dim;
  auto correction_dim = [&](double rotations) {
    return dim * std::log(rope.original_max_position / (rotations * 2.0 * M_PI)) /
           (2.0 * std::log(rope.theta));
  };
  double low = correction_dim(rope.beta_fast);
  double high = correction_dim(rope.beta_slow);
  if (rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;
  const float factor = static_cast<float>(rope.factor);
  for (int i = 0; i < half; ++i) {
    const float num = static_cast<float>(i) - static_cast<float>(low);
    const float ramp = std::clamp(num / static_cast<float>(high - low), 0.0f, 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    const float pf = pos_freq[static_cast<size_t>(i)];
    const float extrapolation = 1.0f / pf;
    const float interpolation = 1.0f / (factor * pf);
    t.inv_freq[static_cast<size_t>(i)] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return t;
}

void rope_cos_sin(const RopeTable& table, int64_t position, int n_pairs, float* cos, float* sin) {
  const float p = static_cast<float>(position);
  for (int i = 0; i < n_pairs; ++i) {
    const float phi = table.inv_freq[static_cast<size_t>(i)] * p;
    cos[i] = std::cos(phi) * table.attention_factor;
    sin[i] = std::sin(phi) * table.attention_factor;
  }
}

void rope_rotate(float* x, int n_pairs, const float* cos, const float* sin, bool inverse) {
  for (int i = 0; i < n_pairs; ++i) {
    const float a = x[2 * i], b = x[2 * i + 1];
    const float s = inverse ? -sin[i] : sin[i];
    x[2 * i] = a * cos[i] - b * s;
    x[2 * i + 1] = b * cos[i] + a * s;
  }
}

}  // namespace deepinfer::model
