// End-to-end tests of the tetrasim executable: exit codes, the one-line error contract and
// the JSON outputs of docs/cli.md. Each test runs the built binary from the source folder.

#include <doctest/doctest.h>
#include "support/approx.hpp"


#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/run_tetrasim.hpp"

using tetra::test::approx;

namespace fs = std::filesystem;

namespace {

using Result = tetra::test::CliRun;
using tetra::test::slurp;

Result tetrasim(const std::string& args) { return tetra::test::run_tetrasim(args); }

/// `tetrasim simulate SCENARIO --json`, which must succeed, parsed.
nlohmann::json simulate_json(const std::string& scenario) {
  const Result r = tetrasim("simulate " + scenario + " --json");
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

/// A user error: exit 1, nothing on stdout, exactly one line on stderr starting with `prefix`.
void check_user_error(const Result& r, const std::string& prefix) {
  CAPTURE(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(count_lines(r.err) == 1);
  CHECK(r.err.rfind("tetrasim: " + prefix, 0) == 0);
}

}  // namespace

TEST_SUITE("cli") {

TEST_CASE("malformed TOML: one line with file:line:col, exit 1") {
  check_user_error(tetrasim("memory tests/data/scenarios/malformed.toml"),
                   "tests/data/scenarios/malformed.toml:3:");
}

TEST_CASE("unknown key: file:line:col and the key") {
  check_user_error(tetrasim("memory tests/data/scenarios/unknown_key.toml"),
                   "tests/data/scenarios/unknown_key.toml:15:1: [layout].micro_batch: unknown key");
}

TEST_CASE("TP not dividing the heads: file:line:col of tp") {
  check_user_error(tetrasim("memory tests/data/scenarios/tp_heads.toml"),
                   "tests/data/scenarios/tp_heads.toml:14:6: [layout].tp: ");
}

TEST_CASE("MoE: ep not dividing the experts: file:line:col of ep") {
  check_user_error(tetrasim("memory tests/data/scenarios/moe_ep_experts.toml"),
                   "tests/data/scenarios/moe_ep_experts.toml:17:6: [layout].ep: ep=3 must divide num_experts=8");
}

TEST_CASE("MoE: memory shows the expert part, in the table and in JSON") {
  const Result table = tetrasim("memory tests/data/scenarios/moe_qwen3_ep8.toml");
  CHECK(table.code == 0);
  CHECK(table.out.find("expert part of the columns above, GiB") != std::string::npos);
  CHECK(table.out.find("30.5B parameters, 3.4B active; ep 8, etp 1, expert data parallel 2") !=
        std::string::npos);
  const Result r = tetrasim("memory tests/data/scenarios/moe_qwen3_ep8.toml --json");
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["moe"]["edp"] == 2);
  CHECK(j["moe"]["active_params"] == 3'353'032'704LL);  // with the Q and K norms, 48 x 256
  CHECK(j["layout"]["ep"] == 8);
  // 48 layers x 16 experts x 3*2048*768 parameters at 2 + 4 + 12/2 bytes: 40.50 GiB.
  CHECK(j["stages"][0]["expert_states_gib"].get<double>() == approx(40.5).epsilon(1e-4));
  CHECK(j["stages"][0]["moe_layers"] == 48);
}

TEST_CASE("MoE: padded to capacity, the host never waits for the token counts") {
  const Result mem = tetrasim("memory tests/data/scenarios/moe_qwen3_ep8_padded.toml --json");
  REQUIRE(mem.code == 0);
  const auto m = nlohmann::json::parse(mem.out);
  CHECK(m["moe"]["capacity_factor"] == 1.0);
  CHECK(m["moe"]["pad_to_capacity"] == true);
  // The same layout dropless: one device-to-host wait per MoE layer forward, each exposing the
  // GPU's queue to the host's issue time behind it; padded, only the host's total issue time
  // bounds a pass.
  const auto d = simulate_json("tests/data/scenarios/moe_qwen3_ep8.toml");
  const auto p = simulate_json("tests/data/scenarios/moe_qwen3_ep8_padded.toml");
  CHECK(p["host_wait_s"].get<double>() < d["host_wait_s"].get<double>());
  CHECK(p["step_time_s"].get<double>() < d["step_time_s"].get<double>());
}

TEST_CASE("MoE: HybridEP across two nodes exchanges at its measured rate, slower than DeepEP's") {
  const auto h = simulate_json("tests/data/scenarios/moe_qwen3_ep16_hybridep.toml");
  const auto d = simulate_json("tests/data/scenarios/moe_qwen3_ep16_deepep.toml");
  CHECK(h["layout"]["moe_token_dispatcher"] == "flex");
  CHECK(h["layout"]["moe_flex_backend"] == "hybridep");
  CHECK(d["layout"]["moe_flex_backend"] == "deepep");
  // The same tokens cross once per node: 25.5 GB/s per GPU against NCCL's all-to-all 37.2.
  CHECK(h["exposed_comm_s"]["ep"].get<double>() > d["exposed_comm_s"]["ep"].get<double>());
  CHECK(h["step_time_s"].get<double>() > d["step_time_s"].get<double>());
}

TEST_CASE("simulate reports the wait for a data loader slower than the GPUs, in text, JSON and HTML") {
  const auto j = simulate_json("tests/data/scenarios/loader_per_sample_16k.toml");
  REQUIRE(j.contains("data_loader_wait_s"));
  CHECK(j["data_loader_wait_s"].get<double>() > 0);
  // 8 micro-batches of a 16k mask each: 8 x 0.55572 s at the default host rates.
  CHECK(j["data_loader_s"].get<double>() == approx(8 * 0.55572).epsilon(1e-4));
  CHECK(j["step_time_s"].get<double>() == approx(j["data_loader_s"].get<double>()).epsilon(1e-6));
  CHECK(tetrasim("simulate tests/data/scenarios/loader_per_sample_16k.toml").out.find("waiting for the data loader") !=
        std::string::npos);
  const std::string html = std::string(TETRA_BINARY_DIR) + "/test_cli_loader.html";
  REQUIRE(tetrasim("simulate tests/data/scenarios/loader_per_sample_16k.toml --html " + html).code == 0);
  CHECK(slurp(html).find("waiting for the data loader") != std::string::npos);
  // Without a per-sample mask the loader keeps up and no key is written.
  CHECK_FALSE(simulate_json("scenarios/default.toml").contains("data_loader_wait_s"));
}

TEST_CASE("simulate reports the wait for activation-offload copies, in text, JSON and HTML") {
  // 79 of 80 layers offloaded over PCIe Gen5: the copies outlast the layer that hides each.
  const auto j = simulate_json("tests/data/scenarios/offload_70b_h100.toml");
  REQUIRE(j.contains("offload_exposed_s"));
  CHECK(j["offload_exposed_s"].get<double>() > 0);
  CHECK(j["offload_exposed_s"].get<double>() < j["step_time_s"].get<double>());
  CHECK(tetrasim("simulate tests/data/scenarios/offload_70b_h100.toml").out.find("waiting for offload copies") !=
        std::string::npos);
  const std::string html = std::string(TETRA_BINARY_DIR) + "/test_cli_offload.html";
  REQUIRE(tetrasim("simulate tests/data/scenarios/offload_70b_h100.toml --html " + html).code == 0);
  CHECK(slurp(html).find("waiting for offload copies") != std::string::npos);
  // Without offloading no key is written.
  CHECK_FALSE(simulate_json("scenarios/default.toml").contains("offload_exposed_s"));
}

TEST_CASE("MoE: simulate reports the GPU waiting for the host, gone under a full-iteration graph") {
  const auto e = simulate_json("tests/data/scenarios/moe_qwen3_ep8.toml");
  const auto g = simulate_json("tests/data/scenarios/moe_qwen3_ep8_graphed.toml");
  CHECK(e["host_wait_s"].get<double>() > 0);
  CHECK(g["host_wait_s"].get<double>() == 0);
  // The graph saves the GPU's idle time: its waits for the host, less the exchange time they
  // hid (an exchange issued late counts as host wait, issued on time it is exposed EP time).
  const double saved = e["step_time_s"].get<double>() - g["step_time_s"].get<double>();
  const double idle_e = e["host_wait_s"].get<double>() + e["exposed_comm_s"]["ep"].get<double>();
  const double idle_g = g["exposed_comm_s"]["ep"].get<double>();
  CHECK(saved > 0);
  CHECK(saved <= e["host_wait_s"].get<double>());
  CHECK(saved == approx(idle_e - idle_g).epsilon(0.02));
  CHECK(tetrasim("simulate tests/data/scenarios/moe_qwen3_ep8.toml").out.find("GPU waiting for host") !=
        std::string::npos);
}

TEST_CASE("MoE: the host resumes 0.51 ms after each token-count wait (a profiled Megatron-Bridge run)") {
  // NVIDIA-NeMo/Megatron-Bridge skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md,
  // "HybridEP Production-Shape Benchmark", the run of the scenario file: 24.7138 s a step,
  // the GPU active 22.821 s of it (Nsight), so 1.893 s idle behind the host. 48 layers x 64
  // micro-batches wait for their token counts once each: 3,072 waits, 0.51 ms each on top of
  // the 25.8 us round trip and the 32.5 us issue of each kernel that follows.
  const std::string file = "tests/data/scenarios/moe_qwen3_hybridep_profiled.toml";
  const auto off = simulate_json(file);
  CHECK(off["host_wait_s"].get<double>() == approx(24.7138 - 22.821).epsilon(0.02));
  CHECK(off["step_time_s"].get<double>() == approx(24.7138).epsilon(0.06));
  // Held out: the same run with EP overlap on (combined 1F1B), 20.9920 s measured. Without
  // the resume time the replay gave 15.98 s; with it the host's waits stall the co-scheduled
  // backward as well.
  const std::string dir = TETRA_BINARY_DIR "/cli_moe_profiled";
  fs::create_directories(dir);
  std::string text = slurp(file);
  const std::string key = "moe_aux_loss = true";
  text.replace(text.find(key), key.size(), key + "\nmoe_a2a_overlap = true");
  std::ofstream(dir + "/overlap.toml") << text;
  const auto on = simulate_json(dir + "/overlap.toml");
  CHECK(on["step_time_s"].get<double>() == approx(20.9920).epsilon(0.10));
  CHECK(on["step_time_s"].get<double>() < off["step_time_s"].get<double>());
}

TEST_CASE("world-size mismatch: file:line:col of the dp that does not match") {
  check_user_error(tetrasim("memory tests/data/scenarios/world_size.toml"),
                   "tests/data/scenarios/world_size.toml:16:6: [layout].dp: ");
}

TEST_CASE("an FP8 recipe the GPU cannot run: file:line:col of fp8_recipe") {
  check_user_error(tetrasim("memory tests/data/scenarios/fp8_a100.toml"),
                   "tests/data/scenarios/fp8_a100.toml:12:14: [training].fp8_recipe: ");
  check_user_error(tetrasim("simulate tests/data/scenarios/mxfp8_h100.toml"),
                   "tests/data/scenarios/mxfp8_h100.toml:12:14: [training].fp8_recipe: ");
}

TEST_CASE("NVLink domains: a cluster they do not tile, a layout that straddles them") {
  check_user_error(tetrasim("memory tests/data/scenarios/nvl72_domain.toml"),
                   "tests/data/scenarios/nvl72_domain.toml:7:9: [cluster].nodes: 512 GPUs are not a whole number of "
                   "NVLink domains of 72 GPUs (set [cluster.intra_node].domain to the GPUs used per domain, e.g. 64)");
  check_user_error(tetrasim("simulate tests/data/scenarios/nvl72_trays.toml"),
                   "tests/data/scenarios/nvl72_trays.toml:10:10: [cluster.intra_node].domain: an NVLink domain of 66");
  check_user_error(tetrasim("simulate tests/data/scenarios/nvl72_straddle.toml"),
                   "tests/data/scenarios/nvl72_straddle.toml:15:6: [layout].cp: cp=2 groups span 16 ranks");
}

TEST_CASE("PyTorch-native options: reshard with ZeRO-1, an HSDP split that misses dp, Float8 on A100") {
  check_user_error(tetrasim("memory tests/data/scenarios/fsdp_reshard_zero1.toml"),
                   "tests/data/scenarios/fsdp_reshard_zero1.toml:10:25: [training].reshard_after_forward: "
                   "reshard_after_forward needs framework = \"fsdp\" with zero_stage = 3");
  check_user_error(tetrasim("simulate tests/data/scenarios/fsdp_hsdp_split.toml"),
                   "tests/data/scenarios/fsdp_hsdp_split.toml:15:12: [layout].dp_shard: dp_shard*dp_replicate = "
                   "4*2 = 8 must equal dp = GPUs/(tp*cp*pp) = 16");
  check_user_error(tetrasim("memory tests/data/scenarios/fsdp_float8_a100.toml"),
                   "tests/data/scenarios/fsdp_float8_a100.toml:12:14: [training].fp8_recipe: fp8_recipe "
                   "\"tensorwise\" needs FP8 tensor cores");
  check_user_error(tetrasim("memory tests/data/scenarios/fsdp_ac_freq_full.toml"),
                   "tests/data/scenarios/fsdp_ac_freq_full.toml:15:11: [layout].ac_freq: ac_freq=3 needs "
                   "recompute = \"selective_layer\" (got \"full\")");
}

TEST_CASE("fp8_recipe with a precision other than fp8 names the recipe") {
  const std::string dir = TETRA_BINARY_DIR "/cli_fp8";
  fs::create_directories(dir);
  std::ofstream(dir + "/bf16_recipe.toml")
      << "[model]\npreset = \"llama3.1-8b\"\n[cluster]\npreset = \"dgx-h100\"\n"
         "[training]\nseq_len = 4096\nglobal_batch = 64\nprecision = \"bf16\"\n"
         "fp8_recipe = \"current\"\n[layout]\ntp = 1\n";
  check_user_error(tetrasim("memory " + dir + "/bf16_recipe.toml"),
                   dir + "/bf16_recipe.toml:9:14: [training].fp8_recipe: needs precision");
}

TEST_CASE("Megatron-Core's split accounting: 405B on pp 8 x vp 8, one layer fewer at each end") {
  const Result r = tetrasim("memory tests/data/scenarios/fp8_split.toml --json");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  // (126 + 2) / 64 = 2 layers per virtual stage; the end ranks hold 8*2 - 1 = 15.
  CHECK(j["stages"][0]["layers"] == 15);
  CHECK(j["stages"][7]["layers"] == 15);
  CHECK(j["stages"][3]["layers"] == 16);
  // The FP8 weight caches are shown: the ranks hold FP8 copies of their linear weights.
  CHECK(j["stages"][3]["fp8_cache_gib"].get<double>() > 0.0);
  const Result table = tetrasim("memory tests/data/scenarios/fp8_split.toml");
  CHECK(table.out.find("fp8 cache") != std::string::npos);
}

TEST_CASE("missing file") {
  check_user_error(tetrasim("memory tests/data/scenarios/does_not_exist.toml"),
                   "tests/data/scenarios/does_not_exist.toml: no such file");
  check_user_error(tetrasim("validate tests/data/does_not_exist.csv"),
                   "tests/data/does_not_exist.csv: no such file");
}

TEST_CASE("bad unit: file:line:col of the value") {
  check_user_error(tetrasim("memory tests/data/scenarios/bad_unit.toml"),
                   "tests/data/scenarios/bad_unit.toml:10:10: [cluster.gpu].memory: ");
}

TEST_CASE("missing [model] names the table") {
  check_user_error(tetrasim("memory tests/data/scenarios/no_model.toml"),
                   "tests/data/scenarios/no_model.toml: [model]: missing table");
}

TEST_CASE("bad --layout names --layout and the key") {
  check_user_error(tetrasim("memory scenarios/default.toml --layout tp=x"),
                   "--layout: tp: expected an integer");
  check_user_error(tetrasim("memory scenarios/default.toml --layout bogus=1"),
                   "--layout: bogus: unknown key");
  check_user_error(tetrasim("memory scenarios/default.toml --layout tp=3"), "--layout: tp: ");
}

TEST_CASE("simulate --trace: 768 micro-batches of Llama-3.1-405B give an aggregated trace under 50 MB") {
  // The published GB200 run at tp 8 (dp 2): 768 micro-batches, whose full trace is about 200 MB.
  const fs::path trace = tetra::test::scratch_dir("cli_trace") / "405b.json";
  const Result r = tetrasim("simulate scenarios/published-llama31-405b-fp8-gb200.toml --layout tp=8 --trace '" +
                            trace.string() + "'");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("768 micro-batches per step") != std::string::npos);
  CHECK(r.out.find(" (aggregated: ") != std::string::npos);
  CHECK(fs::file_size(trace) < 50'000'000);
  // JSON whose steady state is folded into slices that say how many they stand for.
  std::size_t folded = 0;
  nlohmann::json::parser_callback_t count = [&](int depth, nlohmann::json::parse_event_t e, nlohmann::json& v) {
    if (e != nlohmann::json::parse_event_t::object_end || depth != 2) return true;
    folded += v.contains("args") && v.at("args").contains("aggregated_slices") ? 1 : 0;
    return false;
  };
  const nlohmann::json root = nlohmann::json::parse(slurp(trace), count);  // throws on what is not JSON
  CHECK(root.at("displayTimeUnit") == "ms");
  CHECK(folded > 100);
  fs::remove(trace);
}

TEST_CASE("simulate --trace-detail: a word it does not know is one line naming the option, exit 1") {
  const fs::path trace = tetra::test::scratch_dir("cli_trace") / "unknown_detail.json";
  check_user_error(tetrasim("simulate scenarios/quickstart.toml --trace-detail verbose --trace '" + trace.string() + "'"),
                   "--trace-detail: unknown value \"verbose\" (expected one of: full, aggregated, auto)");
  CHECK_FALSE(fs::exists(trace));
}

TEST_CASE("usage errors exit 2") {
  CHECK(tetrasim("memory").code == 2);
  CHECK(tetrasim("no-such-command").code == 2);
  CHECK(tetrasim("memory scenarios/default.toml --no-such-flag").code == 2);
  CHECK(tetrasim("validate").code == 2);
}

TEST_CASE("search tells apart a ranking (0), no valid layout (3) and nothing that fits (4)") {
  const fs::path dir = fs::temp_directory_path() / "tetrasim_search_exit";
  fs::create_directories(dir);
  auto scenario = [&](const std::string& name, const std::string& search) {
    const fs::path p = dir / name;
    std::ofstream(p) << "[model]\npreset = \"llama3.1-8b\"\n[cluster]\npreset = \"dgx-h100\"\nnodes = 1\n"
                        "[training]\nseq_len = 4096\nglobal_batch = 64\n[search]\n"
                     << search;
    return p.string();
  };
  // tp 3 and 5 divide neither the 32 heads nor the 8 GPUs.
  const std::string invalid = scenario("invalid.toml", "tp = [3, 5]\n");
  // One layout, valid, that needs far more than 1 % of the GPU.
  const std::string no_fit =
      scenario("nofit.toml", "tp = [1]\npp = [1]\ncp = [1]\nmbs = [1]\nrecompute = [\"none\"]\nmemory_fraction = 0.01\n");
  const std::string ok = scenario("ok.toml", "tp = [1, 2]\npp = [1]\nmbs = [1]\n");
  struct Case {
    std::string path;
    int code;
    const char* verdict;
    const char* line;
  };
  for (const Case& c : {Case{invalid, 3, "nothing_valid", "no valid layout: each of the"},
                        Case{no_fit, 4, "nothing_fits", "no layout fits the memory budget"},
                        Case{ok, 0, "ranked", "rank"}}) {
    CAPTURE(c.path);
    const Result text = tetrasim("search " + c.path + " --threads 1");
    CHECK(text.code == c.code);
    CHECK(text.out.find(c.line) != std::string::npos);
    const Result json = tetrasim("search " + c.path + " --json --threads 1");
    CHECK(json.code == c.code);
    CHECK(nlohmann::json::parse(json.out).at("verdict") == c.verdict);
  }
}

TEST_CASE("memory --json has the documented keys and nothing else on stdout") {
  const Result r = tetrasim("memory scenarios/default.toml --json");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  const auto j = nlohmann::json::parse(r.out);  // throws (fails the test) on anything but JSON
  for (const char* key : {"capacity_gib", "usable_gib", "fits", "peak_gib", "stages"}) {
    CAPTURE(key);
    CHECK(j.contains(key));
  }
  CHECK(j["fits"].is_boolean());
  REQUIRE(j["stages"].is_array());
  CHECK(j["stages"].size() == 4);  // pp = 4
  for (const auto& s : j["stages"]) {
    for (const char* key : {"stage", "params_gib", "grads_gib", "optimizer_gib", "activations_gib",
                            "buffers_gib", "total_gib"}) {
      CAPTURE(key);
      CHECK(s.contains(key));
    }
  }
  CHECK(j["layout"]["dp"] == 2);
  // H100 SXM: 80 GB of HBM3 = 79.6 GiB.
  CHECK(j["capacity_gib"].get<double>() > 79.0);
  CHECK(j["capacity_gib"].get<double>() <= 80.0);
  CHECK(j["usable_gib"].get<double>() == approx(0.8 * j["capacity_gib"].get<double>()).epsilon(1e-3));
  // Deterministic: the same input gives byte-identical output.
  CHECK(tetrasim("memory scenarios/default.toml --json").out == r.out);
}

TEST_CASE("memory prints a table and the verdict, --layout overrides") {
  const Result r = tetrasim("memory scenarios/default.toml --layout pp=8,tp=8");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  CHECK(r.out.find("stage") != std::string::npos);
  CHECK(r.out.find("fits ") != std::string::npos);
  CHECK(r.out.find("tp=8,cp=1,pp=8,dp=1") != std::string::npos);
  // Not fitting is a verdict, not an error.
  const Result oom = tetrasim("memory tests/data/scenarios/oom.toml --json");
  CHECK(oom.code == 0);
  CHECK(nlohmann::json::parse(oom.out)["fits"].is_boolean());
}

TEST_CASE("validate --json has the documented keys") {
  const Result r = tetrasim("validate tests/data/scenarios/measurements.csv --json");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["rows"] == 5);
  for (const char* key : {"rows", "skipped", "metrics", "outcome", "per_row"}) {
    CAPTURE(key);
    CHECK(j.contains(key));
  }
  const auto& o = j["outcome"];
  CHECK(o["n"] == 2);
  for (const char* key : {"fit_fit", "fit_oom", "oom_fit", "oom_oom"}) {
    CAPTURE(key);
    CHECK(o["confusion"].contains(key));
  }
  CHECK(o["confusion"]["fit_fit"].get<int>() + o["confusion"]["fit_oom"].get<int>() == 1);
  CHECK(o["confusion"]["oom_fit"].get<int>() + o["confusion"]["oom_oom"].get<int>() == 1);
  REQUIRE(j["skipped"].size() >= 2);
  CHECK(j["skipped"][0]["id"] == "blank-mbs");
  CHECK(j["skipped"][0]["reason"] == "layout cell 'mbs' is blank");
  CHECK(j["skipped"][1]["id"] == "bad-tp");
  CHECK(j["skipped"][1]["reason"].get<std::string>().find("tp") != std::string::npos);
  REQUIRE(j["per_row"].size() >= 2);
  CHECK(j["per_row"][0]["id"] == "fit-8b");
  CHECK(j["per_row"][0]["measured"] == 1);
  CHECK(j["per_row"][0]["ape"].is_null());  // outcome rows have no percentage error
  for (const char* key : {"id", "metric", "measured", "predicted", "ape"}) {
    CAPTURE(key);
    CHECK(j["per_row"][0].contains(key));
  }
}

TEST_CASE("validate prints the confusion matrix and accuracy") {
  const Result r = tetrasim("validate tests/data/scenarios/measurements.csv");
  CAPTURE(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("accuracy") != std::string::npos);
  CHECK(r.out.find("measured \\ predicted") != std::string::npos);
  CHECK(r.out.find("layout cell 'mbs' is blank") != std::string::npos);
  check_user_error(tetrasim("validate tests/data/scenarios/measurements.csv --group-by nope"),
                   "--group-by: nope: no such column");
}

TEST_CASE("validate shows the memory behind each verdict and lists the runs that ran but do not fit") {
  const Result j = tetrasim("validate tests/data/scenarios/ran_predicted_oom.csv --json");
  CAPTURE(j.err);
  REQUIRE(j.code == 0);
  const auto rows = nlohmann::json::parse(j.out)["per_row"];
  REQUIRE(rows.size() == 2);
  for (const auto& r : rows) {
    for (const char* key : {"peak_stage", "peak_gib", "capacity_gib"}) {
      CAPTURE(key);
      CHECK(r.contains(key));
    }
    // H100 SXM: 81,559 MiB = 79.647 GiB.
    CHECK(r["capacity_gib"].get<double>() == approx(81559.0 / 1024.0).epsilon(1e-5));
  }
  CHECK(rows[0]["predicted"] == 1);
  CHECK(rows[0]["peak_gib"].get<double>() < rows[0]["capacity_gib"].get<double>());
  // Llama 3.1 70B on 8 GPUs at TP 8 (dp 1): each GPU holds 70.55e9 / 8 parameters, at least
  // 2 (bf16 weights) + 2 (gradients) + 12 (Adam's fp32 copy and moments) bytes each:
  // 8.82e9 x 16 B = 141.1e9 B = 131.4 GiB before any activation.
  CHECK(rows[1]["predicted"] == 0);
  CHECK(rows[1]["peak_gib"].get<double>() > 131.4);
  const double over = rows[1]["peak_gib"].get<double>() - rows[1]["capacity_gib"].get<double>();

  const Result t = tetrasim("validate tests/data/scenarios/ran_predicted_oom.csv");
  REQUIRE(t.code == 0);
  const auto at = t.out.find("ran, predicted out of memory (1)");
  REQUIRE(at != std::string::npos);
  const std::string table = t.out.substr(at);
  CHECK(table.find("ran-70b") != std::string::npos);
  CHECK(table.find("fit-8b") == std::string::npos);  // only the wrong verdicts
  char expected[32];
  std::snprintf(expected, sizeof expected, "+%.2f", over);
  CHECK(table.find(expected) != std::string::npos);
  // A file without such runs prints no list.
  const Result none = tetrasim("validate tests/data/scenarios/measurements.csv");
  CHECK(none.out.find("ran, predicted out of memory") == std::string::npos);
}

TEST_CASE("a malformed measurement row names file:line and the column") {
  check_user_error(tetrasim("validate tests/data/scenarios/bad_measurements.csv"),
                   "tests/data/scenarios/bad_measurements.csv:3: tp: expected an integer");
}

TEST_CASE("the shipped validation files run") {
  for (const char* f : {"data/validation/hagemann2023.csv", "data/validation/megatron_selene.csv",
                        "data/validation/megatron_h100.csv", "data/validation/megatron_bridge.csv",
                        "data/validation/torchtitan.csv"}) {
    CAPTURE(f);
    const Result r = tetrasim(std::string("validate ") + f + " --json");
    CAPTURE(r.err);
    CHECK(r.code == 0);
    CHECK(r.err.empty());
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    CHECK(j.is_object());
  }
}

}  // TEST_SUITE
