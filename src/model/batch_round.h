// The rounds of a batched forward step, shared by the V4 and V4.1 models: each round takes the next
// piece (at most max_chunk tokens) of every sequence that has tokens left and stacks them into one
// step, so every weight product of the round runs once for all of them; for_each_run splits those
// products so that every row keeps the bits it gets when its sequence runs alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace deepinfer::model {

// One sequence's chunk inside the step: rows [row0, row0 + n) at positions [pos0, pos0 + n).
template <class State>
struct BatchSegment {
  State* state = nullptr;
  int64_t row0 = 0, n = 0, pos0 = 0;
};

// One requested logits row: step row `row`, written to `out` (vocab floats).
struct LogitRow {
  int64_t row = 0;
  float* out = nullptr;
};

// Fills one round from `batch` (elements with state, ids, logit_rows, logits): the pieces starting
// at token `start` of each sequence, their row counts, the stacked ids and the logits rows asked
// for within them. Returns false when no sequence has tokens left at `start`.
template <class Sequence, class State>
bool collect_round(std::span<const Sequence> batch, int64_t start, int64_t max_chunk, int64_t vocab,
                   std::vector<BatchSegment<State>>& segs, std::vector<int64_t>& seg_rows,
                   std::vector<int32_t>& step_ids, std::vector<LogitRow>& logit_rows) {
  segs.clear();
  seg_rows.clear();
  step_ids.clear();
  logit_rows.clear();
  for (const Sequence& b : batch) {
    const auto total = static_cast<int64_t>(b.ids.size());
    if (start >= total) continue;
    const int64_t n = std::min(max_chunk, total - start);
    const auto row0 = static_cast<int64_t>(step_ids.size());
    segs.push_back({b.state, row0, n, b.state->position});
    seg_rows.push_back(n);
    step_ids.insert(step_ids.end(), b.ids.begin() + start, b.ids.begin() + start + n);
    for (size_t k = 0; k < b.logit_rows.size(); ++k) {
      const int64_t r = b.logit_rows[k];
      if (r >= start && r < start + n)
        logit_rows.push_back({row0 + r - start, b.logits + static_cast<int64_t>(k) * vocab});
    }
  }
  return !segs.empty();
}

// Rows per call below which cpu::linear runs its GEMV kernels, whose per-row reduction order does
// not depend on the row count (from 12 rows on it switches to an sgemm path; backend/cpu).
inline constexpr int64_t kGemvMaxRows = 11;

// Calls fn(row0, rows) over rows stacked by segment (seg_rows[i] rows each): a segment of more
// than kGemvMaxRows rows alone (the call its rows get when the sequence runs alone), the smaller
// ones packed into calls of at most kGemvMaxRows rows, so a row-wise product over the runs gives
// every row the bits it gets alone, whatever the rest of the batch.
template <class F>
void for_each_run(std::span<const int64_t> seg_rows, F&& fn) {
  int64_t run0 = 0, run = 0, row = 0;  // pending run of small segments: rows [run0, run0 + run)
  for (int64_t r : seg_rows) {
    if (r > kGemvMaxRows) {
      if (run > 0) fn(run0, run);
      run = 0;
      fn(row, r);
    } else if (r > 0) {
      if (run + r > kGemvMaxRows) {
        fn(run0, run);
        run = 0;
      }
      if (run == 0) run0 = row;
      run += r;
    }
    row += r;
  }
  if (run > 0) fn(run0, run);
}

}  // namespace deepinfer::model
