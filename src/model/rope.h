// Interleaved partial RoPE of DeepSeek V4: pairs (x[2i], x[2i+1]) of the trailing R dims rotate
// by p·f_i. Two frequency tables: main (sliding layers, plain) and compress (CSA/HCA, YaRN),
// computed in fp32 the way HF transformers does (_compute_yarn_parameters, attention factor 1).
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace deepinfer::model {

struct RopeTable {
  std::vector<float> inv_freq;    // [R/2]
  float attention_factor = 1.0f;  // scales cos and sin (1 for V4)
};

RopeTable make_rope_table(const RopeConfig& rope, int rope_dim);

// cos/sin of p·f_i for i < n_pairs.
void rope_cos_sin(const RopeTable& table, int64_t position, int n_pairs, float* cos, float* sin);

// Rotates x[0 .. 2·n_pairs) in place (x points at the RoPE slice); inverse uses −φ.
void rope_rotate(float* x, int n_pairs, const float* cos, const float* sin, bool inverse);

}  // namespace deepinfer::model
