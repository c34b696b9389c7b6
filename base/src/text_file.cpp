#include "tetra/base/text_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include "tetra/base/error.hpp"

namespace tetra {

namespace {
std::mutex inputs_mutex;
std::vector<std::filesystem::path>& inputs() {
  static std::vector<std::filesystem::path> read;
  return read;
}
}  // namespace

void note_input(const std::string& path) {
  std::error_code ec;
  const auto canonical = std::filesystem::weakly_canonical(path, ec);
  const std::lock_guard<std::mutex> lock(inputs_mutex);
  inputs().push_back(ec ? std::filesystem::path(path) : canonical);
}

bool read_as_input(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(path, ec);
  const std::lock_guard<std::mutex> lock(inputs_mutex);
  for (const fs::path& p : inputs()) {
    std::error_code e2;
    if ((!ec && p == target) || fs::equivalent(p, path, e2)) return true;
  }
  return false;
}

std::string read_input_file(const std::string& path, std::size_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) throw UserError(SourceLocation{path}, "", "no such file");
  if (fs::is_directory(st)) throw UserError(SourceLocation{path}, "", "is a directory, not a file");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const std::string why = errno != 0 ? std::strerror(errno) : "cannot open";
    throw UserError(SourceLocation{path}, "", "cannot open the file for reading: " + why);
  }
  note_input(path);
  std::string out;
  char chunk[1 << 16];
  while (in) {
    in.read(chunk, sizeof chunk);
    out.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (out.size() > max_bytes) {
      throw UserError(SourceLocation{path}, "",
                      "larger than " + std::to_string(max_bytes / (1024 * 1024)) + " MiB (read stops there)");
    }
  }
  if (in.bad()) throw UserError(SourceLocation{path}, "", "read error");
  return out;
}

}  // namespace tetra
