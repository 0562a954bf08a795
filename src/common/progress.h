// A progress bar on stderr for long operations (model load, batch generation): redrawn in place
// on a terminal, a few plain lines otherwise; finish() prints the elapsed time. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace deepinfer {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total, std::string unit = "");
  void advance(uint64_t delta = 1);
  void set(uint64_t done);
  // Prints the final line with the elapsed seconds; returns them.
  double finish();

 private:
  void draw(bool final);

  std::string label_;
  std::string unit_;
  uint64_t total_;
  uint64_t done_ = 0;
  int last_decile_ = -1;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_{};
  std::mutex mu_;
};

}  // namespace deepinfer
