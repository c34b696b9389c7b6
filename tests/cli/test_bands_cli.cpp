// End-to-end error bands (docs/accuracy.md, "Error bands"): `tetrasim bands` and its --check, the band of
// simulate / search / plan, zero-shot and with a fitted file, and a bad fitted [band].

#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/run_tetrasim.hpp"

using tetra::test::approx;

namespace fs = std::filesystem;

namespace {

using Run = tetra::test::CliRun;
using tetra::test::slurp;

const std::string kCsv = "tests/data/fit/hagemann_13b_32gpu.csv";

Run tetrasim(const std::string& args) { return tetra::test::run_tetrasim(args, 300); }

fs::path scratch() { return tetra::test::scratch_dir("bands_scratch"); }

void write(const fs::path& p, const std::string& text) { tetra::test::write_text(p, text); }

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("bands: signed errors per generation, leave one file out, -o and --check") {
    const fs::path out = scratch() / "bands.toml";
    const Run r = tetrasim("bands " + kCsv + " --commit test -o '" + out.string() + "' --json");
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    // 17 step-time rows of one A100 sweep: 14 predicted, 2 the memory model predicts not to
    // fit and 1 invalid layout left out (the outcome rows are not step times).
    REQUIRE(j["per_row"].size() == 14);
    REQUIRE(j["excluded"].size() == 3);
    CHECK(j["excluded"][0]["reason"] == "predicted out of memory");
    CHECK(j["excluded"][2]["id"] == "hag23-13b2k32sp-131876-tp3");
    const auto& amp = j["frameworks"]["deepspeed"];  // Hagemann et al. ran a DeepSpeed-style trainer
    CHECK(amp["rows"] == 14);
    CHECK(amp["low_error"].get<double>() < amp["high_error"].get<double>());
    for (const auto& row : j["per_row"]) {
      CHECK(row["error"].get<double>() ==
            approx(row["predicted_s"].get<double>() / row["measured_s"].get<double>() - 1).epsilon(1e-4));
    }
    // One file: leaving it out leaves no rows, so there is no band to check it against.
    REQUIRE(j["coverage"].size() == 1);
    CHECK(j["coverage"][0]["band_rows"] == 0);
    CHECK(j["coverage"][0]["inside"].is_null());

    const std::string text = slurp(out);
    CHECK(text.find("commit = \"test\"") != std::string::npos);
    CHECK(text.find("[band.deepspeed]\nrows = 14\n") != std::string::npos);
    const Run ok = tetrasim("bands --check '" + out.string() + "'");
    CAPTURE(ok.err);
    CHECK(ok.code == 0);
    CHECK(ok.out.find("is up to date") != std::string::npos);

    // A band typed in by hand no longer matches what the rows give.
    std::string edited = text;
    const auto at = edited.find("high_error = ");
    edited.replace(at, edited.find('\n', at) - at, "high_error = 0.5");
    write(out, edited);
    const Run stale = tetrasim("bands --check '" + out.string() + "'");
    CHECK(stale.code == 1);
    CHECK(stale.err.find("differs from the bands the measurement files give now (run make error-bands)") !=
          std::string::npos);
  }

  TEST_CASE("simulate: the zero-shot band of the run's framework, in JSON and text") {
    const Run r = tetrasim("simulate scenarios/default.toml --json");
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto& b = j["step_time_band_s"];
    CHECK(b["basis"] == "zero-shot");
    CHECK(b["framework"] == "megatron");
    CHECK(b["rows"].get<int>() >= 10);
    const double step = j["step_time_s"].get<double>();
    CHECK(b["low"].get<double>() == approx(step / (1 + b["high_error"].get<double>())).epsilon(1e-5));
    CHECK(b["high"].get<double>() == approx(step / (1 + b["low_error"].get<double>())).epsilon(1e-5));
    const Run t = tetrasim("simulate scenarios/default.toml");
    REQUIRE(t.code == 0);
    CHECK(t.out.find("step time band") != std::string::npos);
    CHECK(t.out.find("published Megatron-Core rows") != std::string::npos);
  }

  TEST_CASE("search: every ranked layout carries its band") {
    const Run r = tetrasim("search scenarios/default.toml --top 3 --json");
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["step_time_band"]["framework"] == "megatron");
    REQUIRE(j["layouts"].size() == 3);
    for (const auto& l : j["layouts"]) {
      CHECK(l["step_time_band_s"]["low"].get<double>() < l["step_time_band_s"]["high"].get<double>());
    }
  }

  TEST_CASE("fit -o records the cross-validated band that --fit uses, and old files say they have none") {
    const fs::path f = scratch() / "f.toml";
    const Run r = tetrasim("fit " + kCsv + " --factors gemm,inter_node -o '" + f.string() + "' --json");
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["band"]["rows"] == 16);
    CHECK(j["band"]["low_error"].get<double>() < j["band"]["high_error"].get<double>());
    CHECK(slurp(f).find("[band]\nscheme = \"5-fold") != std::string::npos);

    const Run s = tetrasim("simulate scenarios/default.toml --fit '" + f.string() + "' --json");
    REQUIRE(s.code == 0);
    const auto sj = nlohmann::json::parse(s.out);
    CHECK(sj["step_time_band_s"]["basis"] == "fit");
    CHECK(sj["step_time_band_s"]["low_error"] == j["band"]["low_error"]);

    const fs::path old = scratch() / "old.toml";
    write(old, "[factors.gemm]\nvalue = 0.9\n");
    const Run o = tetrasim("simulate scenarios/default.toml --fit '" + old.string() + "' --json");
    REQUIRE(o.code == 0);
    const auto oj = nlohmann::json::parse(o.out);
    CHECK(oj["step_time_band_s"]["low"].is_null());
    CHECK(oj["step_time_band_s"]["note"].get<std::string>().find("has no [band] table") != std::string::npos);
  }

  TEST_CASE("a bad [band] in a fitted file: one line naming file, line and key, exit 1") {
    const fs::path f = scratch() / "bad.toml";
    write(f, "[band]\nrows = 12\nlow_quantile = 0.1\nhigh_quantile = 0.9\nlow_error = -0.1\nhigh_error = \"x\"\n");
    const Run r = tetrasim("simulate scenarios/default.toml --fit '" + f.string() + "'");
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "tetrasim: " + f.string() + ":6:14: [band].high_error: expected a number\n");
  }

TEST_CASE("bands: a row the memory model predicts not to fit is left out, with its reason") {
  // The 13B row of the sweep above at micro-batch 64: 64 x 2048 tokens of a 40-layer model's
  // activations on one A100 80GB, far beyond its capacity.
  const std::string text = slurp(kCsv);
  const auto header_end = text.find('\n') + 1;
  const auto row_end = text.find('\n', header_end) + 1;
  std::string row = text.substr(header_end, row_end - header_end);
  const std::string cells = ",32,1,1,1,1,1,2048,";
  const auto at = row.find(cells);
  REQUIRE(at != std::string::npos);
  row.replace(at, cells.size(), ",32,1,1,1,1,64,2048,");
  const fs::path csv = fs::path(kCsv).parent_path() / "bands_oom_scratch.csv";
  write(csv, text.substr(0, header_end) + row);
  const Run r = tetrasim("bands '" + csv.string() + "' --json");
  fs::remove(csv);
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["per_row"].empty());
  REQUIRE(j["excluded"].size() == 1);
  CHECK(j["excluded"][0]["reason"] == "predicted out of memory");
}
}
