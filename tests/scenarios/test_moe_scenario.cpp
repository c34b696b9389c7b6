// Mixture-of-experts scenario keys ([model] MoE / MLA keys, [layout] ep / etp /
// moe_token_dispatcher, [training] moe_capacity_factor / moe_routing_imbalance), their errors
// with file:line:col, the MoE layout rules of Megatron-Core, and the MoE measurement file.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <algorithm>
#include <string>

#include "tetra/base/error.hpp"
#include "tetra/model/moe.hpp"
#include "tetra/scenarios/measurements.hpp"
#include "tetra/scenarios/scenario.hpp"

using tetra::test::approx;
using tetra::UserError;
using namespace tetra::scenarios;

namespace {

// Qwen3-30B-A3B on 2 DGX H100 nodes: 16 GPUs, dp 16, ep 8 (line numbers matter below).
const std::string kMoe = R"([model]
preset = "qwen3-30b-a3b"

[cluster]
preset = "dgx-h100"
nodes = 2

[training]
seq_len = 4096
global_batch = 256

[layout]
tp = 1
pp = 1
mbs = 1
ep = 8
)";

Scenario load(const std::string& text) { return load_scenario_text(text, "t.toml", {}, true); }

std::string error_of(const std::string& text) {
  try {
    (void)load(text);
  } catch (const UserError& e) {
    MESSAGE(std::string(e.what()));
    return e.what();
  }
  return "";
}

std::string with(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

}  // namespace

TEST_SUITE("scenarios") {
  TEST_CASE("MoE keys load: preset, explicit keys, layout and training") {
    const Scenario sc = load(with(kMoe, "global_batch = 256",
                                  "global_batch = 256\nmoe_capacity_factor = 1.25\n"
                                  "moe_routing_imbalance = 1.1") +
                             "moe_token_dispatcher = \"allgather\"\n");
    REQUIRE(sc.model.moe);
    CHECK(sc.model.moe->num_experts == 128);
    CHECK(sc.model.head_dim() == 128);
    CHECK(sc.layout.ep == 8);
    CHECK(sc.layout.etp == 1);
    CHECK(sc.layout.edp() == 2);  // tp*cp*dp / (ep*etp) = 16 / 8
    CHECK(sc.layout.moe_dispatcher == tetra::parallel::MoeDispatcher::allgather);
    REQUIRE(sc.training.moe_capacity_factor);
    CHECK(*sc.training.moe_capacity_factor == approx(1.25));
    CHECK(sc.training.moe_imbalance == approx(1.1));
    CHECK_FALSE(sc.training.moe_pad_to_capacity);
    const Scenario padded = load(with(kMoe, "global_batch = 256",
                                      "global_batch = 256\nmoe_capacity_factor = 1.0\nmoe_pad_to_capacity = true"));
    CHECK(padded.training.moe_pad_to_capacity);
    CHECK_FALSE(padded.training.moe_counts_on_host());

    // A model written out key by key, as the validation model files are.
    const Scenario custom = load(with(kMoe, "preset = \"qwen3-30b-a3b\"",
                                      "layers = 4\nhidden = 1024\nffn_hidden = 4096\nheads = 8\n"
                                      "kv_heads = 8\nvocab = 32000\nnum_experts = 16\n"
                                      "experts_per_token = 2\nmoe_ffn_hidden = 512\nshared_experts = 1\n"
                                      "first_k_dense = 1\ninterleave_moe_layer_step = 1\n"
                                      "moe_router = \"sigmoid_topk\"\nq_lora_rank = 0\nkv_lora_rank = 128\n"
                                      "qk_nope_head_dim = 64\nqk_rope_head_dim = 32\nv_head_dim = 64"));
    REQUIRE(custom.model.moe);
    REQUIRE(custom.model.mla);
    CHECK(custom.model.moe->shared_width() == 512);
    CHECK(custom.model.moe->router == tetra::model::Router::sigmoid_topk);
    CHECK_FALSE(tetra::model::is_moe_layer(custom.model, 0));
    CHECK(tetra::model::is_moe_layer(custom.model, 1));
    CHECK(custom.model.mla->qk_head_dim() == 96);
  }

  TEST_CASE("MoE model errors name file:line:col and the key") {
    CHECK(error_of(with(kMoe, "preset = \"qwen3-30b-a3b\"",
                        "preset = \"qwen3-30b-a3b\"\nexperts_per_token = 200")) ==
          "t.toml:3:21: [model].experts_per_token: experts_per_token (200) must not exceed "
          "num_experts (128)");
    CHECK(error_of(with(kMoe, "preset = \"qwen3-30b-a3b\"", "preset = \"llama3.1-8b\"\nmoe_ffn_hidden = 512"))
              .rfind("t.toml:3:18: [model].moe_ffn_hidden: needs num_experts", 0) == 0);
    CHECK(error_of(with(kMoe, "preset = \"qwen3-30b-a3b\"",
                        "preset = \"qwen3-30b-a3b\"\nmoe_router = \"greedy\""))
              .rfind("t.toml:3:14: [model].moe_router: unknown value \"greedy\"", 0) == 0);
    CHECK(error_of(with(kMoe, "preset = \"qwen3-30b-a3b\"", "preset = \"qwen3-30b-a3b\"\nkv_lora_rank = 64"))
              .rfind("t.toml:3:16: [model].qk_nope_head_dim: missing", 0) == 0);
    // The per-head Q and K norms belong to standard attention (MLA normalises its latents).
    CHECK(error_of(with(kMoe, "preset = \"qwen3-30b-a3b\"",
                        "preset = \"qwen3-30b-a3b\"\nqk_norm = true\nkv_lora_rank = 64\nqk_nope_head_dim = 64\n"
                        "qk_rope_head_dim = 32\nv_head_dim = 64")) ==
          "t.toml:3:11: [model].qk_norm: applies to standard attention; MLA's latent norms are part of MLA");
    CHECK(error_of(with(kMoe, "preset = \"qwen3-30b-a3b\"", "preset = \"qwen3-30b-a3b\"\nqk_norm = 1"))
              .rfind("t.toml:3:11: [model].qk_norm: expected", 0) == 0);
    CHECK(load(kMoe).model.qk_norm);  // the preset's
    // MLA keys over a Qwen3 preset leave its per-head norms behind.
    CHECK_FALSE(load(with(kMoe, "preset = \"qwen3-30b-a3b\"",
                          "preset = \"qwen3-30b-a3b\"\nkv_lora_rank = 64\nqk_nope_head_dim = 64\n"
                          "qk_rope_head_dim = 32\nv_head_dim = 64"))
                    .model.qk_norm);
    CHECK_FALSE(load(with(kMoe, "preset = \"qwen3-30b-a3b\"", "preset = \"qwen3-30b-a3b\"\nqk_norm = false"))
                    .model.qk_norm);
  }

  TEST_CASE("MoE layout rules (Megatron-Core) blame the [layout] key") {
    // ep must divide the 128 experts (Megatron-LM arguments.py).
    CHECK(error_of(with(kMoe, "ep = 8", "ep = 3")).rfind(
              "t.toml:16:6: [layout].ep: ep=3 must divide num_experts=128", 0) == 0);
    // ep*etp must divide tp*cp*dp = 16 (parallel_state.initialize_model_parallel).
    CHECK(error_of(with(kMoe, "ep = 8", "ep = 32")).rfind(
              "t.toml:16:6: [layout].ep: ep*etp = 32*1 = 32 must divide tp*cp*dp = 1*1*16 = 16", 0) == 0);
    CHECK(error_of(with(kMoe, "ep = 8", "ep = 16\netp = 2")).rfind(
              "t.toml:17:7: [layout].etp: ep*etp = 16*2 = 32 must divide tp*cp*dp", 0) == 0);
    // ep with tp needs sequence parallelism (transformer_config.py).
    CHECK(error_of(with(kMoe, "tp = 1", "tp = 2")).rfind(
              "t.toml:12:1: [layout].sp: ep=8 with tp=2 needs sp=true", 0) == 0);
    CHECK_NOTHROW((void)load(with(kMoe, "tp = 1", "tp = 2\nsp = true")));
    // The flex (DeepEP) dispatcher needs expert TP x EP > 1 (MoEFlexTokenDispatcher).
    CHECK(error_of(with(kMoe, "ep = 8", "ep = 1\nmoe_token_dispatcher = \"flex\"")).rfind(
              "t.toml:17:24: [layout].moe_token_dispatcher: moe_token_dispatcher=\"flex\" needs ep*etp > 1", 0) == 0);
    // The flex dispatcher's backend (moe_flex_dispatcher_backend): HybridEP loads; on another
    // dispatcher it would do nothing, so it is refused; an unknown backend names the known ones.
    const Scenario hybrid = load(kMoe + "moe_token_dispatcher = \"flex\"\nmoe_flex_backend = \"hybridep\"\n");
    CHECK(hybrid.layout.moe_flex_backend == tetra::parallel::FlexBackend::hybridep);
    CHECK(load(kMoe).layout.moe_flex_backend == tetra::parallel::FlexBackend::deepep);
    CHECK(error_of(kMoe + "moe_flex_backend = \"hybridep\"\n") ==
          "t.toml:17:20: [layout].moe_flex_backend: moe_flex_backend=\"hybridep\" needs "
          "moe_token_dispatcher = \"flex\"");
    CHECK(error_of(kMoe + "moe_token_dispatcher = \"flex\"\nmoe_flex_backend = \"nccl\"\n")
              .rfind("t.toml:18:20: [layout].moe_flex_backend: unknown value \"nccl\" (expected one of: deepep, "
                     "hybridep)",
                     0) == 0);
    // Padding to capacity needs a capacity (transformer_config.py: "moe_expert_capacity_factor
    // must be set to use moe_pad_expert_input_to_capacity").
    CHECK(error_of(with(kMoe, "global_batch = 256", "global_batch = 256\nmoe_pad_to_capacity = true")) ==
          "t.toml:11:23: [training].moe_pad_to_capacity: moe_pad_to_capacity needs moe_capacity_factor");
    // Expert parallelism on a dense model.
    CHECK(error_of(with(kMoe, "preset = \"qwen3-30b-a3b\"", "preset = \"llama3.1-8b\"")).rfind(
              "t.toml:16:6: [layout].ep: ep=8 needs a mixture-of-experts model", 0) == 0);
  }

  TEST_CASE("moe_a2a_overlap: Megatron-Core's conditions for the combined 1F1B schedule") {
    // transformer_config.py (overlap_moe_expert_parallel_comm): expert parallelism, the
    // alltoall / flex dispatcher, no full recomputation, interleaving when pp > 1.
    const std::string on = "global_batch = 256\nmoe_a2a_overlap = true";
    CHECK(load(with(kMoe, "global_batch = 256", on)).training.moe_a2a_overlap);
    CHECK(error_of(with(with(kMoe, "global_batch = 256", on), "ep = 8", "ep = 1"))
              .rfind("t.toml:11:19: [training].moe_a2a_overlap: moe_a2a_overlap needs ep > 1", 0) == 0);
    CHECK(error_of(with(with(kMoe, "global_batch = 256", on), "ep = 8",
                        "ep = 8\nmoe_token_dispatcher = \"allgather\""))
              .rfind("t.toml:11:19: [training].moe_a2a_overlap: moe_a2a_overlap needs "
                     "moe_token_dispatcher = \"alltoall\" or \"flex\"", 0) == 0);
    CHECK(error_of(with(with(kMoe, "global_batch = 256", on), "mbs = 1", "mbs = 1\nrecompute = \"full\""))
              .rfind("t.toml:17:13: [layout].recompute: moe_a2a_overlap cannot run with full recomputation", 0) == 0);
    CHECK(error_of(with(with(kMoe, "global_batch = 256", on), "pp = 1", "pp = 2"))
              .rfind("t.toml:11:19: [training].moe_a2a_overlap: moe_a2a_overlap with pp=2 needs the "
                     "interleaved schedule (vp)", 0) == 0);
    CHECK(error_of(with(with(kMoe, "global_batch = 256", on), "preset = \"qwen3-30b-a3b\"",
                        "preset = \"llama3.1-8b\""))
              .rfind("t.toml:17:6: [layout].ep: ep=8 needs a mixture-of-experts model", 0) == 0);
  }

  TEST_CASE("the MoE validation file: ep column, force-balanced rows at imbalance 1.0") {
    const auto rows = read_measurements(std::string(TETRA_SOURCE_DIR) +
                                        "/data/validation/megatron_bridge_moe.csv");
    REQUIRE(rows.size() == 138);
    int balanced = 0;
    int selective = 0;
    for (const auto& r : rows) {
      CAPTURE(r.id);
      CHECK(r.model.moe);
      CHECK(r.layout.etp == 1);
      if (r.training.moe_imbalance == 1.0) ++balanced;
      // Every row carries its recipe's recomputation (none or Megatron-Core's selective with
      // its recompute_modules).
      CHECK(r.skip_reason.find("recompute") == std::string::npos);
      CHECK((r.layout.recompute == tetra::parallel::Recompute::none ||
             r.layout.recompute == tetra::parallel::Recompute::selective));
      if (r.layout.recompute == tetra::parallel::Recompute::selective) ++selective;
    }
    CHECK(balanced == 124);
    // 25.09's "(tokendrop)" rows ran with Megatron-Core's capacity factor 1.0, padded to capacity
    // (Bridge run_script.py / moe_token_drop.py at fa0315ae2); its "(dropless)" DeepSeek-V3 H100
    // row and every later release are dropless.
    for (const auto& r : rows) {
      CAPTURE(r.id);
      const bool token_drop = r.columns.at("note").find("(tokendrop)") != std::string::npos;
      CHECK(token_drop == (r.id.rfind("mbr-25.09-", 0) == 0 && r.id != "mbr-25.09-dsv3-h100-1024-fp8cs"));
      CHECK(r.training.moe_capacity_factor.has_value() == token_drop);
      CHECK(r.training.moe_pad_to_capacity == token_drop);
      if (token_drop) CHECK(*r.training.moe_capacity_factor == 1.0);
    }
    // The table's footnote on the 26.06.01 gpt-oss MXFP8 rows: a known regression.
    CHECK(std::count_if(rows.begin(), rows.end(), [](const auto& r) {
            return r.skip_reason.rfind("known issue: cudnn-frontend#256", 0) == 0;
          }) == 2);
    CHECK(selective == 46);
    // mbr-26.08-dsv3-gb300-256-mxfp8: EP 32, DeepSeek-V3 with MLA and its MTP module; the
    // recipe recomputes nothing.
    CHECK(rows[0].layout.ep == 32);
    CHECK(rows[0].model.mla);
    CHECK(rows[0].model.moe->first_k_dense == 3);
    CHECK(rows[0].model.mtp_layers == 1);
    CHECK(rows[0].layout.recompute == tetra::parallel::Recompute::none);
    // The recipe's pipeline_model_parallel_layout "Et*4|(t*4|)*14tmL" over pp 2 x vp 8: the
    // first rank holds virtual stages 0, 2, ..., 14 (4 layers each) = 32, the last 1, ..., 15
    // = 7 x 4 + 1 = 29.
    CHECK(rows[0].layout.vp == 8);
    CHECK(rows[0].layout.first_stage_layers == 32);
    CHECK(rows[0].layout.last_stage_layers == 29);
    // mbr-26.08-dsv3-gb200-256-mxfp8 recomputes MLA's up projections.
    CHECK(rows[1].layout.recompute_modules.has(tetra::parallel::RecomputeModule::mla_up_proj));
    // Each row dispatches as its note records from the recipe: 87 with HybridEP, 3 with DeepEP
    // (the flex dispatcher's two backends), 48 with the all-to-all.
    int hybridep = 0, deepep = 0;
    for (const auto& r : rows) {
      CAPTURE(r.id);
      const std::string& note = r.columns.at("note");
      const bool flex = r.layout.moe_dispatcher == tetra::parallel::MoeDispatcher::flex;
      const bool hybrid = flex && r.layout.moe_flex_backend == tetra::parallel::FlexBackend::hybridep;
      CHECK(hybrid == (note.find("dispatcher flex with hybridep") != std::string::npos));
      CHECK((flex && !hybrid) == (note.find("dispatcher flex with deepep") != std::string::npos));
      hybridep += hybrid ? 1 : 0;
      deepep += flex && !hybrid ? 1 : 0;
    }
    CHECK(hybridep == 87);
    CHECK(deepep == 3);
    // Two Qwen3-30B H100 rows print the previous release's layout, and two 25.11 gpt-oss rows a
    // micro-batch or an EP size their config does not have; their cells are the layout of the
    // release's config, as their notes cite.
    int from_config = 0;
    for (const auto& r : rows) {
      if (r.columns.at("note").find("LAYOUT FROM THE CONFIG") == std::string::npos) continue;
      CAPTURE(r.id);
      ++from_config;
      if (r.id == "mbr-25.11-q3-30b-h100-16-fp8cs") {
        CHECK((r.layout.pp == 2 && r.layout.vp == 12 && r.layout.mbs == 1 && r.layout.ep == 8));
      } else if (r.id == "mbr-25.11-gptoss-120b-h100-64-bf16") {
        CHECK((r.layout.pp == 4 && r.layout.mbs == 1 && r.layout.ep == 8));
      } else if (r.id == "mbr-25.11-gptoss-120b-b200-64-bf16") {
        CHECK((r.layout.pp == 1 && r.layout.mbs == 4 && r.layout.ep == 64));
      } else {
        CHECK(r.id == "mbr-26.02.01-q3-30b-h100-16-fp8cs");
        CHECK((r.layout.pp == 1 && r.layout.vp == 1 && r.layout.mbs == 1 && r.layout.ep == 16));
      }
    }
    CHECK(from_config == 4);
  }
}
