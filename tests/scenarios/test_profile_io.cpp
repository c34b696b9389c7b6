// Calibration profile TOML (docs/calibration.md): round trip and file:line:col errors.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <filesystem>
#include <fstream>
#include <string>

#include "tetra/calib/tables.hpp"
#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/base/error.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/scenarios/profile_io.hpp"
#include "tetra/scenarios/scenario.hpp"

using tetra::test::approx;
using namespace tetra;
using namespace tetra::scenarios;

namespace {

/// The message of the UserError `f` throws ("" when it throws none).
template <class F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

std::string error_of(const std::string& text) {
  return error_message([&] { (void)parse_profile(text, "p.toml"); });
}

std::string fitted_error_of(const std::string& text) {
  return error_message([&] { (void)parse_fitted(text, "f.toml"); });
}

}  // namespace

TEST_SUITE("scenarios") {
  TEST_CASE("profile: format then parse gives the same profile, byte for byte") {
    auto c = hw::find_cluster_preset("dgx-h100");
    REQUIRE(c);
    costmodel::Profile p = costmodel::builtin_profile(*c);
    p.meta.driver = "550.54.15";
    p.meta.date = "2026-11-22 \"quoted\"";
    p.meta.l2_bytes = 52428800;
    p.gemm.push_back({8192, 1280, 8192, "bf16", 1.2345678901234567e-4});
    p.attention.push_back({1, 8192, 8, 1, 128, true, costmodel::AttentionPass::bwd, 3.25e-3});
    p.memory_bound.push_back({"rmsnorm", 33554432, 1.5e-5});
    p.collective.push_back({"all_reduce", 8, 8, 1073741824, 4.0e-3, "", ""});
    p.collective.push_back({"all_gather", 16, 8, 1048576, 5.0e-5, "ring", "simple"});
    p.fit.collectives.push_back({"all_reduce", 8, 8, 2.5e-5, 4.8e11, "", ""});
    p.fit.memory_bound.push_back({"adam", 2e-6, 3.0e12});
    const std::string text = format_profile(p);
    const costmodel::Profile q = parse_profile(text, "round.toml");
    CHECK(format_profile(q) == text);
    CHECK(q.meta.nccl == "2.30.7");
    CHECK(q.meta.date == p.meta.date);
    CHECK(q.meta.device_memory_bytes == p.meta.device_memory_bytes);
    CHECK(q.meta.l2_bytes == 52428800);
    REQUIRE(q.gemm.size() == 1);
    CHECK(q.gemm[0].seconds == p.gemm[0].seconds);  // shortest round-trip text: exact
    CHECK(q.attention[0].pass == costmodel::AttentionPass::bwd);
    CHECK(q.collective[1].algorithm == "ring");
    CHECK(q.fit.valid);
    CHECK(q.fit.gemm_peak_flops == approx(794.5e12 * 1377.3 / 1402.6));  // 780.17 sustained
    CHECK(q.fit.collectives.size() == 1);
    CHECK(q.fit.memory_bound[0].Bps == approx(3.0e12));
  }

  TEST_CASE("profile: no [fit] loads with fit.valid == false") {
    const auto p = parse_profile("[meta]\ngpu = \"H100\"\n\n[[gemm]]\nm = 1\nn = 2\nk = 3\nseconds = 1e-6\n", "p.toml");
    CHECK_FALSE(p.fit.valid);
    CHECK(p.gemm.size() == 1);
    CHECK(p.gemm[0].dtype == "bf16");
  }

  TEST_CASE("profile: errors name file, line, column and key") {
    // unknown key on line 3, column 1
    CHECK(error_of("[meta]\ngpu = \"x\"\ncolour = 1\n") == "p.toml:3:1: [meta].colour: unknown key (expected one of: "
                                                           "gpu, driver, cuda, cublas, cudnn, nccl, date, source, hosts, "
                                                           "gpus_per_node, device_memory, sms, l2_cache)");
    // wrong type
    CHECK(error_of("[[gemm]]\nm = 1\nn = \"two\"\nk = 3\nseconds = 1.0\n").find("p.toml:3:5: [[gemm]] #1.n: expected an integer") == 0);
    // missing key: reported at the row's table
    CHECK(error_of("[[gemm]]\nm = 1\nn = 2\nseconds = 1.0\n").find("p.toml:1:1: [[gemm]] #1.k: missing key") == 0);
    // bad enum value
    CHECK(error_of("[[collective]]\nop = \"allreduce\"\nranks = 8\nbytes = 1.0\nseconds = 1.0\n")
              .find("[[collective]] #1.op: unknown value \"allreduce\"") != std::string::npos);
    // non-positive time
    CHECK(error_of("[[memory_bound]]\nkernel = \"adam\"\nbytes = 10\nseconds = 0\n")
              .find("p.toml:4:11: [[memory_bound]] #1.seconds: expected a positive number") == 0);
    // unknown table
    const std::string table_error = error_of("[gpu]\nx = 1\n");
    CAPTURE(table_error);
    CHECK(table_error.find("p.toml:1:") == 0);
    CHECK(table_error.find(": gpu: unknown table") != std::string::npos);
    // TOML syntax error keeps the parser's position
    CHECK(error_of("[meta]\ngpu = \n").find("p.toml:2:") == 0);
    // reading a file that does not exist names it
    CHECK_THROWS_AS((void)read_profile("/nonexistent/profile.toml"), UserError);
  }
}

TEST_SUITE("scenarios") {
TEST_CASE("profile: a profile without [fit] is fitted when a scenario loads it") {
  // A measured table with no fit: the recorded synthetic H100 rows of tests/data/calib.
  costmodel::Profile rows =
      calib::read_tables_csv(std::string(TETRA_SOURCE_DIR) + "/tests/data/calib/synthetic_h100.csv");
  rows.fit = {};
  REQUIRE_FALSE(rows.fit.valid);
  REQUIRE_FALSE(rows.gemm.empty());
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "tetrasim_test_profile_refit";
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "node.profile.toml") << format_profile(rows);
    std::ofstream(dir / "s.toml") << "[model]\npreset = \"llama3.1-8b\"\n"
                                     "[cluster]\npreset = \"dgx-h100\"\nnodes = 1\n"
                                     "profile = \"node.profile.toml\"\n"
                                     "[training]\nseq_len = 4096\nglobal_batch = 8\n"
                                     "[layout]\ntp = 8\n";
  }
  CHECK(format_profile(rows).find("[fit]") == std::string::npos);
  const Scenario sc = load_scenario((dir / "s.toml").string());
  REQUIRE(sc.profile.has_value());
  CHECK(sc.profile->fit.valid);
  // The synthetic table was generated with a 760 TFLOP/s GEMM peak (tests/calib/synthetic.hpp);
  // the refit recovers it within the 2% the calibration tests demand.
  CHECK(sc.profile->fit.gemm_peak_flops == approx(760e12).epsilon(0.02));
  std::filesystem::remove_all(dir);
}
}

TEST_SUITE("scenarios") {
  TEST_CASE("fitted factors: format then parse gives the same fit, byte for byte") {
    fit::FitSummary s;
    s.csv = "data/validation/hagemann2023.csv";
    s.cluster = "dgx-a100-80gb";
    s.rows = {"a", "b \"quoted\""};
    s.rms_error = 0.061;
    s.mape = 0.042;
    s.iterations = 7;
    s.converged = true;
    for (costmodel::Factor f : costmodel::kFactors) {
      fit::FactorFit ff;
      ff.factor = f;
      ff.lower = fit::bound(f).lower;
      ff.upper = fit::bound(f).upper;
      ff.value = f == costmodel::Factor::step_overhead ? 0.25 : 0.1 + 0.9 * ff.upper / 1.6;
      ff.status = f == costmodel::Factor::attention ? fit::FactorStatus::unconstrained : fit::FactorStatus::fitted;
      ff.std_error = f == costmodel::Factor::attention ? -1 : 0.0123;
      ff.share = 0.2;
      s.factors.set(f, ff.value);
      s.per_factor.push_back(ff);
    }
    const std::string text = format_fitted(s);
    CHECK(text.find("value_s = 0.25") != std::string::npos);    // seconds say so in the key
    CHECK(text.find("upper = 1.15\n") != std::string::npos);    // shortest text of the double
    const fit::FitSummary q = parse_fitted(text, "round.toml");
    CHECK(format_fitted(q) == text);
    CHECK(q.factors == s.factors);
    CHECK(q.rows == s.rows);
    CHECK(q.per_factor[1].status == fit::FactorStatus::unconstrained);
    CHECK(q.per_factor[1].std_error < 0);
  }

  TEST_CASE("fitted factors: a hand-written file with one factor, the others stay neutral") {
    const fit::FitSummary q = parse_fitted("[factors.inter_node]\nvalue = 0.25\n", "f.toml");
    CHECK(q.factors.inter_node == 0.25);
    CHECK(q.factors.gemm == 1.0);
    CHECK(q.factors.host == 1.0);  // files fitted before the host factor existed read as before
    CHECK(q.factors.step_overhead_s == 0.0);
    // An empty file is refused rather than read as "no factors" (a truncated or wrong file).
    CHECK_THROWS_WITH(parse_fitted("", "f.toml"), doctest::Contains("f.toml: empty"));
  }

  TEST_CASE("fitted factors: errors name the file, line, column and key") {
    CHECK(fitted_error_of("[factors.tp]\nvalue = 1.0\n") ==
          "f.toml:1:10: [factors].tp: unknown factor (expected one of: gemm, attention, memory_bound, "
          "intra_node, inter_node, host, step_overhead)");
    CHECK(fitted_error_of("[factors.gemm]\nvalue = 3.0\n") ==
          "f.toml:2:9: [factors.gemm].value: outside the factor's bound [0.5, 1.15]");
    CHECK(fitted_error_of("[factors.step_overhead]\nvalue = 1.0\n") ==
          "f.toml:2:1: [factors.step_overhead].value: unknown key (expected one of: value_s, lower_s, upper_s, "
          "std_error_s, share, status)");
    CHECK(fitted_error_of("[factors.gemm]\nlower = 0.5\n") == "f.toml:1:1: [factors.gemm].value: missing key");
    CHECK(fitted_error_of("[factors.gemm]\nvalue = 1.0\nspeed = 2\n") ==
          "f.toml:3:1: [factors.gemm].speed: unknown key (expected one of: value, lower, upper, std_error, "
          "share, status)");
    CHECK(fitted_error_of("[factors.gemm]\nvalue = \"fast\"\n") == "f.toml:2:9: [factors.gemm].value: expected a number");
    CHECK(fitted_error_of("[factors.gemm]\nvalue = 1.0\nstatus = \"great\"\n") ==
          "f.toml:3:10: [factors.gemm].status: unknown value \"great\" (expected one of: fitted, at_bound, "
          "unconstrained, not_fitted)");
    CHECK(fitted_error_of("[fitted]\nrows = [1]\n") == "f.toml:2:9: [fitted].rows: expected a string (a row id)");
    CHECK(fitted_error_of("[gemm]\n") == "f.toml:1:2: gemm: unknown table (expected fitted, factors, band)");
    CHECK(fitted_error_of("factors = 3\n") == "f.toml:1:11: [factors]: expected a table of [factors.NAME] tables");
    CHECK(fitted_error_of("[factors.gemm\n").find("f.toml:1") == 0);
  }

  TEST_CASE("fitted factors: the [band] table round trip, and files without one have none") {
    fit::FitSummary s = parse_fitted("[factors.gemm]\nvalue = 0.9\n", "f.toml");
    CHECK_FALSE(s.band);
    costmodel::ErrorBand b;
    b.rows = 19;
    b.low_error = -0.055442;
    b.high_error = 0.060841;
    s.band = b;
    s.band_scheme = "5-fold";
    const std::string text = format_fitted(s);
    CHECK(text.find("[band]\nscheme = \"5-fold\"\nrows = 19\nlow_quantile = 0.1\nhigh_quantile = 0.9\n"
                    "low_error = -0.055442\nhigh_error = 0.060841\n") != std::string::npos);
    const fit::FitSummary q = parse_fitted(text, "round.toml");
    REQUIRE(q.band);
    CHECK(q.band->rows == 19);
    CHECK(q.band->low_error == -0.055442);
    CHECK(q.band->high_error == 0.060841);
    CHECK(q.band_scheme == "5-fold");
    CHECK(format_fitted(q) == text);
    // Too few rows: the count alone, read back as a band that is not available.
    s.band->rows = 4;
    const fit::FitSummary few = parse_fitted(format_fitted(s), "few.toml");
    REQUIRE(few.band);
    CHECK_FALSE(few.band->available());
  }

  TEST_CASE("fitted factors: a bad [band] names the file, line, column and key") {
    const std::string head = "[band]\nrows = 12\nlow_quantile = 0.1\nhigh_quantile = 0.9\n";
    CHECK(fitted_error_of(head + "low_error = -0.1\nhigh_error = \"wide\"\n") ==
          "f.toml:6:14: [band].high_error: expected a number");
    CHECK(fitted_error_of(head + "low_error = -1.5\nhigh_error = 0.1\n") ==
          "f.toml:5:13: [band].low_error: expected a signed error above -1");
    CHECK(fitted_error_of(head + "low_error = 0.2\nhigh_error = 0.1\n") ==
          "f.toml:6:14: [band].high_error: is below low_error");
    CHECK(fitted_error_of(head + "low_error = -0.1\n") == "f.toml:1:1: [band].high_error: missing key");
    CHECK(fitted_error_of(head + "low_error = -0.1\nhigh_error = 0.1\nwidth = 2\n") ==
          "f.toml:7:1: [band].width: unknown key (expected one of: rows, low_quantile, high_quantile, low_error, "
          "high_error, scheme)");
    CHECK(fitted_error_of("[band]\nrows = -3\nlow_quantile = 0.1\nhigh_quantile = 0.9\n") ==
          "f.toml:2:8: [band].rows: expected an integer >= 0");
    CHECK(fitted_error_of("[band]\nrows = 3\nlow_quantile = 0.9\nhigh_quantile = 0.1\n") ==
          "f.toml:4:17: [band].high_quantile: expected low_quantile < high_quantile <= 1");
    CHECK(fitted_error_of("[band]\nrows = 3\nlow_quantile = 0.1\nhigh_quantile = 0.9\nlow_error = 0.1\n") ==
          "f.toml:5:13: [band].low_error: a band of fewer than 10 rows has no errors");
  }

  TEST_CASE("error bands file: format then parse, and the built-in one names its sources and frameworks") {
    costmodel::RegimeBands b;
    b.command = "tetrasim bands a.csv b.csv";
    b.commit = "abc1234";
    b.sources = {"a.csv", "b.csv"};
    costmodel::ErrorBand amp;
    amp.rows = 30;
    amp.low_error = -0.2;
    amp.high_error = 0.05;
    costmodel::ErrorBand bw;
    bw.rows = 3;
    b.entries = {{parallel::Framework::megatron, amp}, {parallel::Framework::fsdp, bw}};
    costmodel::BandCoverage c;
    c.file = "a.csv";
    c.framework = parallel::Framework::megatron;
    c.rows = 20;
    c.band = amp;
    c.band.rows = 10;
    c.inside = 15;
    b.coverage = {c};
    const std::string text = format_error_bands(b);
    const costmodel::RegimeBands q = parse_error_bands(text, "bands.toml");
    CHECK(format_error_bands(q) == text);
    CHECK(q.commit == "abc1234");
    CHECK(q.sources == b.sources);
    CHECK(q.find(parallel::Framework::megatron).high_error == 0.05);
    CHECK_FALSE(q.find(parallel::Framework::fsdp).available());
    CHECK(q.find(parallel::Framework::deepspeed).rows == 0);
    REQUIRE(q.coverage.size() == 1);
    CHECK(q.coverage[0].inside == 15);

    CHECK(error_message([] { (void)parse_error_bands("[band.jax]\nrows = 1\n", "e.toml"); }) ==
          "e.toml:1:7: [band.jax]: unknown framework (expected megatron, deepspeed, fsdp, all)");
    CHECK(error_message([] {
            (void)parse_error_bands("[[coverage]]\nfile = \"a\"\nframework = \"megatron\"\nrows = 2\nband_rows = 0\ninside = 3\n",
                                    "e.toml");
          }) == "e.toml:6:10: [[coverage]] #1.inside: exceeds rows");

    const costmodel::RegimeBands& builtin = builtin_error_bands();
    CHECK_FALSE(builtin.sources.empty());
    CHECK(builtin.find(parallel::Framework::megatron).available());
    CHECK_FALSE(builtin.coverage.empty());
  }
}
