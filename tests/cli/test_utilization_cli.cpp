// MFU with the peak it divides by, HFU and the GEMM format's peak in the outputs of simulate
// and search (docs/cli.md, "Utilization"); plan's are in tests/plan/test_plan_cli.cpp.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "support/run_tetrasim.hpp"

using tetra::test::approx;
using tetra::test::CliRun;
using tetra::test::run_tetrasim;
using tetra::test::slurp;
namespace fs = std::filesystem;

namespace {

nlohmann::json json_of(const std::string& args) {
  const CliRun r = run_tetrasim(args + " --json");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_SUITE("cli") {

TEST_CASE("simulate: MFU names its BF16 peak, HFU counts the recomputed forward") {
  const auto none = json_of("simulate scenarios/quickstart.toml");
  CHECK(none["mfu_peak_precision"] == "bf16");
  CHECK(none["mfu_peak_tflops"].get<double>() == 989.0);  // H100 SXM, dense BF16 [H100-DS]
  CHECK(none["hfu"].get<double>() == none["mfu"].get<double>());
  CHECK(none["precision_peak"] == "bf16");
  CHECK(none["precision_peak_utilization"].get<double>() == none["mfu"].get<double>());
  // Full recomputation runs every layer's forward again: HFU above MFU by less than a third
  // (the LM head is not recomputed).
  const auto full = json_of("simulate scenarios/quickstart.toml --layout recompute=full");
  const double ratio = full["hfu"].get<double>() / full["mfu"].get<double>();
  CHECK(ratio > 1.25);
  CHECK(ratio < 4.0 / 3.0);
  const CliRun t = run_tetrasim("simulate scenarios/quickstart.toml");
  REQUIRE(t.code == 0);
  CHECK(t.out.find("MFU, of BF16 dense peak 989 TFLOP/s") != std::string::npos);
  CHECK(t.out.find("HFU, recomputation counted") != std::string::npos);
  CHECK(t.out.find("of FP8 dense peak") == std::string::npos);
}

TEST_CASE("simulate: an FP8 run's share of the FP8 peak is its MFU times BF16 over FP8 peak") {
  const auto j = json_of("simulate scenarios/llama3.1-405b-fp8-h100.toml");
  CHECK(j["precision_peak"] == "fp8");
  CHECK(j["precision_peak_tflops"].get<double>() == 1979.0);  // H100 SXM, dense FP8 [H100-DS]
  CHECK(j["precision_peak_utilization"].get<double>() ==
        approx(j["mfu"].get<double>() * 989.0 / 1979.0).epsilon(1e-3));  // JSON rounds to 1e-4
  const CliRun t = run_tetrasim("simulate scenarios/llama3.1-405b-fp8-h100.toml");
  REQUIRE(t.code == 0);
  CHECK(t.out.find("model FLOPs, of FP8 dense peak 1979 TFLOP/s") != std::string::npos);
}

TEST_CASE("search: tokens/s per GPU, HFU and the peaks in every layout of JSON, CSV and the table") {
  const fs::path csv = fs::path(TETRA_BINARY_DIR) / "tests" / "utilization_search.csv";
  fs::create_directories(csv.parent_path());
  const auto j = json_of("search scenarios/quickstart.toml --csv '" + csv.string() + "'");
  REQUIRE(!j["layouts"].empty());
  bool recomputed = false;
  for (const auto& l : j["layouts"]) {
    CHECK(l["tokens_per_s_per_gpu"].get<double>() == approx(l["tokens_per_s"].get<double>() / 16.0).epsilon(1e-12));
    CHECK(l["mfu_peak_tflops"].get<double>() == 989.0);
    if (l["recompute"] == "none") {
      CHECK(l["hfu"].get<double>() == approx(l["mfu"].get<double>()).epsilon(1e-12));
    } else {
      recomputed = true;
      CHECK(l["hfu"].get<double>() > l["mfu"].get<double>());
    }
  }
  CHECK(recomputed);
  const std::string text = slurp(csv);
  CHECK(text.find(",compile,tokens_per_s_per_gpu,hfu,mfu_peak_precision,mfu_peak_tflops,precision_peak,"
                  "precision_peak_tflops,precision_peak_utilization,cp_comm_type,cp_a2a\n") != std::string::npos);
  // Each row ends with its layout's context-parallel exchange (the ring where nothing else is said)
  // and the all-to-all level of hierarchical CP (1 otherwise).
  CHECK(text.find(",p2p,1\n") != std::string::npos);
  const CliRun t = run_tetrasim("search scenarios/quickstart.toml --top 3");
  REQUIRE(t.code == 0);
  CHECK(t.out.find("tok/s/GPU") != std::string::npos);
  CHECK(t.out.find("HFU %") != std::string::npos);
  CHECK(t.out.find("over the GPU's BF16 dense peak 989 TFLOP/s") != std::string::npos);
}

}
