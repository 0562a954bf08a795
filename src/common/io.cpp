#include "common/io.h"

#include <fstream>
#include <iterator>

namespace deepinfer {

std::string read_all(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot open " + path};
  return read_all(in);
}

}  // namespace deepinfer
