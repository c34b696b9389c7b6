// `tetrasim calibrate` as a user runs it (the binary, not the library).
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>

#include "tetra/calib/runner.hpp"

namespace {

const std::string kBin = std::string(TETRA_BINARY_DIR) + "/cli/tetrasim";
const std::string kData = std::string(TETRA_SOURCE_DIR) + "/tests/data/calib/";

struct Run {
  int code = -1;
  std::string out, err;
};

Run run(const std::string& args, const std::string& tag) {
  const std::string out = std::string(TETRA_BINARY_DIR) + "/test_calib_" + tag + ".out";
  const std::string err = std::string(TETRA_BINARY_DIR) + "/test_calib_" + tag + ".err";
  const int status = std::system((kBin + " " + args + " >" + out + " 2>" + err).c_str());
  Run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace

TEST_SUITE("calib") {
  TEST_CASE("calibrate without a GPU says so on one line and exits 1") {
    // Test machines have no GPU: cudaGetDeviceCount fails (or the binary has no CUDA).
    const auto r = run("calibrate --quick --out unused.profile.toml", "nogpu");
    CHECK(r.code == 1);
    CHECK(r.err.rfind("tetrasim: calibrate: no CUDA device found (", 0) == 0);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    MESSAGE("stderr: " << r.err);
  }

  TEST_CASE("import-trace needs no GPU and reports what it used") {
    const std::string out = std::string(TETRA_BINARY_DIR) + "/test_calib_import.profile.toml";
    const auto r = run("calibrate --import-trace " + kData + "kineto_small.json --sms 132 --out " + out + " --json",
                       "import");
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("\"kernels\": 10") != std::string::npos);
    std::ifstream written(out);
    CHECK(written.good());
  }

  TEST_CASE("a bad trace is a one-line user error") {
    const auto r = run("calibrate --import-trace " + kData + "published_a100.csv", "badtrace");
    CHECK(r.code == 1);
    CHECK(r.err.find("published_a100.csv") != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  }
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

/// step_time_s of `tetrasim simulate` on scenarios/default.toml pointed at `profile` ("": the
/// built-in profile of its cluster).
double step_time_with(const std::string& profile, const std::string& tag) {
  auto scenario = read_text(std::string(TETRA_SOURCE_DIR) + "/scenarios/default.toml");
  const auto at = scenario.find("\nnodes = ");
  REQUIRE(at != std::string::npos);
  if (!profile.empty()) scenario.insert(at + 1, "profile = \"" + profile + "\"\n");  // "" = built-in
  const std::string path = std::string(TETRA_BINARY_DIR) + "/test_calib_" + tag + ".toml";
  write_text(path, scenario);
  const auto r = run("simulate " + path + " --json", tag);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto key = r.out.find("\"step_time_s\":");
  REQUIRE(key != std::string::npos);
  return std::strtod(r.out.c_str() + key + 14, nullptr);
}

}  // namespace

TEST_SUITE("calib") {
  TEST_CASE("simulate uses the measured rows of a profile") {
    // A recorded table (the synthetic H100 one) plus the forward QKV GEMM of scenarios/
    // default.toml (Llama-3.1-70B, TP 8 with SP, 8192 tokens: M = 8192, N = 80*128/8 = 1280,
    // K = 8192), fitted and written by `calibrate --tables`.
    auto table = read_text(kData + "synthetic_h100.csv");
    const std::string header = "[gemm]\nm,n,k,dtype,seconds\n";
    const auto at = table.find(header);
    REQUIRE(at != std::string::npos);
    table.insert(at + header.size(), "8192,1280,8192,bf16,2.2e-4\n");
    const std::string csv = std::string(TETRA_BINARY_DIR) + "/test_calib_rows.csv";
    const std::string p1 = std::string(TETRA_BINARY_DIR) + "/test_calib_p1.profile.toml";
    const std::string p2 = std::string(TETRA_BINARY_DIR) + "/test_calib_p2.profile.toml";
    write_text(csv, table);
    REQUIRE(run("calibrate --tables " + csv + " --out " + p1, "rows").code == 0);
    // The same profile (same [fit]) with only that one measured row ten times slower.
    auto text = read_text(p1);
    const std::string row = "m = 8192\nn = 1280\nk = 8192\ndtype = \"bf16\"\nseconds = ";
    const auto r0 = text.find(row);
    REQUIRE(r0 != std::string::npos);
    const auto v0 = r0 + row.size();
    text.replace(v0, text.find('\n', v0) - v0, "0.0022");
    write_text(p2, text);
    const double builtin = step_time_with("", "builtin");
    const double t1 = step_time_with(p1, "p1");
    const double t2 = step_time_with(p2, "p2");
    MESSAGE("default.toml step time: built-in profile " << builtin << " s, recorded profile " << t1
                                                        << " s, one QKV row x10 " << t2 << " s");
    CHECK(t1 != builtin);
    CHECK(t2 > 1.05 * t1);
  }
}
