// `tetrasim calibrate` as a user runs it (the binary, not the library).
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
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

  TEST_CASE("calibrate --host needs no GPU and prints the [cluster.host] table a scenario takes") {
    const auto r = run("calibrate --host", "host");
    CHECK(r.code == 0);
    CHECK(r.out.rfind("[cluster.host]\nfirst_touch_bandwidth = \"", 0) == 0);
    CHECK(r.out.find("\ncopy_bandwidth = \"") != std::string::npos);
    CHECK(r.out.find("GB/s\"\n") != std::string::npos);
    // With the measuring flags of a GPU node it is a usage error.
    CHECK(run("calibrate --host --gemm", "host_gemm").code != 0);
    CHECK(run("calibrate --host --out unused.profile.toml", "host_out").code != 0);  // it writes no profile
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
double step_time_with(const std::string& profile, const std::string& tag, const std::string& preset = "dgx-h100") {
  auto scenario = read_text(std::string(TETRA_SOURCE_DIR) + "/scenarios/default.toml");
  const std::string dgx = "preset = \"dgx-h100\"";
  const auto p = scenario.find(dgx);
  REQUIRE(p != std::string::npos);
  scenario.replace(p, dgx.size(), "preset = \"" + preset + "\"");
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

// ---- issue 34: calibrate --import-trace on real and bad traces --------------------------------

namespace {

const std::string kTraces = std::string(TETRA_SOURCE_DIR) + "/tests/data/traces/";

bool exists(const std::string& path) { return std::ifstream(path).good(); }

/// A bad input: exit 1, one line on stderr naming the file and `reason`, no profile written.
void check_refused(const std::string& args, const std::string& file, const std::string& reason, const std::string& tag) {
  const std::string out = std::string(TETRA_BINARY_DIR) + "/test_calib_" + tag + ".profile.toml";
  std::remove(out.c_str());
  const auto r = run("calibrate --import-trace " + args + " --out " + out, tag);
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find(file) != std::string::npos);
  CHECK(r.err.find(reason) != std::string::npos);
  CHECK_FALSE(exists(out));
}

}  // namespace

TEST_SUITE("calib") {
  TEST_CASE("import-trace refuses bad traces on one line, exit 1, nothing written") {
    // A gzip that is not JSON.
    const std::string notjson = std::string(TETRA_BINARY_DIR) + "/test_calib_notjson.json.gz";
    REQUIRE(std::system(("printf 'not a trace' | gzip -c > " + notjson).c_str()) == 0);
    check_refused(notjson, "test_calib_notjson.json.gz", "the decompressed trace is not valid JSON", "gznotjson");
    // A trace of another GPU than --gpu names.
    check_refused(kTraces + "tracelens/h100_bert-small.json.gz --gpu mi300x", "h100_bert-small.json.gz",
                  "recorded on NVIDIA H100 80GB HBM3 (h100-sxm), not mi300x; give --other-gpu", "othergpu");
    // A trace with no usable rows (recorded without shapes).
    check_refused(kTraces + "hta/alexnet_a100_trace.json.gz", "alexnet_a100_trace.json.gz",
                  "no usable rows within the a100-sxm-40gb datasheet", "norows");
    // A trace that names no GPU, without --gpu.
    check_refused(kTraces + "hta/sampled_rank-0.json.gz", "sampled_rank-0.json.gz",
                  "the trace does not name its GPU (no deviceProperties); give --gpu NAME", "nogpu");
    check_refused(kTraces + "hta/sampled_rank-0.json.gz --gpu tpu-v5", "--gpu tpu-v5", "no datasheet for that GPU",
                  "unknowngpu");
  }

  TEST_CASE("import-trace of a public trace writes a profile that records its GPU and says what it kept") {
    const std::string out = std::string(TETRA_BINARY_DIR) + "/test_calib_hta.profile.toml";
    const auto r = run("calibrate --import-trace " + kTraces + "hta/sampled_rank-0.json.gz --gpu a100-sxm-80gb --out " +
                           out,
                       "hta");
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("linked to their op by External id 0, by the op enclosing the launch 1138") != std::string::npos);
    CHECK(r.out.find("kept, not fitted 147: dtype fp32 (the fit is of bf16 / fp16)") != std::string::npos);
    CHECK(r.out.find("gemm: 147 rows found, 147 kept, not fitted (built-in kept)") != std::string::npos);
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    CHECK(ss.str().find("gpu = \"a100-sxm-80gb\"") != std::string::npos);
    // The H100 trace on an H100 needs no flag; for another GPU --other-gpu says so.
    const auto h = run("calibrate --import-trace " + kTraces + "tracelens/h100_bert-small.json.gz --gpu h100-sxm --out " +
                           out + " --json",
                       "h100");
    CHECK(h.code == 0);
    CHECK(h.out.find("\"device\": \"h100-sxm\"") != std::string::npos);
    const auto o = run("calibrate --import-trace " + kTraces + "tracelens/h100_bert-small.json.gz --gpu mi300x --other-gpu --out " +
                           out,
                       "other");
    CHECK(o.code == 0);
  }
}

TEST_SUITE("calib") {
  TEST_CASE("simulate with a profile written from each public H100 trace stays within a factor of the built-in") {
    // scenarios/default.toml (Llama-3.1-70B on 8 DGX H100). The profile's GEMM rows are used
    // as measured: the cost model scales a GEMM of another shape by the measured / modelled
    // ratio of the nearest row (costmodel/src/compute.cpp). bert-small's rows are 141-token
    // GEMMs, launch-bound at 20-107 TFLOP/s, so its profile prices 70B's GEMMs about 2x slower;
    // the ViT's 788-token rows are near the model. The fitted rates themselves are bounded
    // (import tests above); the factor comes from extrapolating small rows, hence 2.5.
    const double builtin = step_time_with("", "sim_builtin");
    for (const char* trace : {"tracelens/h100_bert-small.json.gz", "tracelens/h100_nsfw_image_detection.json.gz"}) {
      CAPTURE(trace);
      const std::string out = std::string(TETRA_BINARY_DIR) + "/test_calib_sim.profile.toml";
      REQUIRE(run("calibrate --import-trace " + kTraces + trace + " --out " + out, "simimport").code == 0);
      const double t = step_time_with(out, "sim_trace");
      MESSAGE(std::string(trace) << ": step " << t << " s, built-in " << builtin << " s, ratio " << t / builtin);
      CHECK(t / builtin > 1.0 / 2.5);
      CHECK(t / builtin < 2.5);
    }
  }

  TEST_CASE("simulate with the profile of a real H200 Nsight export stays near the built-in H200") {
    // The same scenario on 8 HGX H200 nodes. The export's rows are 2048-token GEMMs of a
    // 2048-wide model, fitted to 816.6 TFLOP/s, and two cuDNN attention calls at 343 (forward)
    // and 263 TFLOP/s (backward, 2.5 x the forward FLOPs).
    const double builtin = step_time_with("", "sim_builtin_h200", "hgx-h200");
    const std::string out = std::string(TETRA_BINARY_DIR) + "/test_calib_sim_nsys.profile.toml";
    REQUIRE(run("calibrate --import-trace " + kData + "h200_torch211_nsys_nvtx.json.gz --gpu h200 --out " + out,
                "simnsys")
                .code == 0);
    const double t = step_time_with(out, "sim_nsys", "hgx-h200");
    MESSAGE("H200 Nsight export: step " << t << " s, built-in " << builtin << " s, ratio " << t / builtin);
    CHECK(t / builtin > 1.0 / 1.5);
    CHECK(t / builtin < 1.5);
  }
}

// ---- issue 34: the traces of several ranks of one run -----------------------------------------

#include <nlohmann/json.hpp>

#include "rank_traces.hpp"

namespace {

/// A synthetic rank's trace (rank_traces.hpp) written into the build tree; its path.
std::string rank_file(const tetra::calib::testing::RankTraceSpec& spec, const std::string& name) {
  const std::string path = std::string(TETRA_BINARY_DIR) + "/test_calib_" + name + ".json";
  write_text(path, tetra::calib::testing::rank_trace_json(spec));
  return path;
}

}  // namespace

TEST_SUITE("calib") {
  TEST_CASE("import-trace of several ranks merges HolisticTraceAnalysis's pair (comma list or repeated)") {
    const std::string r0 = kTraces + "hta/sampled_rank-0.json.gz";
    const std::string r1 = kTraces + "hta/sampled_rank-1.json.gz";
    const std::string out = std::string(TETRA_BINARY_DIR) + "/test_calib_merge.profile.toml";
    const auto j = run("calibrate --import-trace " + r0 + "," + r1 + " --gpu a100-sxm-80gb --ranks-per-node 8 --out " +
                           out + " --json",
                       "merge");
    INFO(j.err);
    REQUIRE(j.code == 0);
    const auto doc = nlohmann::json::parse(j.out);
    CHECK(doc["merge"]["instances"] == 5);
    CHECK(doc["merge"]["instances_with_rows"] == 2);
    CHECK(doc["merge"]["world_size"] == 128);
    CHECK(doc["merge"]["traces"][1]["rank_from"] == "distributedInfo");
    CHECK(doc["ranks_per_node"] == 8);
    CHECK(doc["ranks_per_node_from"] == "--ranks-per-node");
    CHECK(doc["rows"]["collective"] == 1);
    CHECK(read_text(out).find("ranks_per_node = 8") != std::string::npos);
    const auto t = run("calibrate --import-trace " + r1 + " --import-trace " + r0 + " --gpu a100-sxm-80gb --out " + out,
                       "mergetext");
    REQUIRE(t.code == 0);
    CHECK(t.out.find("collectives: 5 instances matched across the traces, 2 with sizes") != std::string::npos);
    CHECK(t.out.find("times from the last arriving of 2 ranks' traces") != std::string::npos);
    // --ranks-per-node is 1..1024 and belongs to --import-trace: usage errors.
    CHECK(run("calibrate --import-trace " + r0 + " --ranks-per-node 0 --out " + out, "rpn0").code == 2);
    CHECK(run("calibrate --import-trace " + r0 + " --ranks-per-node 1025 --out " + out, "rpn1025").code == 2);
    CHECK(run("calibrate --ranks-per-node 8 --out " + out, "rpnalone").code == 2);
  }

  TEST_CASE("import-trace of several ranks refuses traces of different runs on one line, exit 1, nothing written") {
    using tetra::calib::testing::rank_spec;
    const std::string r0 = rank_file(rank_spec(0), "rank0");
    auto world4 = rank_spec(1);
    world4.world_size = 4;
    check_refused(r0 + " --import-trace " + rank_file(world4, "rank1_world4"), "test_calib_rank1_world4.json",
                  "world size 4 (distributedInfo), but " + r0 + " has 2: not the same run", "mergeworld");
    const std::string hta0 = kTraces + "hta/sampled_rank-0.json.gz";
    check_refused(hta0 + " --import-trace " + hta0 + " --gpu a100-sxm-80gb", "sampled_rank-0.json.gz",
                  "rank 0 again", "mergedup");
    auto a100 = rank_spec(1);
    a100.gpu = "NVIDIA A100-SXM4-80GB";
    check_refused(r0 + " --import-trace " + rank_file(a100, "rank1_a100"), "test_calib_rank1_a100.json",
                  "recorded on NVIDIA A100-SXM4-80GB, but " + r0 + " on NVIDIA H100 80GB HBM3: not the same run",
                  "mergegpu");
    // A real H100 trace of one process: no NCCL kernel (its rank is its position, 1).
    check_refused(r0 + "," + kTraces + "tracelens/h100_bert-small.json.gz", "h100_bert-small.json.gz",
                  "no NCCL collective kernel (send / recv aside): nothing to match", "mergequiet");
  }
}
