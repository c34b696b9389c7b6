// The compact layout spelling of search, plan and simulate reads back through --layout.

#include <doctest/doctest.h>

#include <string>

#include "tetra/base/error.hpp"
#include "tetra/scenarios/compact_layout.hpp"
#include "tetra/scenarios/scenario.hpp"
#include "tetra/search/enumerate.hpp"

using namespace tetra;

namespace {

/// A scenario of `model` on `nodes` DGX H100 nodes, [training] as given, without a layout.
std::string scenario(const char* model, int nodes, const std::string& training) {
  return std::string("[model]\npreset = \"") + model + "\"\n[cluster]\npreset = \"dgx-h100\"\nnodes = " +
         std::to_string(nodes) + "\n[training]\nseq_len = 4096\nglobal_batch = 512\n" + training;
}

/// Every valid layout of `space` reads back from its compact spelling: the same layout and the
/// same precision and compile.
int round_trip(const std::string& text, const search::SearchSpace& space, const parallel::Fp8Training& fp8,
               bool compile) {
  const scenarios::Scenario base = scenarios::load_scenario_text(text, "t.toml", {}, false);
  const search::Enumeration e =
      search::enumerate_layouts(base.model, base.cluster.total_gpus(), base.training, space);
  int n = 0;
  for (parallel::Layout l : e.valid) {
    const std::string compact = scenarios::compact_layout(l, fp8, compile);
    CAPTURE(compact);
    const scenarios::Scenario back = scenarios::load_scenario_text(text, "t.toml", compact, true);
    CHECK(scenarios::format_layout(back.layout) == scenarios::format_layout(l));
    CHECK(back.training.fp8.recipe == fp8.recipe);
    CHECK(back.training.torch.compile == compile);
    ++n;
  }
  return n;
}

}  // namespace

TEST_SUITE("scenarios") {

TEST_CASE("compact layouts: every valid layout of a search space reads back through --layout") {
  // Llama 3.1 405B's 126 layers on 256 GPUs: uneven first / last stages on pp 4, 8, 16, 32.
  search::SearchSpace dense;
  dense.tp = {4, 8};
  dense.cp = {1, 2};
  dense.vp = {1, 2};
  dense.mbs = {1, 2};
  dense.sp = {true, false};
  dense.recompute = {parallel::Recompute::none, parallel::Recompute::full, parallel::Recompute::selective_layer};
  dense.ac_freq = {2, 3};
  dense.schedule = {parallel::Schedule::one_f_one_b, parallel::Schedule::interleaved};
  CHECK(round_trip(scenario("llama3.1-405b", 32, ""), dense, {}, false) > 100);

  // FP8 recipes are [training] words of the compact form.
  parallel::Fp8Training fp8;
  fp8.recipe = parallel::Fp8Recipe::blockwise;
  search::SearchSpace small;
  small.tp = {2, 8};
  CHECK(round_trip(scenario("llama3.1-8b", 2, "precision = \"fp8\"\nfp8_recipe = \"blockwise\"\n"), small, fp8,
                   false) > 0);

  // HSDP's shards x replicas and torch.compile (framework fsdp).
  search::SearchSpace hsdp;
  hsdp.tp = {1, 2};
  hsdp.dp_replicate = {1, 2, 4};
  hsdp.recompute = {parallel::Recompute::none, parallel::Recompute::selective_op};
  CHECK(round_trip(scenario("llama3.1-8b", 2, "framework = \"fsdp\"\nzero_stage = 3\ncompile = true\n"), hsdp, {},
                   true) > 0);

  // Expert parallelism and expert TP.
  search::SearchSpace moe;
  moe.tp = {1, 2};
  moe.ep = {1, 4, 8};
  moe.etp = {1, 2};
  CHECK(round_trip(scenario("qwen3-30b-a3b", 2, ""), moe, {}, false) > 0);

  // Rank orders other than Megatron's default are a word of their own.
  search::SearchSpace orders;
  orders.tp = {2, 8};
  orders.rank_order = {"tp-cp-dp-pp", "tp-cp-pp-dp", "tp-pp-dp-cp"};
  const int both = round_trip(scenario("llama3.1-8b", 4, ""), orders, {}, false);
  orders.rank_order.clear();
  CHECK(both == 3 * round_trip(scenario("llama3.1-8b", 4, ""), orders, {}, false));
  CHECK(scenarios::compact_layout([] {
          parallel::Layout l;
          l.tp = 8;
          l.sp = true;
          l.rank_order = "tp-cp-pp-dp";
          return l;
        }(), {}, false) == "tp8 cp1 pp1 dp1 mbs1 1f1b tp-cp-pp-dp");

  // A cp_comm_type other than p2p in parentheses after cp: every exchange at cp 2 and 4, p2p at
  // cp 1 (three times the p2p-only count where cp > 1).
  search::SearchSpace comms;
  comms.tp = {1, 2};
  comms.cp = {1, 2, 4};
  comms.cp_comm = {parallel::CpComm::p2p, parallel::CpComm::all_gather, parallel::CpComm::a2a};
  const int all = round_trip(scenario("llama3.1-8b", 2, ""), comms, {}, false);
  comms.cp_comm.clear();
  const int ring = round_trip(scenario("llama3.1-8b", 2, ""), comms, {}, false);
  comms.cp = {1};
  const int none = round_trip(scenario("llama3.1-8b", 2, ""), comms, {}, false);
  CHECK(all == none + 3 * (ring - none));
  CHECK(scenarios::compact_layout([] {
          parallel::Layout l;
          l.cp = 4;
          l.cp_comm = parallel::CpComm::a2a;
          return l;
        }(), {}, false) == "tp1 cp4(a2a) pp1 dp1 mbs1 1f1b");
  // Hierarchical CP with its two levels, read back as cp_comm_type and cp_a2a.
  CHECK(scenarios::compact_layout([] {
          parallel::Layout l;
          l.cp = 8;
          l.cp_comm = parallel::CpComm::a2a_p2p;
          l.cp_a2a = 2;
          return l;
        }(), {}, false) == "tp1 cp8(a2a2+p2p4) pp1 dp1 mbs1 1f1b");
  const auto keys = scenarios::expand_compact_layout("tp1 cp8(a2a2+p2p4) pp1");
  REQUIRE(keys);
  CHECK(keys->layout.find("cp_comm_type=a2a+p2p") != std::string::npos);
  CHECK(keys->layout.find("cp_a2a=2") != std::string::npos);
}

TEST_CASE("compact layouts: a word --layout cannot read is refused, naming it") {
  const std::string text = scenario("llama3.1-8b", 1, "");
  for (const char* bad : {"tp8 fulll", "tp8 pp4(3/", "tp8 dpx", "tp8 pp4(3x1)", "tp8 cp2(ring)", "tp8 cp2(a2a",
                          "tp8 cpx(a2a)", "tp8 cp8(a2a2+p2p2)", "tp8 cp8(a2ax+p2p4)",
                          "tp8 cp8(a2a0+p2p4)", "tp8 cp8(a2a4294967296+p2p4294967296)"}) {
    CAPTURE(bad);
    try {
      (void)scenarios::load_scenario_text(text, "t.toml", bad, true);
      FAIL("accepted");
    } catch (const UserError& e) {
      CHECK(std::string(e.what()).rfind("--layout: ", 0) == 0);
    }
  }
}

}  // TEST_SUITE
