// Scenario files (docs/scenario-format.md), --layout strings and measurement CSVs
// (docs/accuracy.md).

#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tetra/base/error.hpp"
#include "tetra/base/units.hpp"
#include "tetra/scenarios/measurements.hpp"
#include "tetra/scenarios/profile_io.hpp"
#include "tetra/scenarios/scenario.hpp"

using tetra::test::approx;

namespace fs = std::filesystem;
using tetra::UserError;
using namespace tetra::scenarios;

namespace {

// A small valid scenario: 4 nodes of DGX A100 80GB = 32 GPUs, Llama-2-7B (32 heads).
const std::string kBase = R"([model]
preset = "llama2-7b"

[cluster]
preset = "dgx-a100-80gb"
nodes = 4

[training]
seq_len = 4096
global_batch = 256

[layout]
tp = 2
pp = 2
mbs = 1
)";

Scenario load(const std::string& text, std::string_view over = {}, bool require = true) {
  return load_scenario_text(text, "t.toml", over, require);
}

/// The what() of the UserError `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    MESSAGE(std::string(e.what()));
    return e.what();
  }
  return "";
}

std::string scratch_dir(const std::string& name) {
  const fs::path p = fs::path(TETRA_BINARY_DIR) / "tests" / "scenarios_scratch" / name;
  fs::create_directories(p);
  return p.generic_string();
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

}  // namespace

TEST_SUITE("scenarios") {

TEST_CASE("the default scenario loads: Llama-3.1-70B on 8 DGX H100 nodes") {
  const Scenario sc = load_scenario(std::string(TETRA_SOURCE_DIR) + "/scenarios/default.toml");
  CHECK(sc.model.name == "llama3.1-70b");
  CHECK(sc.model.layers == 80);
  CHECK(sc.cluster.total_gpus() == 64);
  CHECK(sc.training.seq_len == 8192);
  CHECK(sc.has_layout);
  // dp derived: 64 / (tp 8 * cp 1 * pp 4) = 2.
  CHECK(sc.layout.dp == 2);
  CHECK(sc.layout.world() == 64);
  CHECK(sc.has_search);
  CHECK(sc.search.pp_divisors);
}

TEST_CASE("every scenario shipped in scenarios/ loads") {
  for (const char* name : {"default.toml", "hagemann2023-llama13b.toml", "megatron-selene-175b.toml",
                           "megatron-h100-70b.toml"}) {
    CAPTURE(name);
    const std::string path = std::string(TETRA_SOURCE_DIR) + "/scenarios/" + name;
    CHECK_NOTHROW((void)load_scenario(path));
  }
}

TEST_CASE("presets with overrides beside them") {
  const Scenario sc = load(R"([model]
preset = "llama2-7b"
vocab = 50000
layers = 16

[cluster]
preset = "dgx-a100-80gb"
nodes = 2
[cluster.gpu]
memory = "40GiB"
[cluster.inter_node]
nic_bandwidth = "100Gb/s"

[training]
seq_len = 2048
global_batch = 32
zero_stage = 0
attention = "fused"
precision = "fp16"

[layout]
tp = 8
)");
  CHECK(sc.model.vocab == 50000);
  CHECK(sc.model.layers == 16);
  CHECK(sc.model.hidden == 4096);  // from the preset
  CHECK(sc.cluster.gpu.memory_bytes == approx(40 * tetra::units::kGiB));
  CHECK(sc.cluster.inter.nic_bandwidth_Bps == approx(100e9 / 8));
  CHECK(sc.cluster.gpus_per_node == 8);
  CHECK(sc.training.zero_stage == 0);
  CHECK(sc.training.attention == tetra::parallel::AttentionKernel::fused);
  CHECK(sc.training.precision == tetra::parallel::Precision::fp16);
  CHECK(sc.layout.dp == 2);
}

TEST_CASE("a node preset's NVLink domain follows gpus_per_node, a rack preset keeps its own") {
  const std::string head = "[model]\npreset = \"llama3.1-8b\"\n[training]\nseq_len = 4096\nglobal_batch = 8\n";
  // TSUBAME 4.0's nodes hold 4 H100 joined by NVLink and nothing else: a DGX H100 preset with
  // 4 GPUs per node is 4-GPU NVLink islands, so a group over 8 GPUs crosses the network.
  const Scenario four = load(head + "[cluster]\npreset = \"dgx-h100\"\ngpus_per_node = 4\nnodes = 2\n", {}, false);
  CHECK(four.cluster.nvlink_domain() == 4);
  const Scenario eight = load(head + "[cluster]\npreset = \"dgx-h100\"\nnodes = 2\n", {}, false);
  CHECK(eight.cluster.nvlink_domain() == 8);
  // GB200 NVL72: 18 trays of 4 GPUs on one NVLink fabric of 72.
  const Scenario rack = load(head + "[cluster]\npreset = \"gb200-nvl72\"\ngpus_per_node = 4\nnodes = 18\n", {}, false);
  CHECK(rack.cluster.nvlink_domain() == 72);
}

TEST_CASE("a profile measured on another GPU model is refused at [cluster].profile unless asked for") {
  // tests/data/calib/h100_sxm_calibrate.profile.toml records gpu = "NVIDIA H100 80GB HBM3".
  const std::string profile = std::string(TETRA_SOURCE_DIR) + "/tests/data/calib/h100_sxm_calibrate.profile.toml";
  auto text = [&](const char* preset, const char* extra) {
    return std::string("[model]\npreset = \"llama3.1-8b\"\n[cluster]\npreset = \"") + preset +
           "\"\nnodes = 1\nprofile = \"" + profile + "\"\n" + extra +
           "[training]\nseq_len = 4096\nglobal_batch = 8\n";
  };
  CHECK(load(text("dgx-h100", ""), {}, false).profile.has_value());
  const std::string err = error_of([&] { (void)load(text("dgx-a100-80gb", ""), {}, false); });
  CHECK(err.rfind("t.toml:6:11: [cluster].profile: measured on NVIDIA H100 80GB HBM3, but the cluster's GPU is", 0) == 0);
  CHECK(err.find("profile_any_gpu = true") != std::string::npos);
  CHECK(load(text("dgx-a100-80gb", "profile_any_gpu = true\n"), {}, false).profile.has_value());
}

TEST_CASE("an explicit model and cluster without presets") {
  const Scenario sc = load(R"([model]
arch = "gpt"
layers = 24
hidden = 2048
ffn_hidden = 8192
heads = 16
vocab = 51200
tied_embeddings = true

[cluster]
gpus_per_node = 4
nodes = 1
[cluster.gpu]
memory = "24GiB"
bf16_peak = "165TFLOP/s"
hbm_bandwidth = "1TB/s"
sms = 128
[cluster.intra_node]
kind = "pcie"
bandwidth = "32GB/s"
latency = "5us"

[training]
seq_len = 1024
global_batch = 8

[layout]
tp = 1
)");
  CHECK(sc.model.arch == tetra::model::Arch::gpt);
  CHECK(sc.model.kv_heads == 16);  // defaults to heads
  CHECK(sc.model.tied_embeddings);
  CHECK(sc.cluster.intra.kind == tetra::hw::IntraKind::pcie);
  CHECK(sc.cluster.intra.latency_s == approx(5e-6));
  CHECK(sc.cluster.gpu.sms == 128);
  CHECK(sc.layout.dp == 4);
}

TEST_CASE("hf_config is read relative to the scenario file") {
  const std::string dir = scratch_dir("hf");
  write(dir + "/config.json", R"({
  "architectures": ["LlamaForCausalLM"],
  "hidden_size": 2048,
  "intermediate_size": 5632,
  "num_attention_heads": 32,
  "num_hidden_layers": 22,
  "num_key_value_heads": 4,
  "vocab_size": 32000,
  "tie_word_embeddings": false
})");
  write(dir + "/s.toml", R"([model]
hf_config = "config.json"
[cluster]
preset = "dgx-h100"
[training]
seq_len = 2048
global_batch = 64
[layout]
tp = 4
)");
  const Scenario sc = load_scenario(dir + "/s.toml");
  CHECK(sc.model.layers == 22);
  CHECK(sc.model.kv_heads == 4);
  CHECK(sc.layout.dp == 2);

  write(dir + "/missing.toml", "[model]\nhf_config = \"nope.json\"\n[cluster]\npreset = \"dgx-h100\"\n"
                               "[training]\nseq_len = 8\nglobal_batch = 8\n[layout]\ntp = 1\n");
  CHECK(error_of([&] { (void)load_scenario(dir + "/missing.toml"); })
            .find("missing.toml:2:13: [model].hf_config: cannot read") != std::string::npos);
}

TEST_CASE("[cluster].profile is read relative to the scenario") {
  const std::string dir = scratch_dir("profile");
  tetra::costmodel::Profile p;
  p.meta.gpu = "h100-sxm-80gb";
  p.meta.source = "calibrate";
  p.meta.nccl = "2.21.5";
  write(dir + "/h100.profile.toml", format_profile(p));
  const std::string body = "[model]\npreset = \"llama2-7b\"\n[cluster]\npreset = \"dgx-h100\"\n"
                           "profile = \"PROFILE\"\n[training]\nseq_len = 8\nglobal_batch = 8\n"
                           "[layout]\ntp = 8\n";
  std::string good = body;
  good.replace(good.find("PROFILE"), 7, "h100.profile.toml");
  write(dir + "/s.toml", good);
  const Scenario sc = load_scenario(dir + "/s.toml");
  REQUIRE(sc.profile.has_value());
  CHECK(sc.profile->meta.nccl == "2.21.5");
  CHECK(sc.cluster.profile_path == dir + "/h100.profile.toml");

  std::string bad = body;
  bad.replace(bad.find("PROFILE"), 7, "nope.toml");
  write(dir + "/bad.toml", bad);
  CHECK(error_of([&] { (void)load_scenario(dir + "/bad.toml"); })
            .find("bad.toml:5:11: [cluster].profile: cannot read") != std::string::npos);
}

TEST_CASE("errors carry file:line:col and the key") {
  SUBCASE("syntax error") {
    const std::string e = error_of([] { (void)load("[model]\npreset = \"llama2-7b\n"); });
    CHECK(e.rfind("t.toml:2:", 0) == 0);
  }
  SUBCASE("unknown key, with the known keys listed") {
    const std::string e = error_of([] { (void)load(kBase + "tpp = 2\n"); });
    CHECK(e.rfind("t.toml:16:1: [layout].tpp: unknown key (did you mean tp? known keys: tp, cp, pp", 0) == 0);
  }
  SUBCASE("unknown key in a sub-table") {
    std::string text = kBase;
    text.replace(text.find("nodes = 4"), 9, "nodes = 4\n[cluster.gpu]\nmemroy = \"80GiB\"");
    CHECK(error_of([&] { (void)load(text); }).rfind("t.toml:8:1: [cluster.gpu].memroy: unknown key", 0) == 0);
  }
  SUBCASE("unknown table") {
    CHECK(error_of([] { (void)load(kBase + "[layuot]\ntp = 1\n"); }).rfind("t.toml:16:2: layuot:", 0) == 0);
  }
  SUBCASE("wrong type") {
    std::string text = kBase;
    text.replace(text.find("tp = 2"), 6, "tp = \"2\"");
    CHECK(error_of([&] { (void)load(text); }) ==
          "t.toml:13:6: [layout].tp: expected an integer, got a string");
  }
  SUBCASE("bad unit") {
    std::string text = kBase;
    text.replace(text.find("nodes = 4"), 9, "nodes = 4\n[cluster.gpu]\nmemory = \"80 parsecs\"");
    CHECK(error_of([&] { (void)load(text); }).rfind("t.toml:8:10: [cluster.gpu].memory: expected a size", 0) == 0);
  }
  SUBCASE("a number where a unit string is needed") {
    std::string text = kBase;
    text.replace(text.find("nodes = 4"), 9, "nodes = 4\n[cluster.gpu]\nmemory = 80");
    CHECK(error_of([&] { (void)load(text); })
              .rfind("t.toml:8:10: [cluster.gpu].memory: expected a string with a unit", 0) == 0);
  }
  SUBCASE("absurd values") {
    std::string text = kBase;
    text.replace(text.find("nodes = 4"), 9, "nodes = 0");
    CHECK(error_of([&] { (void)load(text); }).rfind("t.toml:6:9: [cluster].nodes: must be between 1", 0) == 0);
    text = kBase;
    text.replace(text.find("global_batch = 256"), 18, "global_batch = -1");
    CHECK(error_of([&] { (void)load(text); }).rfind("t.toml:10:16: [training].global_batch:", 0) == 0);
    text = kBase;
    text.replace(text.find("preset = \"llama2-7b\""), 20, "preset = \"llama2-7b\"\nlayers = 10000000");
    CHECK(error_of([&] { (void)load(text); }).rfind("t.toml:3:10: [model].layers:", 0) == 0);
  }
  SUBCASE("unknown preset lists the built-ins") {
    std::string text = kBase;
    text.replace(text.find("llama2-7b"), 9, "llama9-1t");
    const std::string e = error_of([&] { (void)load(text); });
    CHECK(e.rfind("t.toml:2:10: [model].preset: unknown model preset \"llama9-1t\"", 0) == 0);
    CHECK(e.find("llama3.1-70b") != std::string::npos);
  }
  SUBCASE("unknown enum value lists the allowed ones") {
    const std::string e = error_of([] { (void)load(kBase + "schedule = \"1f2b\"\n"); });
    CHECK(e == "t.toml:16:12: [layout].schedule: unknown value \"1f2b\" (expected one of: gpipe, "
               "1f1b, interleaved, zb-h1, layered)");
  }
  SUBCASE("cp_comm_type: the name, then Transformer Engine's rules, blamed on the key's line") {
    std::string e = error_of([] { (void)load(kBase + "cp_comm_type = \"ring\"\n"); });
    CHECK(e == "t.toml:16:16: [layout].cp_comm_type: unknown value \"ring\" (expected one of: p2p, all_gather, a2a, a2a+p2p)");
    // Llama 3.1 8B's 8 KV heads over tp 2 leave 4 a rank, which cp 8 cannot split.
    std::string text = kBase;
    text.replace(text.find("llama2-7b"), 9, "llama3.1-8b");
    e = error_of([&] { (void)load(text + "cp = 8\ncp_comm_type = \"a2a\"\n"); });
    CHECK(e.rfind("t.toml:17:16: [layout].cp_comm_type: cp_comm_type=\"a2a\" needs heads/tp = 16 and kv_heads/tp = 4 "
                  "divisible by cp=8", 0) == 0);
    CHECK(load(text + "cp = 8\ncp_comm_type = \"allgather\"\n").layout.cp_comm == tetra::parallel::CpComm::all_gather);
    // a2a+p2p: the all-to-all level, cp_a2a, blamed on its line; on the [layout] table when it
    // is missing; a cp_a2a without the scheme it sizes is refused too.
    const auto hcp = load(text + "cp = 8\ncp_comm_type = \"a2a+p2p\"\ncp_a2a = 4\n");
    CHECK(hcp.layout.cp_comm == tetra::parallel::CpComm::a2a_p2p);
    CHECK(hcp.layout.cp_a2a == 4);
    e = error_of([&] { (void)load(text + "cp = 8\ncp_comm_type = \"a2a+p2p\"\ncp_a2a = 3\n"); });
    CHECK(e.rfind("t.toml:18:10: [layout].cp_a2a: cp_comm_type=\"a2a+p2p\" needs cp_a2a", 0) == 0);
    e = error_of([&] { (void)load(text + "cp = 8\ncp_comm_type = \"a2a+p2p\"\n"); });
    CHECK(e.rfind("t.toml:12:1: [layout].cp_a2a:", 0) == 0);
    CHECK(e.find("(got 1)") != std::string::npos);
    e = error_of([&] { (void)load(text + "cp = 8\ncp_a2a = 2\n"); });
    CHECK(e.rfind("t.toml:17:10: [layout].cp_a2a: cp_a2a=2 sizes the all-to-all level of cp_comm_type=\"a2a+p2p\"", 0) == 0);
  }
  SUBCASE("missing tables name the table") {
    CHECK(error_of([] { (void)load("[cluster]\npreset = \"dgx-h100\"\n"); }).rfind("t.toml: [model]: missing table", 0) == 0);
    CHECK(error_of([] { (void)load("[model]\npreset = \"llama2-7b\"\n"); }).rfind("t.toml: [cluster]: missing table", 0) == 0);
    CHECK(error_of([] {
            (void)load("[model]\npreset = \"llama2-7b\"\n[cluster]\npreset = \"dgx-h100\"\n"
                       "[training]\nseq_len = 8\nglobal_batch = 8\n");
          }).rfind("t.toml: [layout]: missing table", 0) == 0);
  }
  SUBCASE("a missing shape key without a preset") {
    CHECK(error_of([] { (void)load("[model]\nlayers = 2\n[cluster]\npreset = \"dgx-h100\"\n[training]\n"); })
              .rfind("t.toml:1:1: [model]: missing key 'hidden'", 0) == 0);
  }
  SUBCASE("missing file") {
    CHECK(error_of([] { (void)load_scenario("/nonexistent/x.toml"); }) == "/nonexistent/x.toml: no such file");
  }
}

TEST_CASE("[cluster.inter_node] pods: whole nodes, and an oversubscription needs them") {
  std::string text = kBase;
  text.replace(text.find("nodes = 4"), 9, "nodes = 4\n[cluster.inter_node]\npod_gpus = 16\noversubscription = 7");
  const Scenario ok = load(text);
  CHECK(ok.cluster.inter.pod_gpus == 16);
  CHECK(ok.cluster.inter.oversubscription == 7.0);
  text = kBase;
  text.replace(text.find("nodes = 4"), 9, "nodes = 4\n[cluster.inter_node]\npod_gpus = 12");
  CHECK(error_of([&] { (void)load(text); }) ==
        "t.toml:8:12: [cluster.inter_node].pod_gpus: a pod holds whole nodes: 12 is not a multiple of 8 GPUs per node");
  text = kBase;
  text.replace(text.find("nodes = 4"), 9, "nodes = 4\n[cluster.inter_node]\noversubscription = 2");
  CHECK(error_of([&] { (void)load(text); }) ==
        "t.toml:8:20: [cluster.inter_node].oversubscription: names no pods: give pod_gpus, the GPUs under full "
        "bisection bandwidth");
}

TEST_CASE("layout rules point at the key that breaks them") {
  SUBCASE("tp must divide the heads") {
    std::string text = kBase;
    text.replace(text.find("preset = \"llama2-7b\""), 20, "preset = \"llama2-7b\"\nheads = 36\nhidden = 4608\nkv_heads = 36");
    text.replace(text.find("tp = 2"), 6, "tp = 8");
    const std::string e = error_of([&] { (void)load(text); });
    CHECK(e.rfind("t.toml:16:6: [layout].tp: ", 0) == 0);
  }
  SUBCASE("world size: given dp does not match") {
    const std::string e = error_of([] { (void)load(kBase + "dp = 4\n"); });
    CHECK(e.rfind("t.toml:", 0) == 0);
    CHECK(e.find(":16:") != std::string::npos);  // blames a [layout] key of this file
  }
  SUBCASE("world size: tp*cp*pp does not divide the cluster") {
    std::string text = kBase;
    text.replace(text.find("pp = 2"), 6, "pp = 3");
    const std::string e = error_of([&] { (void)load(text); });
    CHECK(e.rfind("t.toml:12:1: [layout]: tp*cp*pp = 2*1*3 = 6 does not divide the 32 GPUs", 0) == 0);
  }
  SUBCASE("rank_order must be a permutation") {
    const std::string e = error_of([] { (void)load(kBase + "rank_order = \"tp-dp-pp\"\n"); });
    CHECK(e.rfind("t.toml:16:14: [layout].rank_order: \"tp-dp-pp\" must name tp, cp, dp and pp", 0) == 0);
    CHECK_NOTHROW((void)load(kBase + "rank_order = \"pp-dp-cp-tp\"\n"));
  }
  SUBCASE("sp needs tp > 1") {
    std::string text = kBase;
    text.replace(text.find("tp = 2"), 6, "tp = 1\nsp = true");
    CHECK(error_of([&] { (void)load(text); }).rfind("t.toml:", 0) == 0);
  }
  SUBCASE("search tolerates an invalid layout") {
    const Scenario sc = load(kBase + "dp = 4\n", {}, false);
    CHECK_FALSE(sc.has_layout);
    const Scenario none = load("[model]\npreset = \"llama2-7b\"\n[cluster]\npreset = \"dgx-h100\"\n"
                               "[training]\nseq_len = 8\nglobal_batch = 8\n", {}, false);
    CHECK_FALSE(none.has_layout);
  }
}

TEST_CASE("--layout overrides the file and names itself in errors") {
  const Scenario sc = load(kBase, "tp=4,pp=1,mbs=2,sp=true,recompute=selective,schedule=gpipe");
  CHECK(sc.layout.tp == 4);
  CHECK(sc.layout.pp == 1);
  CHECK(sc.layout.dp == 8);
  CHECK(sc.layout.mbs == 2);
  CHECK(sc.layout.sp);
  CHECK(sc.layout.recompute == tetra::parallel::Recompute::selective);
  CHECK(sc.layout.schedule == tetra::parallel::Schedule::gpipe);

  CHECK(error_of([] { (void)load(kBase, "tp=two"); }) == "--layout: tp: expected an integer, got a string");
  CHECK(error_of([] { (void)load(kBase, "tq=2"); }).rfind("--layout: tq: unknown key", 0) == 0);
  CHECK(error_of([] { (void)load(kBase, "tp"); }) ==
          "--layout: tp: expected key=value, or a whole number after 'tp' as search prints it (tp8)");
  CHECK(error_of([] { (void)load(kBase, "tp=1,tp=2"); }) == "--layout: tp: given twice");
  CHECK(error_of([] { (void)load(kBase, "tp=3"); }).rfind("--layout: tp: ", 0) == 0);
  // A layout given only on the command line is enough.
  CHECK(load("[model]\npreset = \"llama2-7b\"\n[cluster]\npreset = \"dgx-h100\"\n"
             "[training]\nseq_len = 8\nglobal_batch = 8\n", "tp=8").layout.dp == 1);
}

TEST_CASE("layout strings round-trip") {
  tetra::parallel::Layout l;
  apply_layout_string(l, " tp = 2 , cp=2,pp=4,vp=2,mbs=1,sp=true,recompute=full,schedule=interleaved,"
                         "rank_order=tp-dp-cp-pp,dp=3", "--layout");
  CHECK(l.tp == 2);
  CHECK(l.cp == 2);
  CHECK(l.dp == 3);
  CHECK(l.schedule == tetra::parallel::Schedule::interleaved);
  CHECK(l.rank_order == "tp-dp-cp-pp");
  const std::string text = format_layout(l);
  CHECK(text == "tp=2,cp=2,pp=4,dp=3,vp=2,mbs=1,sp=true,recompute=full,schedule=interleaved,"
                "rank_order=tp-dp-cp-pp");
  tetra::parallel::Layout back;
  apply_layout_string(back, text, "x");
  CHECK(format_layout(back) == text);
  // The PyTorch-native knobs travel too (plan shards carry layouts as these strings).
  apply_layout_string(l, "recompute=selective_layer,ac_freq=4,dp_replicate=3", "--layout");
  const std::string torch = format_layout(l);
  CHECK(torch.find(",ac_freq=4,dp_replicate=3,") != std::string::npos);
  tetra::parallel::Layout back2;
  apply_layout_string(back2, torch, "x");
  CHECK(back2 == l);
  CHECK(error_of([] {
          tetra::parallel::Layout x;
          apply_layout_string(x, "sp=yes", "--layout");
        }) == "--layout: sp: expected true or false, got a string");
  // Megatron-Core's recompute_modules, joined by '+' in this form.
  apply_layout_string(l, "recompute=selective,recompute_modules=layernorm+moe_act", "--layout");
  const std::string modules = format_layout(l);
  CHECK(modules.find(",recompute=selective,recompute_modules=moe_act+layernorm,") != std::string::npos);
  tetra::parallel::Layout back3;
  apply_layout_string(back3, modules, "x");
  CHECK(back3.recompute_modules == l.recompute_modules);
  CHECK(back3.recompute == tetra::parallel::Recompute::selective);
  const std::string bad = error_of([] {
    tetra::parallel::Layout x;
    apply_layout_string(x, "recompute_modules=moe_act+attention", "--layout");
  });
  CHECK(bad.find("recompute_modules: unknown module \"attention\"") != std::string::npos);
}

TEST_CASE("[layout] recompute_modules: a TOML array of Megatron-Core's module names") {
  // kBase ends inside its [layout] table.
  const auto sc = load(kBase + "recompute = \"selective\"\nrecompute_modules = [\"layernorm\"]\n");
  CHECK(sc.layout.recompute_modules.has(tetra::parallel::RecomputeModule::layernorm));
  const std::string bad = error_of([] {
    (void)load(kBase + "recompute = \"full\"\nrecompute_modules = [\"layernorm\"]\n");
  });
  CHECK(bad.find("t.toml") != std::string::npos);
  CHECK(bad.find("recompute_modules") != std::string::npos);
  CHECK(bad.find("selective") != std::string::npos);
}

TEST_CASE("[search] lists") {
  const Scenario sc = load(kBase + R"([search]
tp = [1, 2]
cp = 1
pp = [1, 2, 4]
mbs = [1, 2]
vp = [1, 2]
recompute = ["none", "full"]
schedule = ["1f1b", "interleaved"]
sp = [true, false]
memory_fraction = 0.9
)");
  CHECK(sc.has_search);
  CHECK(sc.search.tp == std::vector<int>{1, 2});
  CHECK(sc.search.cp == std::vector<int>{1});
  CHECK_FALSE(sc.search.pp_divisors);
  CHECK(sc.search.pp == std::vector<int>{1, 2, 4});
  CHECK(sc.search.recompute.size() == 2);
  CHECK(sc.search.sp == std::vector<bool>{true, false});
  CHECK(sc.search.memory_fraction == approx(0.9));
  CHECK(error_of([] { (void)load(kBase + "[search]\npp = \"all\"\n"); })
            .rfind("t.toml:17:6: [search].pp: expected \"divisors\"", 0) == 0);
  CHECK(error_of([] { (void)load(kBase + "[search]\ntp = []\n"); }).rfind("t.toml:17:6: [search].tp: empty list", 0) == 0);
  CHECK(error_of([] { (void)load(kBase + "[search]\nmemory_fraction = 1.5\n"); })
            .rfind("t.toml:17:19: [search].memory_fraction:", 0) == 0);
  CHECK(load(kBase + "[search]\nrank_order = [\"tp-cp-dp-pp\", \"tp-cp-pp-dp\"]\n").search.rank_order ==
        std::vector<std::string>{"tp-cp-dp-pp", "tp-cp-pp-dp"});
  CHECK(error_of([] { (void)load(kBase + "[search]\nrank_order = [\"tp-cp-dp\"]\n"); })
            .rfind("t.toml:17:15: [search].rank_order:", 0) == 0);
}

TEST_CASE("CSV records: quotes, doubled quotes, CRLF, BOM, blank lines") {
  const auto recs = parse_csv("\xEF\xBB\xBF" "a,b,c\r\n1,\"x, y\",\"say \"\"hi\"\"\"\r\n\r\n2,\"two\nlines\",\r\n", "m.csv");
  REQUIRE(recs.size() == 3);
  CHECK(recs[0].fields == std::vector<std::string>{"a", "b", "c"});
  CHECK(recs[1].fields == std::vector<std::string>{"1", "x, y", "say \"hi\""});
  CHECK(recs[2].line == 4);
  CHECK(recs[2].fields == std::vector<std::string>{"2", "two\nlines", ""});
  CHECK(error_of([] { (void)parse_csv("a,b\n1,\"open\n", "m.csv"); }).rfind("m.csv:2: unterminated", 0) == 0);
  CHECK(error_of([] { (void)parse_csv("a,b\n1,\"x\"y\n", "m.csv"); }).rfind("m.csv:2: unexpected character", 0) == 0);
}

namespace {
const std::string kHeader =
    "id,source,group,model,cluster,n_gpus,tp,cp,pp,vp,mbs,gbs,seq_len,sp,recompute,options,metric,value,note\n";
}

TEST_CASE("measurement rows resolve into model, cluster, training and layout") {
  const auto rows = read_measurements_text(
      kHeader +
          "r1,src,g,llama2-7b,dgx-a100-80gb,16,2,1,2,1,1,64,4096,1,selective,attention=flash1;zero_stage=0,outcome,oom,\"a, note\"\n"
          "r2,src,g,llama2-7b,dgx-h100,16,2,1,2,,1,64,4096,1,none,,step_time_s,1.5,\n"
          "r3,src,g,llama2-7b,dgx-h100,16,3,1,1,1,1,64,4096,0,none,,peak_reserved_gib,40,\n"
          "r4,src,g,llama2-7b,dgx-h100,4,1,1,1,1,1,64,4096,0,full,,outcome,ok,\n"
          "r5,src,g,llama2-7b,dgx-h100,16,2,1,4,2,1,64,4096,0,none,dp=2,mfu,0.4,\n",
      "m.csv");
  REQUIRE(rows.size() == 5);
  CHECK(rows[0].line == 2);
  CHECK(rows[0].value == 0);
  CHECK(rows[0].metric == Metric::outcome);
  CHECK(rows[0].skip_reason.empty());
  CHECK(rows[0].cluster.nodes == 2);
  CHECK(rows[0].layout.dp == 4);
  CHECK(rows[0].layout.sp);
  CHECK(rows[0].layout.recompute == tetra::parallel::Recompute::selective);
  CHECK(rows[0].training.attention == tetra::parallel::AttentionKernel::flash1);
  CHECK(rows[0].training.zero_stage == 0);
  CHECK(rows[0].training.global_batch == 64);
  CHECK(rows[0].columns.at("note") == "a, note");
  CHECK(rows[1].skip_reason == "layout cell 'vp' is blank");
  CHECK(rows[2].skip_reason.find("tp") != std::string::npos);  // tp 3 does not divide 32 heads
  CHECK(rows[3].value == 1);
  CHECK(rows[3].cluster.gpus_per_node == 4);  // less than one node
  CHECK(rows[3].cluster.nodes == 1);
  CHECK(rows[4].layout.schedule == tetra::parallel::Schedule::interleaved);
  CHECK(rows[4].skip_reason.empty());
}

TEST_CASE("a row its source flags as measuring a bug is read, then skipped with the flag") {
  const std::string header =
      "id,model,cluster,n_gpus,tp,pp,vp,mbs,gbs,seq_len,metric,value,known_issue\n";
  const auto rows = read_measurements_text(
      header +
          "ok,llama2-7b,dgx-h100,8,1,1,1,1,64,4096,step_time_s,1.5,\n"
          "bug,llama2-7b,dgx-h100,8,1,1,1,1,64,4096,step_time_s,2.5, kernel regression #1 \n"
          "both,llama2-7b,dgx-h100,8,1,1,,1,64,4096,step_time_s,2.5,kernel regression #1\n",
      "k.csv");
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].skip_reason.empty());
  CHECK(rows[1].skip_reason == "known issue: kernel regression #1");
  CHECK(rows[1].value == 2.5);  // the row is still read in full
  // The source's flag comes first: it says why the number is not the layout's.
  CHECK(rows[2].skip_reason == "known issue: kernel regression #1");
  // A malformed flagged row is still an error, not a skip.
  CHECK_THROWS_AS(read_measurements_text(header + "x,llama2-7b,dgx-h100,8,1,1,1,1,64,4096,step_time_s,-1,bug\n",
                                         "k.csv"),
                  tetra::UserError);
}

TEST_CASE("malformed measurement files name file:line and the column") {
  CHECK(error_of([] { (void)read_measurements_text("id,model\nx,llama2-7b\n", "m.csv"); }) ==
        "m.csv:1: cluster: required column is missing from the header (see docs/accuracy.md)");
  CHECK(error_of([] {
          (void)read_measurements_text(kHeader + "r1,s,g,llama2-7b,dgx-h100,eight,1,1,1,1,1,8,8,0,none,,outcome,ok,\n", "m.csv");
        }) == "m.csv:2: n_gpus: expected an integer, got \"eight\"");
  CHECK(error_of([] {
          (void)read_measurements_text(kHeader + "r1,s,g,llama2-7b,dgx-h100,8,1,1,1,1,1,8,8,0,none,,outcome,maybe,\n", "m.csv");
        }).rfind("m.csv:2: value: an outcome is \"ok\" or \"oom\"", 0) == 0);
  CHECK(error_of([] {
          (void)read_measurements_text(kHeader + "r1,s,g,llama2-7b,dgx-h100,8,1,1,1,1,1,8,8,0,none,,speed,3,\n", "m.csv");
        }).rfind("m.csv:2: metric: unknown metric \"speed\"", 0) == 0);
  CHECK(error_of([] {
          (void)read_measurements_text(kHeader + "r1,s,g,llama9,dgx-h100,8,1,1,1,1,1,8,8,0,none,,mfu,0.3,\n", "m.csv");
        }).rfind("m.csv:2: model: \"llama9\" is neither a built-in model", 0) == 0);
  CHECK(error_of([] {
          (void)read_measurements_text(kHeader + "r1,s,g,llama2-7b,dgx-h100,8,1,1,1,1,1,8,8,0,none,zero_stage=7,mfu,0.3,\n", "m.csv");
        }) == "m.csv:2: options: zero_stage: must be between 0 and 3, got 7");
  CHECK(error_of([] {
          (void)read_measurements_text(kHeader + "r1,s,g,llama2-7b,dgx-h100,8,1,1,1,1,1,8,8,0,none,,mfu,0.3,\n"
                                                 "r1,s,g,llama2-7b,dgx-h100,8,1,1,1,1,1,8,8,0,none,,mfu,0.3,\n", "m.csv");
        }) == "m.csv:3: id: duplicate id \"r1\" (first on line 2)");
  CHECK(error_of([] { (void)read_measurements_text(kHeader + "r1,s,g\n", "m.csv"); })
            .rfind("m.csv:2: expected 19 fields like the header, got 3", 0) == 0);
}

TEST_CASE("model and cluster cells may be TOML files relative to the CSV") {
  const std::string dir = scratch_dir("csv");
  write(dir + "/tiny.toml", "[model]\narch = \"llama\"\nlayers = 4\nhidden = 512\nffn_hidden = 1024\n"
                            "heads = 8\nvocab = 1000\n");
  write(dir + "/box.toml", "[cluster]\ngpus_per_node = 2\n[cluster.gpu]\npreset = \"a100-sxm-40gb\"\n"
                           "[cluster.intra_node]\nbandwidth = \"32GB/s\"\nkind = \"pcie\"\n"
                           "[cluster.inter_node]\nnics_per_node = 1\nnic_bandwidth = \"100Gb/s\"\n");
  write(dir + "/bad.toml", "[cluster]\ngpus_per_node = 2\nfoo = 1\n");
  write(dir + "/m.csv", kHeader + "r1,s,g,tiny.toml,box.toml,4,2,1,1,1,1,8,128,0,none,,outcome,ok,\n"
                                  "r2,s,g,tiny.toml,box.toml,2,1,1,2,1,1,8,128,0,none,,outcome,ok,\n");
  const auto rows = read_measurements(dir + "/m.csv");
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].model.layers == 4);
  CHECK(rows[0].cluster.nodes == 2);
  CHECK(rows[0].cluster.gpu.memory_bytes == approx(40536 * tetra::units::kMiB));  // the a100-sxm-40gb preset
  CHECK(rows[0].layout.dp == 2);
  CHECK(rows[1].cluster.nodes == 1);
  write(dir + "/n.csv", kHeader + "r1,s,g,tiny.toml,bad.toml,4,2,1,1,1,1,8,128,0,none,,outcome,ok,\n");
  CHECK(error_of([&] { (void)read_measurements(dir + "/n.csv"); }).find("bad.toml:3:1: [cluster].foo: unknown key") != std::string::npos);
}

TEST_CASE("the shipped validation files parse") {
  const std::string dir = std::string(TETRA_SOURCE_DIR) + "/data/validation/";
  const auto hag = read_measurements(dir + "hagemann2023.csv");
  CHECK(hag.size() == 1365);
  int outcome = 0;
  for (const auto& r : hag) outcome += r.metric == Metric::outcome ? 1 : 0;
  CHECK(outcome == 964);
  const auto sel = read_measurements(dir + "megatron_selene.csv");
  CHECK(sel.size() == 19);
  const auto h100 = read_measurements(dir + "megatron_h100.csv");
  REQUIRE(h100.size() == 9);
  for (const auto& r : h100) CHECK(r.skip_reason == "layout cell 'vp' is blank");
}

}  // TEST_SUITE


TEST_CASE("loader: cuda_graph takes Megatron-Core's scopes, as an array or joined by '+'") {
  std::string text = kBase;
  text.replace(text.find("global_batch = 256"), 18,
               "global_batch = 256\ncuda_graph = [\"attn\", \"moe_router\"]");
  const Scenario s = load(text);
  CHECK(s.training.cuda_graphs.has(tetra::parallel::CudaGraphScope::attn));
  CHECK(s.training.cuda_graphs.has(tetra::parallel::CudaGraphScope::moe_router));
  CHECK_FALSE(s.training.cuda_graphs.has(tetra::parallel::CudaGraphScope::moe));
  text = kBase;
  text.replace(text.find("global_batch = 256"), 18, "global_batch = 256\ncuda_graph = \"full_iteration\"");
  CHECK(load(text).training.cuda_graphs.has(tetra::parallel::CudaGraphScope::full_iteration));
  text = kBase;
  text.replace(text.find("global_batch = 256"), 18, "global_batch = 256\ncuda_graph = \"attn+router\"");
  CHECK(error_of([&] { (void)load(text); })
            .rfind("t.toml:11:14: [training].cuda_graph: unknown scope \"router\"", 0) == 0);
}

TEST_CASE("[cluster].gpu_speed_spread: 1 % by default, 0 prices every GPU at the median, out of range refused") {
  const std::string head = "[model]\npreset = \"llama3.1-8b\"\n[training]\nseq_len = 4096\nglobal_batch = 8\n"
                           "[cluster]\npreset = \"dgx-h100\"\nnodes = 2\n";
  CHECK(load(head, {}, false).cluster.gpu_speed_spread == approx(0.01));
  CHECK(load(head + "gpu_speed_spread = 0\n", {}, false).cluster.gpu_speed_spread == 0.0);
  const std::string err = error_of([&] { (void)load(head + "gpu_speed_spread = 0.7\n", {}, false); });
  CHECK(err.rfind("t.toml:9:", 0) == 0);
  CHECK(err.find("[cluster].gpu_speed_spread") != std::string::npos);
}

TEST_CASE("[training] dataloader_mask and [cluster.host]: Megatron's host-built mask, the host's rates") {
  std::string text = kBase;
  text.replace(text.find("global_batch = 256"), 18, "global_batch = 256\ndataloader_mask = \"per_sample\"");
  const Scenario sc = load(text);
  REQUIRE(sc.training.dataloader_mask);
  CHECK(*sc.training.dataloader_mask == tetra::parallel::LoaderMask::per_sample);
  CHECK(tetra::parallel::loader_mask(load(kBase).training) == tetra::parallel::LoaderMask::cached);
  // The PyTorch-native loaders build no mask: asking for one is an error at the key (line 12).
  std::string fsdp = text;
  fsdp.replace(fsdp.find("global_batch = 256"), 18, "global_batch = 256\nframework = \"fsdp\"");
  const std::string e = error_of([&] { (void)load(fsdp); });
  CHECK(e.rfind("t.toml:12:19:", 0) == 0);
  CHECK(e.find("[training].dataloader_mask") != std::string::npos);
  CHECK(e.find("framework \"fsdp\" builds none") != std::string::npos);
  // [cluster.host]: the two rates, defaults from tests/data/calib/host_rates_epyc_kvm.toml.
  CHECK(load(kBase).cluster.host.first_touch_Bps == approx(2.73e9));
  CHECK(load(kBase).cluster.host.copy_Bps == approx(18.85e9));
  std::string host = kBase;
  host.replace(host.find("nodes = 4"), 9, "nodes = 4\n[cluster.host]\nfirst_touch_bandwidth = \"5GB/s\"\ncopy_bandwidth = \"40GB/s\"");
  const Scenario h = load(host);
  CHECK(h.cluster.host.first_touch_Bps == approx(5e9));
  CHECK(h.cluster.host.copy_Bps == approx(40e9));
  host = kBase;
  host.replace(host.find("nodes = 4"), 9, "nodes = 4\n[cluster.host]\ncopy_bandwidth = \"-1GB/s\"");
  const std::string bad = error_of([&] { (void)load(host); });
  CHECK(bad.rfind("t.toml:8:", 0) == 0);
  CHECK(bad.find("[cluster.host].copy_bandwidth") != std::string::npos);
}

TEST_CASE("[cluster.gpu] host_link_bandwidth: the preset's PCIe link, or the scenario's") {
  // kBase runs on DGX A100: PCIe Gen4 x16, 32 GB/s a direction (A100 datasheet: 64 GB/s both).
  CHECK(load(kBase).cluster.gpu.host_link_Bps == approx(32e9));
  std::string text = kBase;
  text.replace(text.find("nodes = 4"), 9, "nodes = 4\n[cluster.gpu]\nhost_link_bandwidth = \"900GB/s\"");
  CHECK(load(text).cluster.gpu.host_link_Bps == approx(900e9));
  text = kBase;
  text.replace(text.find("nodes = 4"), 9, "nodes = 4\n[cluster.gpu]\nhost_link_bandwidth = \"0GB/s\"");
  const std::string bad = error_of([&] { (void)load(text); });
  CHECK(bad.rfind("t.toml:8:", 0) == 0);
  CHECK(bad.find("[cluster.gpu].host_link_bandwidth") != std::string::npos);
}

TEST_CASE("[cluster.host] defaults are the recorded `tetrasim calibrate --host` medians") {
  std::ifstream in(std::string(TETRA_SOURCE_DIR) + "/tests/data/calib/host_rates_epyc_kvm.toml");
  REQUIRE(in);
  std::stringstream recorded;
  recorded << in.rdbuf();
  const Scenario sc = load(kBase + recorded.str());
  const tetra::hw::Host defaults;
  CHECK(sc.cluster.host.first_touch_Bps == approx(defaults.first_touch_Bps));
  CHECK(sc.cluster.host.copy_Bps == approx(defaults.copy_Bps));
}
