#include "common/byte_size.h"

#include <charconv>

namespace deepinfer {

Result<int64_t> parse_byte_size(const std::string& text, const std::string& flag) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data())
    return Error{flag + ": '" + text + "' is not a size (e.g. 512M, 4G)"};
  const std::string suffix(end, text.data() + text.size());
  double scale = 1;
  if (suffix == "K" || suffix == "KiB") scale = 1024.0;
  else if (suffix == "M" || suffix == "MiB") scale = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (!suffix.empty() && suffix != "B") return Error{flag + ": unknown suffix '" + suffix + "'"};
  if (!(value > 0) || value * scale > 9e18) return Error{flag + " must be a positive size"};
  return static_cast<int64_t>(value * scale);
}

}  // namespace deepinfer
