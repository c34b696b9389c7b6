// tetrasim plan through the command line: N shards merged give the one-run output byte for
// byte; each candidate carries its step-time band; every bad input is exit 1 with one line on stderr naming the place, and no file.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/run_tetrasim.hpp"

using tetra::test::approx;
using tetra::test::CliRun;
using tetra::test::run_tetrasim;
using tetra::test::slurp;
namespace fs = std::filesystem;

namespace {

fs::path scratch() {
  const fs::path d = fs::path(TETRA_BINARY_DIR) / "tests" / "plan_scratch";
  fs::create_directories(d);
  return d;
}

/// Writes `text` to scratch()/name and returns the path.
std::string write(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

/// A small model and space (8 layers, 1-2 nodes): the whole plan runs in well under a second.
const std::string kHead = R"([model]
layers = 8
hidden = 1024
ffn_hidden = 4096
heads = 8
kv_heads = 4
vocab = 32000

[training]
seq_len = 2048
global_batch = 64

[search]
tp = [1, 2, 4]
pp = [1, 2]
mbs = [1, 2]
recompute = ["none", "full"]
schedule = ["1f1b", "zb-h1"]
)";

const std::string kPlan = kHead + R"(
[plan]
tokens = 2e11
deadline_days = 30
budget = 20000

[[plan.candidate]]
cluster = "dgx-h100"
gpus = "8..16"
price_per_gpu_hour = 2.5

[[plan.candidate]]
cluster = "dgx-a100-80gb"
gpus = [8, 16]
price_per_gpu_hour = 1.2

[[plan.candidate]]
name = "h200 spot"
cluster = "hgx-h200"
gpus = "8..24 step 8"
price_per_gpu_hour = 1.9
)";

/// One line on stderr that contains every piece of `parts`.
void check_one_line(const CliRun& r, std::initializer_list<const char*> parts, int code = 1) {
  CAPTURE(r.err);
  CHECK(r.code == code);
  CHECK(r.out.empty());
  REQUIRE(!r.err.empty());
  CHECK(r.err.find('\n') == r.err.size() - 1);
  for (const char* p : parts) CHECK(r.err.find(p) != std::string::npos);
}

}  // namespace

TEST_SUITE("plan") {

  TEST_CASE("plan: every candidate's band scales its step, days and cost alike") {
    const std::string sc = write("band.toml", kPlan);
    const CliRun r = run_tetrasim("plan '" + sc + "' --json");
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    int banded = 0;
    for (const auto& c : j["candidates"]) {
      if (!c["fits"].get<bool>()) continue;
      const auto& b = c["step_time_band_s"];
      CHECK(b["basis"] == "zero-shot");
      CHECK(b["framework"] == "megatron");  // the plan's [training] framework (Megatron-Core by default)
      if (b["low"].is_null()) continue;
      ++banded;
      const double step = c["step_time_s"].get<double>();
      const double days = c["days"].get<double>();
      const double cost = c["cost"].get<double>();
      CHECK(c["days_band"]["low"].get<double>() == approx(days * b["low"].get<double>() / step).epsilon(1e-4));
      CHECK(c["days_band"]["high"].get<double>() == approx(days * b["high"].get<double>() / step).epsilon(1e-4));
      CHECK(c["cost_band"]["high"].get<double>() == approx(cost * b["high"].get<double>() / step).epsilon(1e-4));
      // Energy is GPUs x power x hours x PUE: it scales with the days as the cost does.
      const double energy = c["energy_mwh"].get<double>();
      CHECK(c["energy_band"]["low"].get<double>() == approx(energy * b["low"].get<double>() / step).epsilon(1e-4));
      CHECK(c["energy_band"]["high"].get<double>() == approx(energy * b["high"].get<double>() / step).epsilon(1e-4));
    }
    CHECK(banded > 0);  // JSON rounds the step band to 1e-6 s: 1e-4 relative above
    const CliRun t = run_tetrasim("plan '" + sc + "'");
    REQUIRE(t.code == 0);
    CHECK(t.out.find("days band") != std::string::npos);
    CHECK(t.out.find("published Megatron-Core rows") != std::string::npos);
  }
  TEST_CASE("plan: N shards merged == one run, byte for byte") {
    const std::string sc = write("plan.toml", kPlan);
    const CliRun one = run_tetrasim("plan '" + sc + "' --json --csv '" + (scratch() / "one.csv").string() + "'");
    REQUIRE(one.code == 0);
    CHECK(one.out.find("\"pareto\"") != std::string::npos);
    for (const int n : {1, 3, 7}) {  // 7 shards of 7 candidates: one each; 1: the whole plan
      CAPTURE(n);
      std::string files;
      for (int i = 1; i <= n; ++i) {
        const std::string f = (scratch() / ("shard" + std::to_string(i) + "of" + std::to_string(n) + ".json")).string();
        const CliRun s = run_tetrasim("plan '" + sc + "' --shard " + std::to_string(i) + "/" + std::to_string(n) +
                                      " --out '" + f + "'");
        REQUIRE(s.code == 0);
        CHECK(s.out.empty());
        files += " '" + f + "'";
      }
      const std::string csv = (scratch() / "merged.csv").string();
      const CliRun merged = run_tetrasim("plan '" + sc + "' --json --csv '" + csv + "' --merge" + files);
      REQUIRE(merged.code == 0);
      CHECK(merged.out == one.out);
      CHECK(slurp(csv) == slurp(scratch() / "one.csv"));
    }
    // A shard on stdout is the same JSON as the one written with --out.
    const CliRun s1 = run_tetrasim("plan '" + sc + "' --shard 1/1");
    REQUIRE(s1.code == 0);
    const std::string whole = slurp(scratch() / "shard1of1.json");
    // Only the wall-time field may differ.
    auto without_seconds = [](std::string t) {
      const auto a = t.find("\"seconds\"");
      const auto b = t.find('\n', a);
      return t.erase(a, b - a);
    };
    CHECK(without_seconds(s1.out) == without_seconds(whole));
  }

  TEST_CASE("plan: shards keep PyTorch-native layouts (HSDP, selective_layer, compile)") {
    // A share carries every knob of the best layout: merged, it equals the one run.
    std::string text = kPlan;
    auto swap = [&](const std::string& from, const std::string& to) { text.replace(text.find(from), from.size(), to); };
    swap("global_batch = 64\n", "global_batch = 64\nzero_stage = 3\nframework = \"fsdp\"\n");
    swap("recompute = [\"none\", \"full\"]",
         "recompute = [\"selective_layer\", \"full\"]\nac_freq = [2, 4]\ndp_replicate = [1, 2]\ncompile = [true, false]");
    swap("schedule = [\"1f1b\", \"zb-h1\"]", "schedule = [\"1f1b\"]");
    const std::string sc = write("plan_torch.toml", text);
    const CliRun one = run_tetrasim("plan '" + sc + "' --json");
    REQUIRE(one.code == 0);
    CHECK(one.out.find("\"compile\": true") != std::string::npos);
    std::string files;
    for (int i = 1; i <= 3; ++i) {
      const std::string f = (scratch() / ("torch" + std::to_string(i) + "of3.json")).string();
      REQUIRE(run_tetrasim("plan '" + sc + "' --shard " + std::to_string(i) + "/3 --out '" + f + "'").code == 0);
      files += " '" + f + "'";
    }
    const CliRun merged = run_tetrasim("plan '" + sc + "' --json --merge" + files);
    REQUIRE(merged.code == 0);
    CHECK(merged.out == one.out);
  }

  TEST_CASE("plan: every candidate's energy, utilization and tokens/s per GPU in JSON, text and CSV") {
    std::string text = kPlan;
    text.insert(text.find("\n[[plan.candidate]]"), "\npue = 1.2");
    const std::string sc = write("plan_energy.toml", text);
    const std::string csv = (scratch() / "energy.csv").string();
    const CliRun r = run_tetrasim("plan '" + sc + "' --json --csv '" + csv + "'");
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["energy_model"]["pue"].get<double>() == 1.2);
    int fits = 0;
    for (const auto& c : j["candidates"]) {
      if (!c["fits"].get<bool>()) continue;
      ++fits;
      // plan/energy.hpp: GPUs × the GPU's rated power × days × 24 h × PUE (H100 / H200 700 W,
      // A100 400 W, the presets' datasheets).
      const double w = c["gpu"] == "a100-sxm-80gb" ? 400.0 : 700.0;
      CHECK(c["gpu_power_w"].get<double>() == w);
      const double want = c["gpus"].get<double>() * w * c["days"].get<double>() * 24.0 * 1.2 / 1e6;
      CHECK(c["energy_mwh"].get<double>() == approx(want).epsilon(1e-12));
      CHECK(c["tokens_per_s_per_gpu"].get<double>() ==
            approx(c["tokens_per_s"].get<double>() / c["gpus"].get<double>()).epsilon(1e-12));
      CHECK(c["mfu_peak_precision"] == "bf16");
      CHECK(c["mfu_peak_tflops"].get<double>() == (c["gpu"] == "a100-sxm-80gb" ? 312.0 : 989.0));
      CHECK(c["hfu"].get<double>() >= c["mfu"].get<double>());
      CHECK(c["precision_peak_utilization"].get<double>() == approx(c["mfu"].get<double>()).epsilon(1e-12));
    }
    CHECK(fits > 0);
    const std::string rows = slurp(csv);
    CHECK(rows.find(",gpu_power_w,energy_mwh,deadline_verdict,budget_verdict\n") != std::string::npos);
    const CliRun t = run_tetrasim("plan '" + sc + "'");
    REQUIRE(t.code == 0);
    CHECK(t.out.find("tok/s/GPU") != std::string::npos);
    CHECK(t.out.find("HFU %") != std::string::npos);
    CHECK(t.out.find("MWh") != std::string::npos);
    CHECK(t.out.find("MFU       model FLOPs over each GPU's BF16 dense peak (") != std::string::npos);
    CHECK(t.out.find("times PUE 1.20; the rest of each node is not counted") != std::string::npos);
    CHECK(t.out.find(" MWh\n") != std::string::npos);  // the verdict lines end in the energy
  }

  TEST_CASE("plan: the text table marks the front and gives the verdicts") {
    const std::string sc = write("plan_text.toml", kPlan);
    const CliRun r = run_tetrasim("plan '" + sc + "'");
    REQUIRE(r.code == 0);
    CHECK(r.out.find("front     * Pareto front of (days, cost)") != std::string::npos);
    CHECK(r.out.find("fastest   ") != std::string::npos);
    CHECK(r.out.find("cheapest  ") != std::string::npos);
    CHECK(r.out.find("h200 spot") != std::string::npos);
    CHECK(r.out.find("verdict   ") != std::string::npos);
  }

  TEST_CASE("plan: without prices the cost columns are absent") {
    std::string text = kPlan;
    for (const char* p : {"price_per_gpu_hour = 2.5\n", "price_per_gpu_hour = 1.2\n", "price_per_gpu_hour = 1.9\n",
                          "budget = 20000\n"}) {
      text.erase(text.find(p), std::string(p).size());
    }
    const std::string sc = write("plan_noprice.toml", text);
    const CliRun r = run_tetrasim("plan '" + sc + "' --json");
    REQUIRE(r.code == 0);
    CHECK(r.out.find("\"cost\"") == std::string::npos);
    CHECK(r.out.find("\"price_per_gpu_hour\"") == std::string::npos);
    CHECK(r.out.find("\"priced\": false") != std::string::npos);
    const CliRun t = run_tetrasim("plan '" + sc + "'");
    CHECK(t.out.find("cost M") == std::string::npos);
    CHECK(t.out.find("fastest (no prices given)") != std::string::npos);
  }

  TEST_CASE("plan: the Llama 3 grid on 16,384 H100 against the published GPU-hours") {
    // scenarios/plan-llama3-405b-grid.toml: TP 8, CP 1, PP 16, VP 8 (Llama 3 Table 4) with the
    // gradients sharded as §3.3.2 describes: the grid runs without recomputation, as Meta ran
    // it (docs/cli.md, "The Llama 3 case"), and its GPU-hours stay within a quarter of the 30.84 M
    // Meta published for Llama 3.1 405B (meta-llama/llama-models models/llama3_1/MODEL_CARD.md).
    const std::string sc = std::string(TETRA_SOURCE_DIR) + "/scenarios/plan-llama3-405b-grid.toml";
    const CliRun r = run_tetrasim("plan '" + sc + "' --json");
    REQUIRE(r.code == 0);
    const auto j = nlohmann::json::parse(r.out);
    REQUIRE(j["candidates"].size() == 1);
    const auto& c = j["candidates"][0];
    REQUIRE(c["fits"].get<bool>());
    CHECK(c["gpus"].get<int>() == 16384);
    CHECK(c["layout"]["tp"].get<int>() == 8);
    CHECK(c["layout"]["cp"].get<int>() == 1);
    CHECK(c["layout"]["pp"].get<int>() == 16);
    CHECK(c["layout"]["vp"].get<int>() == 8);
    CHECK(c["layout"]["recompute"].get<std::string>() == "none");
    // Stage 1 allocates 75.1 GiB of 79.6 (tetrasim memory scenarios/llama3.1-405b-16k.toml).
    CHECK(c["headroom_gib"].get<double>() == approx(4.5).epsilon(0.02));
    const double gpu_hours = c["gpu_hours"].get<double>();
    CHECK(gpu_hours > 0.75 * 30.84e6);
    CHECK(gpu_hours < 1.25 * 30.84e6);
  }

  TEST_CASE("plan: bad input is one line, exit 1, no file") {
    const std::string csv = (scratch() / "bad.csv").string();
    fs::remove(csv);
    auto run_bad = [&](const std::string& name, const std::string& text) {
      const std::string sc = write(name, text);
      return run_tetrasim("plan '" + sc + "' --csv '" + csv + "'");
    };
    SUBCASE("no candidates") {
      const CliRun r = run_bad("nocand.toml", kHead + "\n[plan]\ntokens = 1e9\n");
      check_one_line(r, {"nocand.toml:", "[plan].candidate", "no candidates"});
    }
    SUBCASE("negative price") {
      const CliRun r = run_bad("negprice.toml", kHead + R"(
[plan]
tokens = 1e9
[[plan.candidate]]
cluster = "dgx-h100"
gpus = 8
price_per_gpu_hour = -2
)");
      check_one_line(r, {"negprice.toml:25:22", "[plan.candidate].price_per_gpu_hour", "must not be negative"});
    }
    SUBCASE("a PUE below 1") {
      const CliRun r = run_bad("pue.toml", kHead + R"(
[plan]
tokens = 1e9
pue = 0.8
[[plan.candidate]]
cluster = "dgx-h100"
gpus = 8
)");
      check_one_line(r, {"pue.toml:22:7", "[plan].pue", "must be a number between 1 and 3, got 0.8"});
    }
    SUBCASE("negative token count") {
      const CliRun r = run_bad("negtok.toml", kHead + R"(
[plan]
tokens = -15.6e12
[[plan.candidate]]
cluster = "dgx-h100"
gpus = 8
)");
      check_one_line(r, {"negtok.toml:21:10", "[plan].tokens", "must be greater than zero"});
    }
    SUBCASE("unknown key in [plan]") {
      const CliRun r = run_bad("unknown.toml", kHead + R"(
[plan]
tokens = 1e9
deadline = 3
[[plan.candidate]]
cluster = "dgx-h100"
gpus = 8
)");
      check_one_line(r, {"unknown.toml:22:1", "[plan].deadline", "unknown key"});
    }
    SUBCASE("unknown key in a candidate") {
      const CliRun r = run_bad("unknown2.toml", kHead + R"(
[plan]
tokens = 1e9
[[plan.candidate]]
cluster = "dgx-h100"
gpu = 8
)");
      check_one_line(r, {"unknown2.toml:24:1", "[plan.candidate].gpu", "unknown key"});
    }
    SUBCASE("a GPU count that is not whole nodes") {
      const CliRun r = run_bad("nodes.toml", kHead + R"(
[plan]
tokens = 1e9
[[plan.candidate]]
cluster = "dgx-h100"
gpus = [8, 12]
)");
      check_one_line(r, {"nodes.toml:24:12", "[plan.candidate].gpus", "not whole nodes"});
    }
    SUBCASE("a bad range") {
      const CliRun r = run_bad("range.toml", kHead + R"(
[plan]
tokens = 1e9
[[plan.candidate]]
cluster = "dgx-h100"
gpus = "16..8"
)");
      check_one_line(r, {"range.toml:24:8", "[plan.candidate].gpus", "larger than the last"});
    }
    SUBCASE("prices on some candidates only") {
      const CliRun r = run_bad("someprice.toml", kHead + R"(
[plan]
tokens = 1e9
[[plan.candidate]]
cluster = "dgx-h100"
gpus = 8
price_per_gpu_hour = 2
[[plan.candidate]]
cluster = "hgx-h200"
gpus = 8
)");
      check_one_line(r, {"someprice.toml:26:1", "price_per_gpu_hour", "to every candidate or to none"});
    }
    SUBCASE("no candidate has a layout that fits") {
      // Llama-3.1-405B on one node: nothing fits 80 % of 80 GB.
      const CliRun r = run_bad("nofit.toml", R"([model]
preset = "llama3.1-405b"
[training]
seq_len = 8192
global_batch = 16
[search]
tp = [8]
pp = [1]
mbs = [1]
recompute = ["full"]
[plan]
tokens = 1e9
[[plan.candidate]]
cluster = "dgx-h100"
gpus = 8
)");
      // Exit 4: the plan ran and nothing fits (cli/output.hpp kExitNothingFits).
      check_one_line(r, {"nofit.toml", "[plan]", "no candidate has a layout that fits"}, 4);
    }
    CHECK_FALSE(fs::exists(csv));
  }

  TEST_CASE("plan: a GPU count that no layout fits is reported, the others ranked") {
    const std::string sc = write("somefit.toml", R"([model]
layers = 8
hidden = 8192
ffn_hidden = 28672
heads = 64
kv_heads = 8
vocab = 128256
[training]
seq_len = 8192
global_batch = 16
[search]
tp = [1]
pp = [1]
mbs = [1]
recompute = ["full"]
[plan]
tokens = 1e9
[[plan.candidate]]
cluster = "dgx-a100-40gb"
gpus = 8
[[plan.candidate]]
cluster = "hgx-h200"
gpus = 8
)");
    const CliRun r = run_tetrasim("plan '" + sc + "'");
    REQUIRE(r.code == 0);
    CHECK(r.out.find("no layout fits the memory budget") != std::string::npos);
    const CliRun j = run_tetrasim("plan '" + sc + "' --json");
    CHECK(j.out.find("\"fits\": false") != std::string::npos);
    CHECK(j.out.find("\"fits\": true") != std::string::npos);
  }

  TEST_CASE("plan: shards that do not add up, or of another scenario") {
    const std::string sc = write("plan_m.toml", kPlan);
    std::string other_text = kPlan;
    other_text.replace(other_text.find("tokens = 2e11"), 13, "tokens = 3e11");
    const std::string other = write("plan_other.toml", other_text);
    auto shard = [&](const std::string& scenario, int i, int n, const std::string& name) {
      const std::string f = (scratch() / name).string();
      REQUIRE(run_tetrasim("plan '" + scenario + "' --shard " + std::to_string(i) + "/" + std::to_string(n) +
                           " --out '" + f + "'")
                  .code == 0);
      return f;
    };
    const std::string a1 = shard(sc, 1, 3, "m1.json"), a2 = shard(sc, 2, 3, "m2.json"), a3 = shard(sc, 3, 3, "m3.json");
    const std::string b2 = shard(sc, 2, 2, "m2of2.json");
    const std::string o3 = shard(other, 3, 3, "o3.json");
    const std::string csv = (scratch() / "merge_bad.csv").string();
    fs::remove(csv);
    auto merge = [&](const std::string& files) {
      return run_tetrasim("plan '" + sc + "' --csv '" + csv + "' --merge " + files);
    };
    check_one_line(merge("'" + a1 + "' '" + a2 + "'"), {"--merge", "shard 3/3 is missing"});
    check_one_line(merge("'" + a1 + "' '" + a2 + "' '" + a2 + "' '" + a3 + "'"), {"m2.json", "given twice"});
    check_one_line(merge("'" + a1 + "' '" + a2 + "' '" + b2 + "'"), {"m2of2.json", "does not add up"});
    check_one_line(merge("'" + a1 + "' '" + a2 + "' '" + o3 + "'"), {"o3.json", "fingerprint", "other inputs"});
    const std::string junk = write("junk.json", "{\"hello\": 1}\n");
    check_one_line(merge("'" + junk + "'"), {"junk.json", "not a tetrasim plan shard"});
    CHECK_FALSE(fs::exists(csv));
    // The right three, in any order, merge.
    CHECK(merge("'" + a3 + "' '" + a1 + "' '" + a2 + "'").code == 0);
  }

  TEST_CASE("plan: --fit applies to the candidates on its cluster and is part of the shards' inputs") {
    const std::string sc = write("plan_fit.toml", kPlan);
    const std::string fit = write("slow_h100.fit.toml", "[fitted]\ncluster = \"dgx-h100\"\n[factors.gemm]\nvalue = 0.8\n");
    const CliRun plain = run_tetrasim("plan '" + sc + "' --json");
    const CliRun fitted = run_tetrasim("plan '" + sc + "' --json --fit '" + fit + "'");
    REQUIRE(plain.code == 0);
    REQUIRE(fitted.code == 0);
    CHECK(fitted.out != plain.out);
    // The fitted file has no [band]: its candidates are judged at the prediction, and the
    // verdict line says so; without it every candidate has the zero-shot band.
    const CliRun fitted_text = run_tetrasim("plan '" + sc + "' --fit '" + fit + "'");
    const CliRun plain_text = run_tetrasim("plan '" + sc + "'");
    REQUIRE(fitted_text.code == 0);
    REQUIRE(plain_text.code == 0);
    CHECK(fitted_text.out.find("at the band's slow end (the prediction where there is none)") != std::string::npos);
    CHECK(plain_text.out.find("at the band's slow end") != std::string::npos);
    CHECK(plain_text.out.find("(the prediction where there is none)") == std::string::npos);
    const std::string f1 = (scratch() / "fit1.json").string(), f2 = (scratch() / "fit2.json").string();
    REQUIRE(run_tetrasim("plan '" + sc + "' --fit '" + fit + "' --shard 1/2 --out '" + f1 + "'").code == 0);
    REQUIRE(run_tetrasim("plan '" + sc + "' --fit '" + fit + "' --shard 2/2 --out '" + f2 + "'").code == 0);
    const CliRun merged = run_tetrasim("plan '" + sc + "' --json --fit '" + fit + "' --merge '" + f1 + "' '" + f2 + "'");
    CHECK(merged.out == fitted.out);
    check_one_line(run_tetrasim("plan '" + sc + "' --json --merge '" + f1 + "' '" + f2 + "'"),
                   {"fit1.json", "other inputs"});
    const std::string other = write("b300.fit.toml", "[fitted]\ncluster = \"dgx-b300\"\n");
    check_one_line(run_tetrasim("plan '" + sc + "' --fit '" + other + "'"), {"b300.fit.toml", "no candidate"});
  }

  TEST_CASE("plan: usage errors exit 2") {
    const std::string sc = write("plan_u.toml", kPlan);
    CHECK(run_tetrasim("plan '" + sc + "' --shard 0/3").code == 2);
    CHECK(run_tetrasim("plan '" + sc + "' --shard 4/3").code == 2);
    CHECK(run_tetrasim("plan '" + sc + "' --shard 1/2 --json").code == 2);
    CHECK(run_tetrasim("plan '" + sc + "' --out x.json").code == 2);
  }
}
