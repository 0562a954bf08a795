// Small file/stdio helpers shared by the CLI and tests.
#pragma once

#include <istream>
#include <string>

#include "common/result.h"

namespace deepinfer {

std::string read_all(std::istream& in);
Result<std::string> read_file(const std::string& path);

}  // namespace deepinfer
