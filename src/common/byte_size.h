// Sizes given on the command line: "4G", "512M", "64K", "1.5GiB" or plain bytes.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace deepinfer {

// `flag` names the option in the error message.
Result<int64_t> parse_byte_size(const std::string& text, const std::string& flag);

}  // namespace deepinfer
