// Driver for LLVMFuzzerTestOneInput without libFuzzer (g++ builds): runs every file of the seed
// corpus, then random mutations of them (byte flips, truncation, splices, duplication) until the
// time budget (-max_total_time=S, default 5) is spent. Deterministic seed, so failures repeat.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

std::vector<std::string> load_corpus(const std::vector<std::string>& dirs) {
  std::vector<std::string> corpus;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, ec)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (corpus.empty()) corpus.emplace_back("{}");
  return corpus;
}

std::string mutate(const std::vector<std::string>& corpus, std::mt19937_64& rng) {
  std::string s = corpus[rng() % corpus.size()];
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int r = 0; r < rounds; ++r) {
    switch (rng() % 6) {
      case 0:  // flip a byte
        if (!s.empty()) s[rng() % s.size()] = static_cast<char>(rng());
        break;
      case 1:  // truncate
        if (!s.empty()) s.resize(rng() % s.size());
        break;
      case 2: {  // splice another seed
        const std::string& o = corpus[rng() % corpus.size()];
        if (!o.empty()) s.insert(s.empty() ? 0 : rng() % s.size(), o.substr(rng() % o.size()));
        break;
      }
      case 3:  // duplicate a slice
        if (s.size() > 1) {
          size_t a = rng() % s.size(), n = rng() % (s.size() - a);
          s.insert(a, s.substr(a, n));
        }
        break;
      case 4:  // erase a slice
        if (s.size() > 1) {
          size_t a = rng() % s.size();
          s.erase(a, rng() % (s.size() - a));
        }
        break;
      default: {  // insert an interesting byte run
        static const char* kTokens[] = {"\"", "{", "}", "[", "]", ",", ":", "\\u0000", "\xff",
                                        "\xe2\x96", "-1e999", "null", "<\xef\xbd\x9c", "\n"};
        const char* t = kTokens[rng() % (sizeof(kTokens) / sizeof(kTokens[0]))];
        s.insert(s.empty() ? 0 : rng() % s.size(), t);
      }
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  double budget_s = 5;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "-max_total_time=", 16) == 0) budget_s = std::atof(argv[i] + 16);
    else if (argv[i][0] != '-') dirs.emplace_back(argv[i]);
  }
  const auto corpus = load_corpus(dirs);
  for (const auto& seed : corpus)
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(seed.data()), seed.size());
  std::mt19937_64 rng(0x5eed);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(budget_s);
  size_t runs = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string input = mutate(corpus, rng);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
    ++runs;
  }
  std::printf("fuzz: %zu seeds, %zu mutated runs, no crash\n", corpus.size(), runs);
  return 0;
}
