// MoE memory terms (costmodel/src/moe_memory.cpp): expert states sharded over EP and the
// expert data-parallel group, expert activations at top-k x tokens. Expected values are worked
// out by hand from the Qwen3-30B-A3B config (model/src/presets.cpp) in the comments.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include "tetra/costmodel/memory.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/parallel/params.hpp"
#include "tetra/model/presets.hpp"

using tetra::test::approx;
using namespace tetra;

namespace {

struct Setup {
  model::Model model;
  hw::Cluster cluster;
  parallel::Training training;
  parallel::Layout layout;
};

/// Qwen3-30B-A3B on 2 DGX H100 nodes: tp 1, pp 1, dp 16, ep 8 -> edp = 16/8 = 2; bf16 weights,
/// fp32 gradients, distributed optimizer (zero_stage 1), seq 4096, mbs 1, force-balanced routing.
Setup qwen_ep8() {
  Setup s;
  s.model = *model::find_model_preset("qwen3-30b-a3b");
  s.cluster = *hw::find_cluster_preset("dgx-h100");
  s.cluster.nodes = 2;
  s.training.seq_len = 4096;
  s.training.global_batch = 256;
  s.training.moe_imbalance = 1.0;
  s.layout.dp = 16;
  s.layout.ep = 8;
  return s;
}

}  // namespace

TEST_SUITE("costmodel") {
  TEST_CASE("expert states: E/ep experts per GPU, optimizer sharded over edp = tp*cp*dp/(ep*etp)") {
    const Setup s = qwen_ep8();
    const auto report = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout);
    REQUIRE(report.stages.size() == 1);
    const auto& st = report.stages[0];
    CHECK(st.moe_layers == 48);
    // Experts on one GPU: 48 layers x 128/8 experts x 3*2048*768 = 3,623,878,656 parameters;
    // bf16 weight 2 + fp32 gradient 4 + Adam 12 / edp 2 = 12 bytes each.
    CHECK(st.expert_states_bytes == approx(3'623'878'656.0 * 12.0));
    // The rest: 48 x (attention 18,874,368 + router 262,144 + norms 4,096) + 2 x 2048 x 151,936
    // + 2048 = 1,541,081,088 parameters, Adam states over dp x cp = 16:
    // 1,541,081,088 x 12/16 + 3,623,878,656 x 12/2 = 1,155,810,816 + 21,743,271,936.
    CHECK(st.optimizer_bytes == approx(22'899'082'752.0));
    CHECK(st.params_bytes == approx((1'541'081'088.0 + 3'623'878'656.0) * 2.0));

    // Twice the EP: half the experts per GPU and edp 1, so the expert optimizer states stay
    // the same per GPU (12 x 1,811,939,328 / 1) while weights and gradients halve.
    Setup s16 = s;
    s16.layout.ep = 16;
    const costmodel::StageMemory st16 = costmodel::estimate_memory(s16.model, s16.cluster, s16.training, s16.layout).stages[0];
    CHECK(st16.expert_states_bytes == approx(1'811'939'328.0 * (2.0 + 4.0 + 12.0)));
  }

  TEST_CASE("expert activations: top-k x tokens x imbalance, capped by the capacity factor") {
    Setup s = qwen_ep8();
    const costmodel::StageMemory st = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout).stages[0];
    // P = 4096 tokens x top-8 = 32,768 pairs; saved per layer: fc1 input 2Ph, fc1 output 4 P f_e,
    // fc2 input 2 P f_e and the fp32 probability of each pair, 4P, which Megatron-Core's weighted
    // SwiGLU keeps (core_v0.13.0: the expert output is no longer saved for unpermute's probability
    // gradient) = P (2 x 2048 + 6 x 768 + 4) = 32,768 x 8,708 = 285,343,744 bytes; one
    // micro-batch in flight (pp 1), 48 MoE layers.
    CHECK(st.expert_activations_bytes == approx(48.0 * 285'343'744.0));
    // Routing imbalance 1.5 raises the busiest rank's pairs by half; a capacity factor of 1.25
    // caps it there.
    s.training.moe_imbalance = 1.5;
    const costmodel::StageMemory hot = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout).stages[0];
    CHECK(hot.expert_activations_bytes == approx(1.5 * 48.0 * 285'343'744.0));
    s.training.moe_capacity_factor = 1.25;
    const costmodel::StageMemory capped = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout).stages[0];
    CHECK(capped.expert_activations_bytes == approx(1.25 * 48.0 * 285'343'744.0));
    CHECK(capped.dispatch_bytes > 0);
    // Padded to capacity, every expert holds the capacity whatever the routing.
    s.training.moe_imbalance = 1.0;
    s.training.moe_pad_to_capacity = true;
    const costmodel::StageMemory padded = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout).stages[0];
    CHECK(padded.expert_activations_bytes == approx(1.25 * 48.0 * 285'343'744.0));
    s.training.moe_pad_to_capacity = false;
    // Full recompute keeps only the layer inputs.
    s.layout.recompute = parallel::Recompute::full;
    const costmodel::StageMemory full = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout).stages[0];
    CHECK(full.expert_activations_bytes == 0);
  }

  TEST_CASE("per-head Q and K norms save their inputs and one fp32 RMS per head and token") {
    // Transformer Engine's RMSNorm keeps its input and rstdevs for backward
    // (pytorch/ops/basic/rmsnorm.py: save_for_backward(x, rstdevs)); Megatron-Core feeds it the
    // query's reshaped copy and the key made contiguous. Qwen3-30B-A3B as above, pp 1, one
    // micro-batch in flight: per token (2 B x 128 + 4 B) x (32 + 4) heads = 9,360 bytes; x 4096
    // tokens = 38,338,560 bytes per layer; x 48 layers = 1,840,250,880 bytes.
    Setup s = qwen_ep8();
    const costmodel::StageMemory with = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout).stages[0];
    s.model.qk_norm = false;
    const costmodel::StageMemory without = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout).stages[0];
    CHECK(with.layer_activations_bytes - without.layer_activations_bytes == approx(1'840'250'880.0));
    CHECK(with.expert_activations_bytes == approx(without.expert_activations_bytes));
    // Full recompute keeps the layer input alone.
    s.layout.recompute = parallel::Recompute::full;
    const costmodel::StageMemory full_without = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout).stages[0];
    s.model.qk_norm = true;
    const costmodel::StageMemory full_with = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout).stages[0];
    CHECK(full_with.layer_activations_bytes == approx(full_without.layer_activations_bytes));
  }

  TEST_CASE("a dense model has no expert part") {
    auto m = *model::find_model_preset("llama3.1-8b");
    auto c = *hw::find_cluster_preset("dgx-h100");
    parallel::Training t;
    t.seq_len = 8192;
    t.global_batch = 64;
    parallel::Layout l;
    l.tp = 8;
    l.sp = true;
    const costmodel::StageMemory st = costmodel::estimate_memory(m, c, t, l).stages[0];
    CHECK(st.expert_states_bytes == 0);
    CHECK(st.expert_activations_bytes == 0);
    CHECK(st.dispatch_bytes == 0);
  }
}

TEST_SUITE("costmodel") {
  TEST_CASE("recompute_modules: moe_act frees the FC2 input, layernorm the norm outputs") {
    // Megatron-Core recompute_modules (transformer_config.py): "moe_act" and "layernorm" use
    // output-discarding checkpointing. Qwen3-30B-A3B as above, bf16: P = 32,768 routed pairs.
    Setup s = qwen_ep8();
    const costmodel::StageMemory base = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout).stages[0];
    s.layout.recompute = parallel::Recompute::selective;
    s.layout.recompute_modules.add(parallel::RecomputeModule::moe_act);
    const costmodel::StageMemory act = costmodel::estimate_memory(s.model, s.cluster, s.training, s.layout).stages[0];
    // The experts' FC2 input, 2 B x P x f_e = 2 x 32,768 x 768 = 50,331,648 bytes per layer.
    CHECK(base.expert_activations_bytes - act.expert_activations_bytes == approx(48.0 * 50'331'648.0));
    // "layernorm" frees the two norm outputs, which the QKV linear and the router saved: 2 x 2 B
    // x 4096 x 2048 = 33,554,432 bytes per layer, 48 layers, one micro-batch in flight.
    parallel::Layout ln = s.layout;
    ln.recompute_modules = {};
    ln.recompute_modules.add(parallel::RecomputeModule::layernorm);
    const costmodel::StageMemory norm = costmodel::estimate_memory(s.model, s.cluster, s.training, ln).stages[0];
    parallel::Layout sel = s.layout;
    sel.recompute_modules = {};
    const costmodel::StageMemory plain = costmodel::estimate_memory(s.model, s.cluster, s.training, sel).stages[0];
    CHECK(plain.activations_bytes - norm.activations_bytes == approx(48.0 * 33'554'432.0));
  }
}
