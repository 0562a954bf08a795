// Executor implementation.
#include "engine/executor.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "engine/philox.h"

namespace deepinfer::engine {

Executor::Executor(ModelRunner& runner, int32_t num_slots, int32_t num_threads,
                   int32_t max_model_len)
    : runner_(runner), max_reserve_(max_model_len + 1), slots_(num_slots), pool_(num_threads) {
  for (int32_t t = 0; t < pool_.num_threads(); ++t) samplers_.emplace_back(runner.vocab_size());
}

void Executor::execute(const SchedulerOutput& in, ModelOutput& out) {
  const auto t0 = std::chrono::steady_clock::now();
  out.clear();
  out.step = in.step;
  for (const RequestSlot& r : in.released) {
    Slot& s = slots_[r.slot];
    if (s.live && s.request_id == r.request_id) s.live = false;
  }
  for (const NewSequence& seq : in.new_sequences) {
    Slot& s = slots_[seq.slot];
    s.live = true;
    s.request_id = seq.request_id;
    s.fresh = true;
    s.params = seq.params;
    s.seed = seq.seed;
    s.num_prompt = seq.num_prompt;
    s.tokens.reserve(static_cast<size_t>(
        std::min<int64_t>(int64_t{seq.num_prompt} + seq.params.max_tokens + 1, max_reserve_)));
    s.tokens.assign(seq.tokens.begin(), seq.tokens.end());
    s.block_table.assign(seq.block_table.begin(), seq.block_table.end());
    s.constraint.reset();
    if (seq.params.structured) {
      const structured::StructuredOutput& so = *seq.params.structured;
      s.constraint = std::make_unique<structured::StructuredConstraint>(so.grammar, so.end_tokens,
                                                                        so.think_end);
      for (size_t i = static_cast<size_t>(seq.num_prompt); i < seq.tokens.size(); ++i)
        s.constraint->accept(seq.tokens[i]);
      const size_t ids = std::max<size_t>(static_cast<size_t>(runner_.vocab_size()),
                                          so.grammar->vocab().vocab_size());
      s.mask.assign(structured::mask_words(ids), 0);
    }
  }
  batch_.clear();
  sample_slots_.clear();
  device_samples_.resize(in.scheduled.size());
  const bool device = runner_.samples_on_device();
  for (const ScheduledSequence& e : in.scheduled) {
    Slot& s = slots_[e.slot];
    if (!s.live || s.request_id != e.request_id) {
      out.status = Error{"executor: step names request " + std::to_string(e.request_id) +
                         " that does not hold slot " + std::to_string(e.slot)};
      return;
    }
    s.block_table.insert(s.block_table.end(), in.new_block_ids.begin() + e.new_blocks_begin,
                         in.new_block_ids.begin() + e.new_blocks_begin + e.new_blocks_count);
    if (e.start + e.num_new > static_cast<int32_t>(s.tokens.size())) {
      out.status = Error{"executor: step runs past the known tokens"};
      return;
    }
    RunnerSequence seq;
    seq.slot = e.slot;
    seq.start = e.start;
    seq.tokens = std::span<const int32_t>(s.tokens).subspan(e.start, e.num_new);
    seq.context = s.tokens;
    seq.block_table = s.block_table;
    seq.fresh = s.fresh;
    seq.want_logits = e.sample;
    seq.num_prompt = s.num_prompt;
    if (e.sample && device && device_samplable(s.params, kDeviceSampleMaxTopK)) {
      DeviceSample& d = device_samples_[sample_slots_.size()];
      d.greedy = s.params.temperature < kGreedyEpsilon;
      d.temperature = s.params.temperature;
      d.top_k = s.params.top_k;
      d.top_p = s.params.top_p;
      d.min_p = s.params.min_p;
      d.uniform = d.greedy ? 0.0 : philox_uniform(s.seed, s.tokens.size() - s.num_prompt);
      seq.device_sample = &d;
    }
    s.fresh = false;
    batch_.push_back(seq);
    if (e.sample) sample_slots_.push_back(e.slot);
  }
  const int32_t vocab = runner_.vocab_size();
  logits_.resize(sample_slots_.size() * static_cast<size_t>(vocab));
  device_tokens_.assign(sample_slots_.size(), -1);
  out.status = device ? runner_.execute_sampling(batch_, logits_, device_tokens_)
                      : runner_.execute(batch_, logits_);
  if (out.status.ok()) {
    out.sampled.resize(sample_slots_.size());
    pool_.parallel_for(static_cast<int32_t>(sample_slots_.size()), [&](int32_t i, int32_t t) {
      Slot& s = slots_[sample_slots_[i]];
      out.sampled[i].request_id = s.request_id;
      if (device_tokens_[i] >= 0) {  // drawn by the runner (no logprobs, no grammar)
        out.sampled[i].result = SampleResult{};
        out.sampled[i].result.token = device_tokens_[i];
        return;
      }
      const std::span<const int32_t> all(s.tokens);
      SampleContext ctx{s.params, s.seed, all.first(s.num_prompt), all.subspan(s.num_prompt)};
      // Structured output: the grammar's mask (only the grammar's words are rewritten; the
      // tail beyond its vocabulary stays zero), then the automaton advances by the token.
      if (s.constraint &&
          s.constraint->fill_mask(std::span<uint64_t>(s.mask).first(
              structured::mask_words(s.params.structured->grammar->vocab().vocab_size()))))
        ctx.allowed = s.mask;
      out.sampled[i].result = samplers_[t].sample(
          std::span<const float>(logits_).subspan(static_cast<size_t>(i) * vocab, vocab), ctx);
      if (s.constraint) s.constraint->accept(out.sampled[i].result.token);
    });
    for (size_t i = 0; i < sample_slots_.size(); ++i)
      slots_[sample_slots_[i]].tokens.push_back(out.sampled[i].result.token);
  }
  out.execute_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace deepinfer::engine
