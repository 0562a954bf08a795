// Tokenizer throughput (tokens/s) on 1 MB and 10 MB of mixed text (English prose, code, Chinese,
// digits, emoji), single-threaded and on all cores, with the cached DeepSeek V4.1 tokenizer.
// Extra modes for the side-by-side run against HF `tokenizers`:
//   --dump-text=PATH --bytes=N   write the generated text
//   --encode=IN --ids-out=OUT    encode a file (threads from --threads=N) and write int32 ids
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "common/io.h"
#include "tokenizer/cache_dir.h"
#include "tokenizer/tokenizer.h"

namespace {

using deepinfer::tokenizer::TokenId;
using deepinfer::tokenizer::Tokenizer;

struct Rng {
  uint64_t s = 0x2545F4914F6CDD1DULL;
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<uint32_t>(s >> 11);
  }
  template <size_t N>
  const char* pick(const char* const (&a)[N]) {
    return a[next() % N];
  }
};

const char* const kWords[] = {"the",
                              "of",
                              "and",
                              "to",
                              "in",
                              "is",
                              "that",
                              "for",
                              "it",
                              "as",
                              "was",
                              "with",
                              "be",
                              "by",
                              "on",
                              "not",
                              "he",
                              "this",
                              "are",
                              "or",
                              "his",
                              "from",
                              "at",
                              "which",
                              "but",
                              "have",
                              "an",
                              "had",
                              "they",
                              "you",
                              "were",
                              "their",
                              "one",
                              "all",
                              "we",
                              "can",
                              "her",
                              "has",
                              "there",
                              "been",
                              "if",
                              "more",
                              "when",
                              "will",
                              "would",
                              "who",
                              "so",
                              "no",
                              "model",
                              "token",
                              "inference",
                              "attention",
                              "memory",
                              "latency",
                              "throughput",
                              "server",
                              "request",
                              "stream",
                              "kernel",
                              "matrix",
                              "vector",
                              "compression",
                              "language",
                              "reasoning",
                              "tokenizer",
                              "cache",
                              "scheduler",
                              "sequence",
                              "batch",
                              "expert",
                              "routing",
                              "precision",
                              "gradient",
                              "network",
                              "implementation",
                              "performance",
                              "configuration",
                              "naïve",
                              "café",
                              "Zürich",
                              "résumé"};
const char* const kCode[] = {"    for (size_t i = 0; i < n; ++i) {\n",
                             "      sum += a[i] * b[i];\n",
                             "    }\n",
                             "def encode(self, text: str) -> list[int]:\n",
                             "        return [self.vocab[t] for t in text]\n",
                             "  if (!status.ok()) return status.error();\n",
                             "#include <vector>\n",
                             "    x = torch.randn(4, 128, dtype=torch.bfloat16)\n",
                             "}\n",
                             "\treturn nullptr;\n",
                             "const auto it = map.find(key);  // O(1)\n",
                             "SELECT id, name FROM users WHERE id = 42;\n"};
const char* const kChinese[] = {"深度", "求索", "模型", "推理", "服务", "我们", "今天", "问题",
                                "文本", "数据", "中文", "语言", "计算", "速度", "系统", "测试"};
const char* const kOther[] = {"😀",          "🚀",        "👍🏽",   "Привет", "мир", "Γειά",
                              "こんにちは", "カタカナ", "안녕하세요", "مرحبا",  "—",   "…",
                              "€",          "→",        "«",          "»"};

std::string generate_text(size_t bytes) {
  Rng rng;
  std::string s;
  s.reserve(bytes + 256);
  while (s.size() < bytes) {
    const uint32_t kind = rng.next() % 10;
    if (kind < 6) {  // an English paragraph
      const int sentences = 2 + rng.next() % 5;
      for (int k = 0; k < sentences; ++k) {
        const int n = 5 + rng.next() % 15;
        for (int w = 0; w < n; ++w) {
          std::string word = rng.pick(kWords);
          if (w == 0) word[0] = static_cast<char>(std::toupper(word[0]));
          s += word;
          if (rng.next() % 29 == 0) s += std::string(" ") + std::to_string(rng.next() % 100000);
          if (rng.next() % 31 == 0) s += std::string(" ") + rng.pick(kOther);
          s +=
              (w + 1 == n) ? (rng.next() % 5 == 0 ? "?" : ".") : (rng.next() % 9 == 0 ? ", " : " ");
        }
        s += ' ';
      }
      s += "\n\n";
    } else if (kind < 8) {  // a code block
      s += "```\n";
      const int lines = 3 + rng.next() % 8;
      for (int k = 0; k < lines; ++k) s += rng.pick(kCode);
      s += "```\n\n";
    } else {  // Chinese with some numbers
      const int n = 10 + rng.next() % 40;
      for (int k = 0; k < n; ++k) {
        s += rng.pick(kChinese);
        if (rng.next() % 8 == 0) s += "，";
        if (rng.next() % 20 == 0) s += std::to_string(1990 + rng.next() % 40) + "年";
      }
      s += "。\n\n";
    }
  }
  // Cut back to a character boundary at or below `bytes`.
  size_t end = bytes;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  s.resize(end);
  return s;
}

const Tokenizer& tokenizer() {
  static std::unique_ptr<Tokenizer> tok = [] {
    const char* dir = std::getenv("DEEPINFER_TOKENIZER");
    auto t = Tokenizer::from_path(dir ? dir : deepinfer::tokenizer::deepseek_tokenizer_dir(true));
    if (!t) {
      std::fprintf(stderr, "%s\n", t.error().message.c_str());
      std::exit(1);
    }
    return std::move(t.value());
  }();
  return *tok;
}

const std::string& text_of(size_t mb) {
  static std::string one = generate_text(1 << 20), ten = generate_text(10 << 20);
  return mb == 1 ? one : ten;
}

void BM_Encode(benchmark::State& state) {
  const Tokenizer& tok = tokenizer();
  const std::string& text = text_of(static_cast<size_t>(state.range(0)));
  const int threads = state.range(1) == 0 ? static_cast<int>(std::thread::hardware_concurrency())
                                          : static_cast<int>(state.range(1));
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok.encode(text, threads);
    tokens = ids.value().size();
    benchmark::DoNotOptimize(ids.value().data());
  }
  state.counters["tokens"] = static_cast<double>(tokens);
  state.counters["threads"] = threads;
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(tokens) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.SetBytesProcessed(static_cast<int64_t>(text.size() * state.iterations()));
}
BENCHMARK(BM_Encode)
    ->ArgNames({"MB", "threads"})
    ->Args({1, 1})
    ->Args({1, 0})
    ->Args({10, 1})
    ->Args({10, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

const char* flag(int argc, char** argv, const char* name) {
  const size_t n = std::strlen(name);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* path = flag(argc, argv, "--dump-text")) {
    const char* bytes = flag(argc, argv, "--bytes");
    const std::string text = generate_text(bytes ? std::stoul(bytes) : (10u << 20));
    std::ofstream(path, std::ios::binary) << text;
    return 0;
  }
  if (const char* in = flag(argc, argv, "--encode")) {
    auto text = deepinfer::read_file(in);
    if (!text) return 1;
    const char* threads = flag(argc, argv, "--threads");
    const Tokenizer& tok = tokenizer();
    const auto t0 = std::chrono::steady_clock::now();
    auto ids = tok.encode(text.value(), threads ? std::atoi(threads) : 1);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!ids) return 1;
    std::printf("{\"tokens\":%zu,\"seconds\":%.6f}\n", ids.value().size(), s);
    if (const char* out = flag(argc, argv, "--ids-out")) {
      std::ofstream(out, std::ios::binary)
          .write(reinterpret_cast<const char*>(ids.value().data()),
                 static_cast<std::streamsize>(ids.value().size() * sizeof(TokenId)));
    }
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
