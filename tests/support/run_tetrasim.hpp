#pragma once
// Runs the built tetrasim executable from the source folder for end-to-end tests, capturing
// stdout, stderr and the exit code. Header-only; every test executable may include it.

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tetra::test {

struct CliRun {
  int code = -1;     ///< exit code; 124 when the time limit killed it, -1 on a signal
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

/// A scratch folder of the build tree for one test executable's files, made on first use:
/// TETRA_BINARY_DIR/tests/<name>/<pid> (the pid keeps parallel test processes apart).
inline std::filesystem::path scratch_dir(const std::string& name) {
  const auto dir = std::filesystem::path(TETRA_BINARY_DIR) / "tests" / name / std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  return dir;
}

/// Writes `text` to `p` as it is.
inline void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

/// `tetrasim ARGS` (ARGS is shell text) run in TETRA_SOURCE_DIR with no stdin, killed after
/// `timeout_s` seconds.
inline CliRun run_tetrasim(const std::string& args, int timeout_s = 120) {
  namespace fs = std::filesystem;
  static std::atomic<int> counter{0};
  const fs::path dir = fs::path(TETRA_BINARY_DIR) / "tests" / "cli_scratch";
  fs::create_directories(dir);
  const std::string tag = std::to_string(::getpid()) + "_" + std::to_string(counter++);
  const fs::path out = dir / ("out_" + tag);
  const fs::path err = dir / ("err_" + tag);
  const std::string bin = std::string(TETRA_BINARY_DIR) + "/cli/tetrasim";
  const std::string cmd = "cd '" + std::string(TETRA_SOURCE_DIR) + "' && timeout " +
                          std::to_string(timeout_s) + " '" + bin + "' " + args + " >'" +
                          out.string() + "' 2>'" + err.string() + "' </dev/null";
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  fs::remove(out);
  fs::remove(err);
  return r;
}

}  // namespace tetra::test
