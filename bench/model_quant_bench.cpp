// FP8 / FP4 linear kernels at V4-Flash dims, with the rooflines measured in the same run:
// decode (1 row) is compared with a streaming-read bandwidth probe (bytes of weights per second),
// prefill (128 rows) with OpenBLAS sgemm GFLOP/s of the same shape.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/fp8.h"
#include "backend/cpu/quant_linear.h"
#include "backend/cpu/thread_pool.h"
#include "model/model.h"

namespace {

using deepinfer::cpu::ScaleFormat;
using deepinfer::cpu::ThreadPool;
using deepinfer::cpu::WeightFormat;
using deepinfer::cpu::WeightView;

struct QuantWeight {
  std::vector<uint8_t> data, scale;
  WeightView view;
};

QuantWeight make_weight(WeightFormat f, int64_t out, int64_t in) {
  QuantWeight w;
  std::mt19937 rng(1);
  const bool fp4 = f == WeightFormat::FP4_E2M1_BLOCK32;
  w.data.resize(static_cast<size_t>(fp4 ? out * in / 2 : out * in));
  for (auto& b : w.data) b = static_cast<uint8_t>(rng() & (fp4 ? 0xff : 0x77));  // no NaN codes
  const int64_t srows = fp4 ? out : (out + 127) / 128, scols = fp4 ? in / 32 : (in + 127) / 128;
  w.scale.assign(static_cast<size_t>(srows * scols), 120);
  WeightView& v = w.view;
  v.format = f;
  v.data = w.data.data();
  v.out = out;
  v.in = in;
  v.scale = w.scale.data();
  v.scale_format = ScaleFormat::UE8M0;
  v.block_out = fp4 ? 1 : 128;
  v.block_in = fp4 ? 32 : 128;
  v.scale_stride = scols;
  return w;
}

std::vector<float> random_x(int64_t n) {
  std::mt19937 rng(2);
  std::normal_distribution<float> d;
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = d(rng);
  return x;
}

ThreadPool& pool(int threads) {
  static ThreadPool p1(1), p2(2);
  return threads > 1 ? p2 : p1;
}

// Roofline probe: streaming read of 256 MiB (sum), per thread count.
void BM_ReadBandwidth(benchmark::State& state) {
  const int64_t n = int64_t{64} << 20;
  static std::vector<float> buf(static_cast<size_t>(n), 1.0f);
  const int threads = static_cast<int>(state.range(0));
  std::vector<double> sums(static_cast<size_t>(threads));
  for (auto _ : state) {
    pool(threads).parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t i = b; i + 4 <= e; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
      }
      benchmark::DoNotOptimize(s0 + s1 + s2 + s3);
    });
  }
  state.SetBytesProcessed(state.iterations() * n * 4);
}
BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->UseRealTime();

void BM_CopyBandwidth(benchmark::State& state) {
  const size_t n = size_t{128} << 20;
  static std::vector<char> a(n, 1), b(n, 2);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * 2));  // read + write
}
BENCHMARK(BM_CopyBandwidth)->UseRealTime();

// Decode: one row through a V4-Flash-sized weight; bytes = weight bytes read per call.
void run_gemv(benchmark::State& state, WeightFormat f, int64_t out, int64_t in) {
  static QuantWeight w8 = make_weight(WeightFormat::FP8_E4M3_BLOCK, 4096, 4096);
  static QuantWeight w4 = make_weight(WeightFormat::FP4_E2M1_BLOCK32, 2048, 4096);
  deepinfer::cpu::register_quant_kernels(deepinfer::cpu::QuantActivations::Official);
  const QuantWeight& w = f == WeightFormat::FP4_E2M1_BLOCK32 ? w4 : w8;
  (void)out;
  const auto x = random_x(in);
  std::vector<float> y(static_cast<size_t>(w.view.out));
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
    deepinfer::cpu::linear(x.data(), 1, w.view, y.data(), &pool(threads));
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(w.data.size()));
}
void BM_Fp8Gemv_wo_b_4096x4096(benchmark::State& s) {
  run_gemv(s, WeightFormat::FP8_E4M3_BLOCK, 4096, 4096);
}
void BM_Fp4Gemv_expert_2048x4096(benchmark::State& s) {
  run_gemv(s, WeightFormat::FP4_E2M1_BLOCK32, 2048, 4096);
}
BENCHMARK(BM_Fp8Gemv_wo_b_4096x4096)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_Fp4Gemv_expert_2048x4096)->Arg(1)->Arg(2)->UseRealTime();

// Prefill: 128 rows × [2048 × 4096] FP8, against sgemm of the same shape on fp32 weights.
constexpr int64_t kRows = 128, kOut = 2048, kIn = 4096;

void BM_Fp8Gemm_128x2048x4096(benchmark::State& state) {
  static QuantWeight w = make_weight(WeightFormat::FP8_E4M3_BLOCK, kOut, kIn);
  deepinfer::cpu::register_quant_kernels(deepinfer::cpu::QuantActivations::Official);
  const auto x = random_x(kRows * kIn);
  std::vector<float> y(static_cast<size_t>(kRows * kOut));
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) {
    deepinfer::cpu::linear(x.data(), kRows, w.view, y.data(), &pool(threads));
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kRows * kOut * kIn * state.iterations(), benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Fp8Gemm_128x2048x4096)->Arg(1)->Arg(2)->UseRealTime();

void BM_Sgemm_128x2048x4096(benchmark::State& state) {
  openblas_set_num_threads(static_cast<int>(state.range(0)));
  const auto x = random_x(kRows * kIn), w = random_x(kOut * kIn);
  std::vector<float> y(static_cast<size_t>(kRows * kOut));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kRows, kOut, kIn, 1.0f, x.data(), kIn,
                w.data(), kIn, 0.0f, y.data(), kOut);
    benchmark::DoNotOptimize(y.data());
  }
  openblas_set_num_threads(1);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kRows * kOut * kIn * state.iterations(), benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Sgemm_128x2048x4096)->Arg(1)->Arg(2)->UseRealTime();

// Whole quantized model (official numerics): the committed official fixtures, 2 threads.
std::unique_ptr<deepinfer::model::Model> load_fixture(const char* name) {
  auto m =
      deepinfer::model::Model::load(std::string(DEEPINFER_SOURCE_DIR) + "/tests/fixtures/" + name,
                                    deepinfer::model::ModelOptions{2});
  return m.ok() ? std::move(m.value()) : nullptr;
}

void BM_OfficialPrefill(benchmark::State& state, const char* name) {
  auto m = load_fixture(name);
  if (!m) {
    state.SkipWithError("fixture missing");
    return;
  }
  std::vector<int32_t> ids(256);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(3 + i * 7 % 300);
  const int64_t last[] = {255};
  std::vector<float> logits(static_cast<size_t>(m->config().vocab_size));
  for (auto _ : state) {
    auto st = m->new_state();
    benchmark::DoNotOptimize(m->forward(st, ids, last, logits.data()).ok());
  }
  state.counters["tokens/s"] =
      benchmark::Counter(256.0 * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_OfficialDecode(benchmark::State& state, const char* name) {
  auto m = load_fixture(name);
  if (!m) {
    state.SkipWithError("fixture missing");
    return;
  }
  std::vector<int32_t> prompt(64, 5);
  const int64_t zero[] = {0};
  std::vector<float> logits(static_cast<size_t>(m->config().vocab_size));
  auto st = m->new_state();
  (void)m->forward(st, prompt, {}, nullptr);
  int32_t tok = 7;
  for (auto _ : state) {
    const int32_t ids[] = {tok};
    benchmark::DoNotOptimize(m->forward(st, ids, zero, logits.data()).ok());
    tok = 3 + (tok * 13) % 300;
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_OfficialPrefill, official_v4_a, "official_v4_a")->UseRealTime();
BENCHMARK_CAPTURE(BM_OfficialDecode, official_v4_a, "official_v4_a")->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
