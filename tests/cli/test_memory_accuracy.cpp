// End-to-end accuracy of the memory model on published OOM boundaries: Hagemann et al. 2023
// (arXiv 2311.05610), 964 labelled runs (401 ok, 563 OOM) on A100 80GB
// (data/validation/hagemann2023.csv). `tetrasim validate` predicts `oom` when the peak
// reserved memory of some stage exceeds the GPU's capacity; the outcome accuracy must stay
// at or above 95 %.

#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "support/run_tetrasim.hpp"

using tetra::test::approx;

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("validate hagemann2023.csv: fit/OOM accuracy >= 96 %") {
    const fs::path csv = fs::path(TETRA_SOURCE_DIR) / "data" / "validation" / "hagemann2023.csv";
    REQUIRE_MESSAGE(fs::exists(csv), "missing " << csv.string());
    const fs::path dir = fs::path(TETRA_BINARY_DIR) / "tests" / "cli_scratch";
    fs::create_directories(dir);
    const fs::path out = dir / ("memory_accuracy_" + std::to_string(::getpid()) + ".json");
    const std::string cmd = "cd '" + std::string(TETRA_SOURCE_DIR) + "' && '" +
                            std::string(TETRA_BINARY_DIR) +
                            "/cli/tetrasim' validate data/validation/hagemann2023.csv --json >'" +
                            out.string() + "' 2>/dev/null </dev/null";
    const int status = std::system(cmd.c_str());
    const std::string text = read_all(out);
    fs::remove(out);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    const nlohmann::json j = nlohmann::json::parse(text);
    REQUIRE(j.contains("outcome"));
    const auto& o = j["outcome"];
    const int n = o["n"].get<int>();
    const auto& cm = o["confusion"];
    const int fit_fit = cm["fit_fit"].get<int>();
    const int fit_oom = cm["fit_oom"].get<int>();
    const int oom_fit = cm["oom_fit"].get<int>();
    const int oom_oom = cm["oom_oom"].get<int>();
    MESSAGE("outcome rows " << n << ": fit_fit " << fit_fit << ", fit_oom " << fit_oom
                            << ", oom_fit " << oom_fit << ", oom_oom " << oom_oom);
    // The file labels 964 runs (401 ok + 563 OOM). Rows the scenario checks reject (30B on
    // 8 or 16 stages: 60 layers do not split evenly) are listed as skipped, not predicted.
    int skipped_outcome = 0;
    for (const auto& s : j["skipped"]) {
      const std::string id = s["id"].get<std::string>();
      const bool is_outcome = id.size() > 3 && (id.ends_with("-ok") || id.ends_with("-oom"));
      skipped_outcome += is_outcome ? 1 : 0;
    }
    CHECK(n + skipped_outcome == 964);
    CHECK(n >= 900);
    CHECK(fit_fit + fit_oom + oom_fit + oom_oom == n);
    const double accuracy = o["accuracy"].get<double>();
    CHECK(accuracy == approx(static_cast<double>(fit_fit + oom_oom) / n));
    CHECK(accuracy >= 0.96);
  }
}

namespace {

/// The layout a published run used, as `tetrasim search --json` prints its rows.
struct Published {
  const char* scenario;
  int tp, pp, vp, mbs, ep;
  const char* recompute;
};

const Published kPublished[] = {
    {"scenarios/published-llama3-70b-fp8-h100.toml", 4, 8, 5, 1, 1, "none"},
    {"scenarios/published-llama31-405b-fp8-gb200.toml", 4, 16, 4, 1, 1, "none"},
    {"scenarios/published-deepseek-v3-gb200.toml", 1, 4, 4, 1, 64, "selective"},
    {"scenarios/published-qwen3-30b-a3b-h100.toml", 1, 1, 1, 1, 16, "none"},
    {"scenarios/published-torchtitan-llama3-8b-h100.toml", 1, 1, 1, 2, 1, "selective_op"},
    {"scenarios/published-mpt-7b-a100.toml", 1, 1, 1, 6, 1, "none"},
    {"scenarios/published-llama3-70b-fp8-gb200-offload.toml", 1, 1, 1, 2, 1, "none"},
};

}  // namespace

TEST_SUITE("cli") {
  TEST_CASE("search keeps the layouts of seven published runs (neither invalid nor pruned by memory)") {
    for (const Published& p : kPublished) {
      CAPTURE(p.scenario);
      const auto r = tetra::test::run_tetrasim(std::string("search ") + p.scenario + " --json", 300);
      CAPTURE(r.err);
      REQUIRE(r.code == 0);
      const auto j = nlohmann::json::parse(r.out);
      int rank = 0;
      int found = 0;
      for (const auto& row : j["layouts"]) {
        ++rank;
        const int ep = row.contains("ep") ? row["ep"].get<int>() : 1;
        if (row["tp"] == p.tp && row["pp"] == p.pp && row["vp"] == p.vp && row["mbs"] == p.mbs &&
            ep == p.ep && row["recompute"] == p.recompute) {
          found = rank;
          break;
        }
      }
      MESSAGE(std::string(p.scenario) << ": published layout ranked " << found << " of " << j["layouts"].size());
      CHECK(found > 0);
    }
  }

  TEST_CASE("bands: published runs the memory model calls out of memory, per file") {
    // Every step-time row of these files was measured, so the run fitted. The ceilings are
    // this build's counts (tetrasim bands data/validation/*.csv): llm-foundry, Megatron-Bridge
    // dense and torchtitan none; Fujii 2 of 168, Hagemann 12 of 401, Megatron-Bridge MoE 4 of 138.
    const auto r = tetra::test::run_tetrasim(
        "bands data/validation/fujii_llama31_8b.csv data/validation/hagemann2023.csv "
        "data/validation/llm_foundry.csv data/validation/megatron_bridge.csv "
        "data/validation/megatron_bridge_moe.csv data/validation/torchtitan.csv --json",
        600);
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    std::map<std::string, int> oom;
    for (const auto& e : j["excluded"]) {
      if (e["reason"] == "predicted out of memory") ++oom[e["file"].get<std::string>()];
    }
    CHECK(oom["data/validation/llm_foundry.csv"] == 0);
    CHECK(oom["data/validation/megatron_bridge.csv"] == 0);
    CHECK(oom["data/validation/torchtitan.csv"] == 0);
    CHECK(oom["data/validation/fujii_llama31_8b.csv"] <= 2);
    CHECK(oom["data/validation/hagemann2023.csv"] <= 12);
    CHECK(oom["data/validation/megatron_bridge_moe.csv"] <= 4);
  }

  TEST_CASE("validate fujii_llama31_8b.csv: completed runs fit, out-of-memory cells are caught") {
    // The second source of the fragmentation share: Fujii et al.'s Megatron-LM sweep, 168
    // completed runs and 124 "-" cells (out of memory or not run). This build: 166 / 168 and
    // 104 / 124 (the A100 40GB at the 40536 MiB it reports, not the label's 40 GiB).
    const auto r = tetra::test::run_tetrasim("validate data/validation/fujii_llama31_8b.csv --json", 300);
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    const auto& cm = j["outcome"]["confusion"];
    const int fit_fit = cm["fit_fit"].get<int>();
    const int fit_oom = cm["fit_oom"].get<int>();
    const int oom_fit = cm["oom_fit"].get<int>();
    const int oom_oom = cm["oom_oom"].get<int>();
    CHECK(fit_fit + fit_oom == 168);
    CHECK(oom_fit + oom_oom == 124);
    CHECK(fit_fit >= 0.97 * 168);
    CHECK(oom_oom >= 0.83 * 124);
  }

  TEST_CASE("memory: offloading with a framework that has none is one line naming file, line and key") {
    const fs::path dir = fs::path(TETRA_BINARY_DIR) / "tests" / "cli_scratch";
    fs::create_directories(dir);
    const fs::path f = dir / ("offload_fsdp_" + std::to_string(::getpid()) + ".toml");
    {
      std::ofstream o(f);
      o << "[model]\npreset = \"llama3.1-8b\"\n\n[cluster]\npreset = \"dgx-h100\"\nnodes = 1\n\n"
           "[training]\nseq_len = 8192\nglobal_batch = 8\nframework = \"fsdp\"\nzero_stage = 3\n\n"
           "[layout]\ntp = 1\npp = 1\nmbs = 1\noffload_layers = 8\n";
    }
    const auto r = tetra::test::run_tetrasim("memory '" + f.string() + "'");
    fs::remove(f);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find(f.string() + ":18:") != std::string::npos);
    CHECK(r.err.find("offload_layers") != std::string::npos);
    CHECK(r.err.find("fsdp") != std::string::npos);
  }
}
