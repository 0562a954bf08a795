#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

namespace deepinfer {

ProgressBar::ProgressBar(std::string label, uint64_t total, std::string unit)
    : label_(std::move(label)),
      unit_(unit.empty() ? std::string() : " " + unit),  // "4 layers", not "4layers"
      total_(total),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

void ProgressBar::advance(uint64_t delta) {
  std::lock_guard lock(mu_);
  done_ += delta;
  draw(false);
}

void ProgressBar::set(uint64_t done) {
  std::lock_guard lock(mu_);
  done_ = done;
  draw(false);
}

double ProgressBar::finish() {
  std::lock_guard lock(mu_);
  if (!finished_) {
    finished_ = true;
    done_ = total_;
    draw(true);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressBar::draw(bool final) {
  const auto now = std::chrono::steady_clock::now();
  const double frac = total_ ? double(done_) / double(total_) : 1.0;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (tty_) {
    if (!final && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    std::fprintf(stderr, "\r%s [%s] %3.0f%% %llu/%llu%s %.1fs%s", label_.c_str(), bar.c_str(),
                 frac * 100, static_cast<unsigned long long>(done_),
                 static_cast<unsigned long long>(total_), unit_.c_str(), elapsed,
                 final ? "\n" : "");
  } else {
    const int decile = static_cast<int>(frac * 10);
    if (!final && decile == last_decile_) return;
    last_decile_ = decile;
    if (final)
      std::fprintf(stderr, "%s: done (%llu%s) in %.2fs\n", label_.c_str(),
                   static_cast<unsigned long long>(total_), unit_.c_str(), elapsed);
    else
      std::fprintf(stderr, "%s: %3.0f%%\n", label_.c_str(), frac * 100);
  }
  std::fflush(stderr);
}

}  // namespace deepinfer
