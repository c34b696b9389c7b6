// End-to-end `tetrasim fit`, `validate --cv` and `--fit` on simulate / search / validate
// (fit/README.md), on the 13B 32-GPU sweep of Hagemann et al. 2023 (tests/data/fit/), and every
// bad input: one line on stderr, exit 1 (2 for usage), no file written.

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

fs::path scratch() { return tetra::test::scratch_dir("fit_scratch"); }

void write(const fs::path& p, const std::string& text) { tetra::test::write_text(p, text); }

/// The test CSV's header and its first `n` rows; the second row's cluster cell replaced by
/// `second_cluster` when given; every other step time scaled by `scale` (from the third row on).
std::string csv_rows(int n, const std::string& second_cluster = "", double scale = 1.0) {
  std::ifstream in(fs::path(TETRA_SOURCE_DIR) / kCsv);
  std::string line, out;
  const std::string rel = "../../../data/validation/models/";
  const std::string abs = std::string(TETRA_SOURCE_DIR) + "/data/validation/models/";
  for (int i = 0; std::getline(in, line) && i <= n; ++i) {
    const auto at = line.find(rel);
    if (at != std::string::npos) line.replace(at, rel.size(), abs);
    if (i == 2 && !second_cluster.empty()) {
      const auto c = line.find("dgx-a100-80gb");
      line.replace(c, 13, second_cluster);
    }
    const auto metric = line.find(",step_time_s,");
    if (scale != 1.0 && i >= 3 && i % 2 == 1 && metric != std::string::npos) {
      const auto from = metric + 13;
      const auto to = line.find(',', from);
      line.replace(from, to - from, std::to_string(std::stod(line.substr(from, to - from)) * scale));
    }
    out += line + "\n";
  }
  return out;
}

/// Exit 1 with one line on stderr that contains `what`.
void check_user_error(const Run& r, const std::string& what) {
  CAPTURE(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find(what) != std::string::npos);
  CHECK(r.err.find('\n') == r.err.size() - 1);
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("fit: factors with bounds and constraint, listed skips, a fitted file the other commands take") {
    const fs::path out = scratch() / "f.toml";
    const Run r = tetrasim("fit " + kCsv + " --factors gemm,memory_bound,intra_node,inter_node -o '" +
                           out.string() + "' --json");
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["usable"] == 16);
    CHECK(j["fitted_rows"].size() == 16);
    REQUIRE(j["skipped"].size() == 3);
    CHECK(j["skipped"][0]["reason"] == "no step time (metric outcome)");
    CHECK(j["skipped"][2]["id"] == "hag23-13b2k32sp-131876-tp3");
    for (const char* name : {"gemm", "attention", "memory_bound", "intra_node", "inter_node", "step_overhead"}) {
      CAPTURE(name);
      const auto& f = j["factors"][name];
      CHECK(f["value"].get<double>() >= f["lower"].get<double>());
      CHECK(f["value"].get<double>() <= f["upper"].get<double>());
      CHECK(f.contains("std_error"));
      CHECK(f.contains("share"));
    }
    CHECK(j["factors"]["attention"]["status"] == "not_fitted");
    CHECK(j["factors"]["gemm"]["status"] == "fitted");
    CHECK(j["factors"]["gemm"]["std_error"].get<double>() > 0);
    const auto& all = j["on_fitted_rows"]["all"];
    CHECK(all["fitted"]["mape"].get<double>() < all["zero_shot"]["mape"].get<double>());
    const std::string text = slurp(out);
    CHECK(text.find("[factors.gemm]") != std::string::npos);
    CHECK(text.find("hag23-13b2k32sp-131873-step") != std::string::npos);

    // validate --fit predicts the fitted rows as fit reported them.
    const Run v = tetrasim("validate " + kCsv + " --fit '" + out.string() + "' --json");
    REQUIRE(v.code == 0);
    const auto vj = nlohmann::json::parse(v.out);
    CHECK(vj["metrics"]["step_time_s"]["mape"].get<double>() ==
          approx(all["fitted"]["mape"].get<double>()).epsilon(1e-4));
    CHECK(vj["fit"] == out.string());

    // The text report prints the factor table.
    const Run t = tetrasim("fit " + kCsv + " --factors gemm,inter_node");
    REQUIRE(t.code == 0);
    CHECK(t.out.find("factor ") != std::string::npos);
    CHECK(t.out.find("skipped   2  no step time (metric outcome)") != std::string::npos);
  }

  TEST_CASE("simulate and search take --fit: a slower cluster gives slower steps") {
    const fs::path f = scratch() / "slow.toml";
    write(f, "[factors.inter_node]\nvalue = 0.25\n\n[factors.step_overhead]\nvalue_s = 1.5\n");
    const Run plain = tetrasim("simulate scenarios/default.toml --json");
    const Run slow = tetrasim("simulate scenarios/default.toml --fit '" + f.string() + "' --json");
    REQUIRE(plain.code == 0);
    REQUIRE(slow.code == 0);
    const double a = nlohmann::json::parse(plain.out)["step_time_s"].get<double>();
    const double b = nlohmann::json::parse(slow.out)["step_time_s"].get<double>();
    CHECK(b > a + 1.5);
    const Run s = tetrasim("search scenarios/default.toml --top 3 --fit '" + f.string() + "' --json");
    REQUIRE(s.code == 0);
    const auto sj = nlohmann::json::parse(s.out);
    REQUIRE(sj["layouts"].size() == 3);
    CHECK(sj["layouts"][0]["step_time_s"].get<double>() > 1.5);
  }

  TEST_CASE("fit --take: fitted on N rows chosen without their measurements, scored on the rest") {
    const Run r = tetrasim("fit " + kCsv + " --take 4 --factors gemm,memory_bound,inter_node --json");
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["fitted_rows"].size() == 4);
    CHECK(j["on_other_rows"]["all"]["n"] == 12);
    int held = 0;
    for (const auto& row : j["per_row"]) held += row["fitted"] ? 0 : 1;
    CHECK(held == 12);
    // The choice does not depend on the measured values: the same rows with other step times.
    const fs::path other = scratch() / "other_times.csv";
    write(other, csv_rows(19, "", 1.7));
    const Run again = tetrasim("fit '" + other.string() + "' --take 4 --factors gemm,memory_bound,inter_node --json");
    REQUIRE(again.code == 0);
    const auto k = nlohmann::json::parse(again.out);
    CHECK(k["fitted_rows"] == j["fitted_rows"]);
    double a = 0, b = 0;
    for (const auto& row : j["per_row"]) a += row["measured"].get<double>();
    for (const auto& row : k["per_row"]) b += row["measured"].get<double>();
    CHECK(b > a * 1.2);  // seven of the sixteen step times are 1.7 times longer
  }

  TEST_CASE("validate --cv: K folds, leave one out, zero-shot next to cross-validated") {
    const Run r = tetrasim("validate " + kCsv + " --cv 4 --factors gemm,memory_bound,intra_node --json");
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto& cv = j["cv"];
    CHECK(cv["folds"] == 4);
    CHECK(cv["rows"] == 16);
    CHECK(cv["fits"].size() == 4);
    CHECK(cv["fits"][0]["rows_fitted"] == 12);
    CHECK(cv["per_row"].size() == 16);
    CHECK(cv["per_row"][5]["fold"] == 2);  // row i in fold i mod K (1-based)
    CHECK(cv["all"]["zero_shot"]["mape"].get<double>() ==
          approx(j["metrics"]["step_time_s"]["mape"].get<double>()));
    CHECK(cv["all"]["cv"]["mape"].get<double>() > 0);
    const Run t = tetrasim("validate " + kCsv + " --cv loo --factors gemm");
    REQUIRE(t.code == 0);
    CHECK(t.out.find("cross-validation  leave one out, 16 step-time rows, factors gemm") != std::string::npos);
    CHECK(t.out.find("MAPE CV") != std::string::npos);
  }

  TEST_CASE("bad inputs: one line, exit 1 (2 for usage), no file written") {
    const fs::path dir = scratch();
    const fs::path out = dir / "never.toml";
    SUBCASE("fewer rows than factors") {
      write(dir / "three.csv", csv_rows(3));
      check_user_error(tetrasim("fit '" + (dir / "three.csv").string() + "' -o '" + out.string() + "'"),
                       "fit: 3 step-time rows for 6 factors");
      CHECK_FALSE(fs::exists(out));
    }
    SUBCASE("--take fewer rows than factors") {
      check_user_error(tetrasim("fit " + kCsv + " --take 3 -o '" + out.string() + "'"),
                       "--take: take: 3 rows cannot fit 6 factors");
      CHECK_FALSE(fs::exists(out));
    }
    SUBCASE("unknown factor") {
      check_user_error(tetrasim("fit " + kCsv + " --factors gemm,tp -o '" + out.string() + "'"),
                       "--factors: tp: unknown factor");
      CHECK_FALSE(fs::exists(out));
    }
    SUBCASE("no file") {
      check_user_error(tetrasim("fit missing.csv -o '" + out.string() + "'"), "missing.csv");
      CHECK_FALSE(fs::exists(out));
    }
    SUBCASE("no row of the cluster asked for") {
      check_user_error(tetrasim("fit " + kCsv + " --cluster dgx-h100 -o '" + out.string() + "'"),
                       "fit: no usable step-time rows");
    }
    SUBCASE("rows of two clusters") {
      write(dir / "two.csv", csv_rows(8, "dgx-a100-40gb"));
      check_user_error(tetrasim("fit '" + (dir / "two.csv").string() + "' --factors gemm"),
                       "clusters (dgx-a100-40gb, dgx-a100-80gb); choose one with --cluster");
      const Run ok = tetrasim("fit '" + (dir / "two.csv").string() + "' --factors gemm --cluster dgx-a100-80gb --json");
      REQUIRE(ok.code == 0);
      CHECK(nlohmann::json::parse(ok.out)["usable"] == 7);
    }
    SUBCASE("a fitted file outside the bounds") {
      write(dir / "bad.toml", "[factors.gemm]\nvalue = 3.0\n");
      check_user_error(tetrasim("simulate scenarios/default.toml --fit '" + (dir / "bad.toml").string() + "'"),
                       "bad.toml:2:9: [factors.gemm].value: outside the factor's bound [0.5, 1.15]");
      check_user_error(tetrasim("search scenarios/default.toml --fit '" + (dir / "bad.toml").string() + "'"),
                       "outside the factor's bound");
      check_user_error(tetrasim("validate " + kCsv + " --fit '" + (dir / "bad.toml").string() + "'"),
                       "outside the factor's bound");
    }
    SUBCASE("--cv values") {
      check_user_error(tetrasim("validate " + kCsv + " --cv 1"), "--cv: 1: expected a fold count of 2 or more");
      check_user_error(tetrasim("validate " + kCsv + " --cv some"), "--cv: some: expected a fold count");
      check_user_error(tetrasim("validate " + kCsv + " --cv 17"), "more folds than the 16 usable step-time rows");
      check_user_error(tetrasim("validate " + kCsv + " --cv sweep --factors gemm"),
                       "validate --cv: fold 1 leaves 0 rows to fit 1 factor;");
      CHECK(tetrasim("validate " + kCsv + " --cv 4 --fit x.toml").code == 2);
      CHECK(tetrasim("validate " + kCsv + " --factors gemm").code == 2);
    }
  }
}
