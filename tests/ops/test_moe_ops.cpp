// The MoE layer's op list (ops::moe_layer_ops): dispatch / combine volume and the grouped
// expert GEMMs, checked against numbers worked out by hand from the formulas of Megatron-Core's
// MoEAlltoAllTokenDispatcher (each rank sends its tokens' top-k copies over the EP group) and
// TEGroupedMLP (one GEMM per local expert at its routed rows).
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <algorithm>
#include <iterator>
#include <string_view>

#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"
#include "tetra/model/moe.hpp"
#include "tetra/ops/ops.hpp"

using tetra::test::approx;
using namespace tetra::model;
using namespace tetra::parallel;
using namespace tetra::ops;

namespace {

/// 2 layers, hidden 1024, 8 heads; 8 experts of width 512, top-2, no shared expert.
Model small_moe() {
  Model m;
  m.name = "moe-test";
  m.arch = Arch::llama;
  m.layers = 2;
  m.hidden = 1024;
  m.ffn_hidden = 4096;
  m.heads = 8;
  m.kv_heads = 8;
  m.vocab = 32000;
  Moe e;
  e.num_experts = 8;
  e.experts_per_token = 2;
  e.moe_ffn_hidden = 512;
  m.moe = e;
  return m;
}

Training balanced() {
  Training t;
  t.seq_len = 1024;
  t.global_batch = 16;
  t.moe_imbalance = 1.0;
  return t;
}

/// 4 data-parallel ranks folded into expert parallelism 4: 2 of the 8 experts per rank.
Layout ep4() {
  Layout l;
  l.dp = 4;
  l.ep = 4;
  return l;
}

const Op* find(const std::vector<Op>& ops, std::string_view name) {
  for (const Op& op : ops) {
    if (name == op.name) return &op;
  }
  return nullptr;
}

}  // namespace

TEST_SUITE("llama") {
  TEST_CASE("moe ops: dispatch all-to-all bytes per rank = tokens * top-k * hidden * bytes") {
    // T = 1 x 1024 tokens, k = 2, h = 1024, bf16: S = 1024 * 2 * 1024 * 2 = 4,194,304 bytes; of
    // it (ep - 1)/ep = 3/4 leaves the rank: 3,145,728 bytes (nccl-tests alltoall: busbw
    // factor (n-1)/n, NCCL sends n-1 peer slices).
    Layout l = ep4();
    const auto ops = moe_layer_ops(small_moe(), balanced(), l);
    const Op* d = find(ops, "ep_dispatch");
    const Op* c = find(ops, "ep_combine");
    REQUIRE(d != nullptr);
    REQUIRE(c != nullptr);
    CHECK(d->coll == CollectiveKind::all_to_all);
    CHECK(d->dim == CommDim::ep);
    CHECK(d->group == 4);
    CHECK(d->bytes == approx(4194304.0));
    CHECK(d->bytes * 3.0 / 4.0 == approx(3145728.0));
    CHECK(c->bytes == approx(d->bytes));
    // The backward runs both again.
    CHECK(find(ops, "ep_combine_bwd") != nullptr);
    CHECK(find(ops, "ep_dispatch_bwd") != nullptr);
    // A routing imbalance of 1.5 sends 1.5 times the bytes to the busiest rank.
    Training t = balanced();
    t.moe_imbalance = 1.5;
    CHECK(find(moe_layer_ops(small_moe(), t, l), "ep_dispatch")->bytes == approx(1.5 * 4194304.0));
    // Unpaired unless moe_a2a_overlap: then all four exchanges run under the co-scheduled
    // micro-batch's compute (Megatron-Core combined_1f1b.py), with the same bytes.
    for (const char* name : {"ep_dispatch", "ep_combine", "ep_combine_bwd", "ep_dispatch_bwd"}) {
      CAPTURE(name);
      CHECK_FALSE(find(ops, name)->paired);
    }
    t.moe_a2a_overlap = true;
    const auto overlapped = moe_layer_ops(small_moe(), t, l);
    for (const char* name : {"ep_dispatch", "ep_combine", "ep_combine_bwd", "ep_dispatch_bwd"}) {
      CAPTURE(name);
      CHECK(find(overlapped, name)->paired);
    }
    CHECK(find(overlapped, "ep_dispatch")->bytes == approx(1.5 * 4194304.0));
  }

  TEST_CASE("moe ops: the all-to-all dispatcher sorts the received tokens by local expert and exchanges its metadata") {
    // Megatron-Core MoEAlltoAllTokenDispatcher (token_dispatcher.py at d98e8a64, lines 753-818):
    // with 2 local experts (8 experts over ep 4) the 1024 x 2 = 2048 received rows are sorted by
    // expert after the dispatch, the probabilities with them, and restored before the combine.
    // Sort: read and write 2048 rows of 1024 bf16 and their fp32 probabilities:
    // 2 x 2048 x (2 x 1024 + 4) = 8,404,992 bytes; restore without probabilities: 8,388,608.
    // TE moe_sort_chunks_by_index: two Triton kernels forward, one backward.
    Layout l = ep4();
    const auto ops = moe_layer_ops(small_moe(), balanced(), l);
    const Op* sort = find(ops, "moe_sort_chunks");
    const Op* unsort = find(ops, "moe_unsort_chunks");
    REQUIRE(sort != nullptr);
    REQUIRE(unsort != nullptr);
    CHECK(sort->pass == Pass::forward);
    CHECK(sort->bytes == approx(8404992.0));
    CHECK(unsort->bytes == approx(8388608.0));
    CHECK(sort->host_kernels == 2);
    CHECK(find(ops, "moe_sort_chunks_bwd")->bytes == approx(8404992.0));
    CHECK(find(ops, "moe_unsort_chunks_bwd")->bytes == approx(8388608.0));
    CHECK(find(ops, "moe_sort_chunks_bwd")->host_kernels == 1);
    // Between the dispatch and the first expert GEMM, and between the last one and the combine.
    auto at = [&](std::string_view name) {
      return std::find_if(ops.begin(), ops.end(), [&](const Op& op) { return name == op.name; }) - ops.begin();
    };
    CHECK(at("ep_dispatch") < at("moe_sort_chunks"));
    CHECK(at("moe_sort_chunks") < at("expert_fc1"));
    CHECK(at("expert_fc2") < at("moe_unsort_chunks"));
    CHECK(at("moe_unsort_chunks") < at("ep_combine"));
    // Its metadata (lines 570-574, 718): the 8 experts' int64 token counts of the 4 ranks
    // all-gathered before the sync, 8 x 8 x 4 = 256 bytes; the fp32 probabilities of the
    // 1024 x 2 routed copies in an all-to-all of their own, 8,192 bytes, and back in backward.
    const Op* counts = find(ops, "ep_count_ag");
    REQUIRE(counts != nullptr);
    CHECK(counts->coll == CollectiveKind::all_gather);
    CHECK(counts->bytes == approx(256.0));
    CHECK(at("ep_count_ag") < at("moe_permute"));
    CHECK(find(ops, "ep_probs_dispatch")->bytes == approx(8192.0));
    CHECK(find(ops, "ep_probs_dispatch_bwd")->bytes == approx(8192.0));
    // The flex dispatchers deliver the tokens in expert order and carry the counts and
    // probabilities in their own kernels; one local expert needs no sort.
    l.moe_dispatcher = MoeDispatcher::flex;
    const auto flex = moe_layer_ops(small_moe(), balanced(), l);
    CHECK(find(flex, "moe_sort_chunks") == nullptr);
    CHECK(find(flex, "ep_count_ag") == nullptr);
    CHECK(find(flex, "ep_probs_dispatch") == nullptr);
    Layout wide;
    wide.dp = 8;
    wide.ep = 8;
    CHECK(find(moe_layer_ops(small_moe(), balanced(), wide), "moe_sort_chunks") == nullptr);
  }

  TEST_CASE("moe ops: grouped GEMM shapes and FLOPs of one MoE layer") {
    // ep = 4: 8/4 = 2 local experts; rows per expert T*k/(E/ep) = 1024*2/2 = 1024.
    // FC1 (gate + up) 1024 x 1024 -> 2*512: 2*1024*1024*1024 FLOPs per expert, two experts:
    // 4,294,967,296; FC2 1024 x 512 -> 1024: 2*1024*1024*512 per expert, two: 2,147,483,648.
    // Forward expert FLOPs 6*T*k*f_e*h = 6*1024*2*512*1024 = 6,442,450,944.
    Layout l = ep4();
    const auto ops = moe_layer_ops(small_moe(), balanced(), l);
    const Op* fc1 = find(ops, "expert_fc1");
    const Op* fc2 = find(ops, "expert_fc2");
    REQUIRE(fc1 != nullptr);
    REQUIRE(fc2 != nullptr);
    CHECK(fc1->count == 2);
    CHECK(fc1->m == 1024);
    CHECK(fc1->n == 1024);
    CHECK(fc1->k == 1024);
    CHECK(fc2->m == 1024);
    CHECK(fc2->n == 1024);
    CHECK(fc2->k == 512);
    CHECK(fc1->total_flops() == approx(4294967296.0));
    CHECK(fc2->total_flops() == approx(2147483648.0));
    CHECK(fc1->total_flops() + fc2->total_flops() == approx(6442450944.0));
    // Backward: dgrad and wgrad of both, twice the forward.
    double bwd = 0;
    for (const Op& op : ops) {
      const std::string_view n = op.name;
      if (n.starts_with("expert_fc") && op.pass != Pass::forward) bwd += op.total_flops();
    }
    CHECK(bwd == approx(2.0 * 6442450944.0));
    // Imbalance 1.25 makes the busiest rank's experts 1280 rows each; the model FLOPs stay.
    Training t = balanced();
    t.moe_imbalance = 1.25;
    const auto skewed = moe_layer_ops(small_moe(), t, l);
    CHECK(find(skewed, "expert_fc1")->m == 1280);
    CHECK(find(skewed, "expert_fc1")->total_flops() == approx(4294967296.0));
  }

  TEST_CASE("moe ops: etp splits each expert and adds the expert-TP exchange") {
    // tp = etp = 2 with SP: T_in = 1024/2 = 512 tokens enter; each EP rank receives 512*2 = 1024
    // copies, 2048 after the ETP all-gather, 1024 per local expert (ep 2: 4 local experts ->
    // 2048/4 = 512). FC1 width 2*512/2 = 512.
    Layout l;
    l.tp = 2;
    l.sp = true;
    l.dp = 2;
    l.ep = 2;
    l.etp = 2;
    const auto ops = moe_layer_ops(small_moe(), balanced(), l);
    const Op* fc1 = find(ops, "expert_fc1");
    REQUIRE(fc1 != nullptr);
    CHECK(fc1->count == 4);
    CHECK(fc1->m == 512);
    CHECK(fc1->n == 512);
    const Op* ag = find(ops, "etp_ag");
    REQUIRE(ag != nullptr);
    CHECK(ag->group == 2);
    CHECK(ag->bytes == approx(2.0 * 2048.0 * 1024.0));
  }

  TEST_CASE("moe ops: gpt-oss adds the eager expert FC2 bias and activation clamp, the unfused YaRN RoPE and the projection bias") {
    // Megatron-Core `moe/experts.py` TEGroupedMLP._apply_bias: per element of the routed FC2
    // output 28 bytes forward (b·p fp32 write 4; t + b·p read 6 write 4; cat read 4 write 4;
    // cast read 4 write 2) and 36 backward. T = 1024 tokens, k = 2, ep = 4: this rank's experts
    // compute 1024·2 = 2,048 routed rows of h = 1024: 2,097,152 elements -> 58,720,256 and
    // 75,497,472 bytes.
    Model m = small_moe();
    m.arch = Arch::gpt_oss;
    Layout l = ep4();
    const auto ops = moe_layer_ops(m, balanced(), l);
    const Op* fwd = find(ops, "expert_fc2_bias");
    const Op* bwd = find(ops, "expert_fc2_bias_bwd");
    REQUIRE(fwd != nullptr);
    REQUIRE(bwd != nullptr);
    CHECK(fwd->bytes == approx(58720256.0));
    CHECK(bwd->bytes == approx(75497472.0));
    // The activation clamp (`fused_bias_geglu.py` weighted_bias_quick_geglu_impl, eager): 4 act
    // forward and 5 backward per FC1 output element, 2,048 rows x 2 x 512 = 2,097,152 elements
    // -> 16,777,216 and 20,971,520 bytes; with moe_act recomputation it runs again.
    CHECK(find(ops, "expert_act_clamp")->bytes == approx(16777216.0));
    CHECK(find(ops, "expert_act_clamp_bwd")->bytes == approx(20971520.0));
    Layout rc = l;
    rc.recompute = Recompute::selective;
    rc.recompute_modules.add(RecomputeModule::moe_act);
    int clamps = 0, recomputed = 0;
    for (const auto& op : moe_layer_ops(m, balanced(), rc)) {
      if (std::string_view(op.name) != "expert_act_clamp") continue;
      ++clamps;
      if (op.recompute) ++recomputed;
    }
    CHECK(clamps == 2);
    CHECK(recomputed == 1);
    // YaRN's attention factor keeps RoPE out of TE's fused kernel (`rope_utils.py`): 12 act
    // forward, 15 backward per element of q and k: 1024 tokens x (8 + 8) heads x 128 = 2,097,152
    // elements -> 50,331,648 and 62,914,560 bytes (fused: 4 bytes each way).
    CHECK(find(ops, "rope")->bytes == approx(50331648.0));
    CHECK(find(ops, "rope_bwd")->bytes == approx(62914560.0));
    // Unfused bias-dropout-add: the projection bias in its own kernel, 2 act per element of the
    // 1024 x 1024 output forward (4,194,304 bytes), its gradient's token sum 1 act backward.
    CHECK(find(ops, "attn_proj_bias")->bytes == approx(4194304.0));
    CHECK(find(ops, "attn_proj_bias_bwd")->bytes == approx(2097152.0));
    // A llama model runs none of them and the fused RoPE.
    const auto plain = moe_layer_ops(small_moe(), balanced(), l);
    CHECK(find(plain, "expert_fc2_bias") == nullptr);
    CHECK(find(plain, "expert_act_clamp") == nullptr);
    CHECK(find(plain, "attn_proj_bias") == nullptr);
    CHECK(find(plain, "rope")->bytes == approx(2097152.0 * 4.0));
  }

  TEST_CASE("moe ops: a dense model's MoE op list is its dense op list") {
    Model m = small_moe();
    m.moe.reset();
    Layout l;
    const auto a = moe_layer_ops(m, balanced(), l);
    const auto b = layer_ops(m, balanced(), l);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::string_view(a[i].name) == b[i].name);
  }
}

TEST_SUITE("llama") {
  TEST_CASE("moe ops: recompute_modules re-run the experts' activation, the norms, the whole MoE block") {
    // small_moe at ep 4: T = 1024 tokens, k = 2, 8 experts / 4 = 2 local; P = 1024 x 2 pairs per
    // rank, f_e = 512. Megatron-Core recompute_modules (transformer_config.py).
    Layout l = ep4();
    l.recompute = Recompute::selective;
    l.recompute_modules.add(RecomputeModule::moe_act);
    const auto ops = moe_layer_ops(small_moe(), balanced(), l);
    int recomputed = 0;
    double act_bytes = 0;
    for (const Op& op : ops) {
      if (!op.recompute) continue;
      ++recomputed;
      if (std::string_view(op.name) == "expert_swiglu") act_bytes += op.bytes;
    }
    // The SwiGLU again from the saved FC1 output: read gate and up, write the product,
    // 3 x 2 B x 2048 pairs x 512 = 6,291,456 bytes; nothing else, not core attention.
    CHECK(recomputed == 1);
    CHECK(act_bytes == approx(6291456.0));
    // "layernorm": both norms again (2 x read + write of 1024 x 1024 bf16 = 4,194,304 each).
    l.recompute_modules = {};
    l.recompute_modules.add(RecomputeModule::layernorm);
    double norm_bytes = 0;
    for (const Op& op : moe_layer_ops(small_moe(), balanced(), l)) {
      if (op.recompute) norm_bytes += op.bytes;
    }
    CHECK(norm_bytes == approx(2.0 * 4194304.0));
    // "moe": the whole block again, its dispatch (tokens and probabilities) and combine included.
    l.recompute_modules = {};
    l.recompute_modules.add(RecomputeModule::moe);
    int exchanges = 0;
    for (const Op& op : moe_layer_ops(small_moe(), balanced(), l)) {
      if (op.recompute && op.coll == CollectiveKind::all_to_all && op.kind == OpKind::collective) ++exchanges;
    }
    CHECK(exchanges == 3);
    // The plain selective list is core attention.
    l.recompute_modules = {};
    bool attention = false;
    for (const Op& op : moe_layer_ops(small_moe(), balanced(), l)) attention |= op.recompute && op.kind == OpKind::attention;
    CHECK(attention);
  }

  TEST_CASE("moe ops: the host side, CUDA graph scopes and the dropless dispatcher's sync") {
    // Megatron-Core's dropless alltoall dispatcher copies the per-expert token counts to the
    // host after the permutation (token_dispatcher.py at d98e8a64, lines 594-596): one sync per
    // MoE layer forward, none in backward. Dropping without padding still sizes the
    // permutation from the counts (lines 545-552); padding to capacity or a full-iteration graph
    // has none (`_maybe_dtoh_and_synchronize` skips them under drop_and_pad, line 927).
    const Model m = small_moe();
    Training t = balanced();
    Layout l = ep4();
    auto count = [](const std::vector<Op>& ops, auto pred) {
      return std::count_if(ops.begin(), ops.end(), pred);
    };
    auto synced = [](const Op& op) { return op.host_wait != HostWait::none; };
    auto graphed = [](const Op& op) { return op.graphed; };
    const auto eager = moe_layer_ops(m, t, l);
    CHECK(count(eager, synced) == 1);
    const auto sync = std::find_if(eager.begin(), eager.end(), synced);
    CHECK(std::string_view(std::prev(sync)->name) == "moe_permute");
    CHECK(sync->pass == Pass::forward);
    CHECK(sync->host_wait == HostWait::token_counts);  // then the dispatcher's own work
    CHECK(count(eager, graphed) == 0);
    CHECK(count(layer_ops(m, t, l), synced) == 0);  // dense layers never wait

    // Combined 1F1B (moe_a2a_overlap): the backward's dispatch waits for the forward's sync too
    // (model_chunk_schedule_plan.py lines 261-301).
    t.moe_a2a_overlap = true;
    const auto combined = moe_layer_ops(m, t, l);
    CHECK(count(combined, synced) == 2);
    const Op* bwd_dispatch = find(combined, "ep_dispatch_bwd");
    REQUIRE(bwd_dispatch != nullptr);
    CHECK(bwd_dispatch->host_wait == HostWait::token_counts);
    t.moe_a2a_overlap = false;

    t.cuda_graphs = parse_cuda_graphs("moe_router+moe_preprocess").graphs;
    const auto routed = moe_layer_ops(m, t, l);
    for (const Op& op : routed) {
      const std::string_view n = op.name;
      const bool router = n == "router" || n == "router_topk" || n == "router_dgrad" ||
                          n == "router_wgrad" || n == "router_topk_bwd" || n == "mlp_norm" ||
                          n == "mlp_norm_bwd" || n == "ep_count_ag" || n == "moe_permute" ||
                          n == "moe_permute_bwd";
      CHECK_MESSAGE(op.graphed == router, n);
    }
    CHECK(count(routed, synced) == 1);

    t.cuda_graphs = parse_cuda_graphs("full_iteration").graphs;
    const auto full = moe_layer_ops(m, t, l);
    CHECK(count(full, graphed) == static_cast<long>(full.size()));
    CHECK(count(full, synced) == 0);

    t.cuda_graphs = {};
    t.moe_capacity_factor = 1.0;
    CHECK(count(moe_layer_ops(m, t, l), synced) == 1);
    t.moe_pad_to_capacity = true;
    CHECK(count(moe_layer_ops(m, t, l), synced) == 0);
  }

  TEST_CASE("moe ops: a capacity factor caps the busiest expert, padding fills every expert to it") {
    // 1024 tokens x top-2 over 8 experts on ep 4: 2 local experts, each with the balanced share
    // 1024 x 2 / 2 = 1024 rows. Imbalance 1.5 makes the busiest 1536; a capacity factor 1.25
    // drops what exceeds 1280 (Megatron-Core moe_expert_capacity_factor); padded to capacity,
    // every expert computes exactly 1280 rows, even at imbalance 1.0
    // (moe_pad_expert_input_to_capacity). The FLOPs stay the balanced share's.
    const Model m = small_moe();
    Training t = balanced();
    Layout l = ep4();
    auto rows = [&](const Training& tr) {
      const auto ops = moe_layer_ops(m, tr, l);
      const Op* fc1 = find(ops, "expert_fc1");
      REQUIRE(fc1 != nullptr);
      CHECK(fc1->count == 2);
      return fc1->m;
    };
    CHECK(rows(t) == 1024);
    t.moe_imbalance = 1.5;
    CHECK(rows(t) == 1536);
    t.moe_capacity_factor = 1.25;
    CHECK(rows(t) == 1280);
    t.moe_imbalance = 1.0;
    CHECK(rows(t) == 1024);
    t.moe_pad_to_capacity = true;
    CHECK(rows(t) == 1280);
    CHECK(find(moe_layer_ops(m, t, l), "expert_fc1")->total_flops() == approx(4294967296.0));
  }

  TEST_CASE("moe ops: Transformer Engine quantizes each expert's split with its own kernels") {
    // 8 experts over ep 4: 2 local experts. MXFP8 and current scaling cast each split apart
    // (transformer_engine/pytorch/csrc/extensions/cast.cpp split_quantize); delayed scaling
    // runs one fused multi-tensor cast-transpose, NVFP4 one grouped amax and one grouped cast
    // (split_quantize FUSED_NVFP4).
    const Model m = small_moe();
    Training t = balanced();
    t.fp8.recipe = Fp8Recipe::current;
    Layout l = ep4();
    auto casts = [](const std::vector<Op>& ops, int kernels) {
      return std::count_if(ops.begin(), ops.end(), [&](const Op& op) {
        return std::string_view(op.name).substr(0, 4) == "fp8_" && op.host_kernels == kernels;
      });
    };
    const auto current = moe_layer_ops(m, t, l);
    // FC1 and FC2 inputs forward, their output gradients backward: amax and cast each.
    CHECK(casts(current, 2) == 8);
    // Each split's quantizer also zeroes its amax and derives its scale on the GPU
    // (current_scaling.cu): one kernel per split, issued with the split's amax and cast.
    int per_split = 0;
    for (const Op& op : current) {
      const std::string_view name(op.name);
      if (name != "fp8_amax_zero" && name != "fp8_scale") continue;
      CHECK(op.host_kernels == 0);
      if (op.count == 2) ++per_split;  // 2 local experts
    }
    // The four expert sites, two kernels each, repeated over the two splits.
    CHECK(per_split == 8);
    t.fp8.recipe = Fp8Recipe::delayed;
    CHECK(casts(moe_layer_ops(m, t, l), 2) == 0);
    // NVFP4: each expert cast and amax is one kernel for both splits; the layer has one amax
    // more than under current scaling, on the QKV input, whose norm computes current scaling's
    // amax but leaves NVFP4's to the quantizer (normalization.cpp, Impl::UNFUSED).
    t.fp8.recipe = Fp8Recipe::nvfp4;
    const auto nvfp4 = moe_layer_ops(m, t, l);
    CHECK(casts(nvfp4, 2) == 0);
    auto amaxes = [](const std::vector<Op>& ops) {
      return std::count_if(ops.begin(), ops.end(),
                           [](const Op& op) { return std::string_view(op.name) == "fp8_amax"; });
    };
    CHECK(amaxes(nvfp4) == amaxes(current) + 1);
  }

  TEST_CASE("moe ops: the flex dispatcher's exchanges carry the routing that sets their node copies") {
    const Model m = small_moe();
    const Training t = balanced();
    Layout l = ep4();
    const auto alltoall = moe_layer_ops(m, t, l);
    const Op* plain = find(alltoall, "ep_dispatch");
    REQUIRE(plain != nullptr);
    CHECK(plain->route_topk == 0);
    l.moe_dispatcher = MoeDispatcher::flex;
    const auto ops = moe_layer_ops(m, t, l);
    for (const char* name : {"ep_dispatch", "ep_combine", "ep_dispatch_bwd", "ep_combine_bwd"}) {
      const Op* op = find(ops, name);
      REQUIRE(op != nullptr);
      CHECK(op->route_topk == 2);
      CHECK(op->route_experts == 8);
      CHECK(op->bytes == plain->bytes);  // the same all-to-all size; the pricing dedups
      CHECK(op->route_backend == FlexBackend::deepep);
    }
    // HybridEP: the same exchanges, priced at its own rate across nodes.
    l.moe_flex_backend = FlexBackend::hybridep;
    for (const Op& op : moe_layer_ops(m, t, l)) {
      if (op.route_topk > 0) CHECK(op.route_backend == FlexBackend::hybridep);
    }
  }

  TEST_CASE("moe ops: the router's scoring issues Megatron-Core's kernels, eager or fused, with or without the load-balancing loss") {
    // Megatron-Core at d98e8a64 (megatron/core/transformer/moe/router.py TopKRouter.routing,
    // moe_utils.py topk_routing_with_score_function, compute_routing_scores_for_aux_loss,
    // switch_load_balancing_loss_func):
    // - eager top-k: topk, softmax of the k scores, cast, zeros + copy + scatter of the
    //   probabilities, zeros + int + copy + scatter + bool of the map = 11; backward gather,
    //   cast, softmax backward, zeros + scatter = 5. Fused (TE fused_topk_with_score_function):
    //   1 and 1.
    // - eager loss: softmax, topk, the map (5), the count, sum, product, sum, scale, the
    //   tracker's two = 14; backward 7. Fused: TE's score and loss kernels, the count and the
    //   tracker's two = 5; backward the scaler's two, two TE backwards and the sum = 5.
    // Qwen3-MoE as Megatron-Bridge runs it (fused, aux_loss): 6 + 6 = 12 kernels a layer,
    // 12 x 32.5 us = 0.39 ms of host time per layer and micro-batch; eager, 25 + 12 = 37.
    const Model m = small_moe();
    const int fwd[2][2] = {{11, 25}, {1, 6}};  // [fused][aux loss]
    const int bwd[2][2] = {{5, 12}, {1, 6}};
    for (int fused = 0; fused < 2; ++fused) {
      for (int aux = 0; aux < 2; ++aux) {
        CAPTURE(fused);
        CAPTURE(aux);
        Training t = balanced();
        t.moe_router_fusion = fused == 1;
        t.moe_aux_loss = aux == 1;
        const auto ops = moe_layer_ops(m, t, ep4());
        const Op* f = find(ops, "router_topk");
        const Op* b = find(ops, "router_topk_bwd");
        REQUIRE(f != nullptr);
        REQUIRE(b != nullptr);
        CHECK(f->host_kernels == fwd[fused][aux]);
        CHECK(b->host_kernels == bwd[fused][aux]);
        // The bytes stay those of the scores: the extra kernels touch [T, E] tensors only.
        CHECK(f->bytes == approx(8.0 * 1024 * 8));
      }
    }
    Training t = balanced();
    t.moe_router_fusion = true;
    t.moe_aux_loss = true;
    const auto ops = moe_layer_ops(m, t, ep4());
    const double host_s =
        32.5e-6 * (find(ops, "router_topk")->host_kernels + find(ops, "router_topk_bwd")->host_kernels);
    CHECK(host_s == approx(0.39e-3));
    // Inside a CUDA graph of the router the host issues none of them.
    t.cuda_graphs = parse_cuda_graphs("moe_router").graphs;
    CHECK(find(moe_layer_ops(m, t, ep4()), "router_topk")->graphed);
  }

  TEST_CASE("moe ops: the host issues the fused permutation and gpt-oss's eager bias and clamp as the kernels the frameworks launch") {
    // 8 experts over ep 4: 2 local experts, bf16, gpt-oss's eager expert FC2 bias and clamp.
    // - moe_permute: TE moe_permute_with_probs (transformer_engine/pytorch/permutation.py):
    //   make_row_id_map's three Triton passes and permute_with_mask_map's kernel
    //   (transformer_engine/pytorch/triton/permutation.py) = 4; the unpermutation 1.
    // - expert_act_clamp (megatron/core/fusions/fused_bias_geglu.py
    //   weighted_bias_quick_geglu_impl): two clamps and torch.cat = 3, and 3 backward.
    // - expert_fc2_bias (megatron/core/transformer/moe/experts.py TEGroupedMLP._apply_bias):
    //   b·p and t + b·p per expert, torch.cat and .to once = 2·2 + 2 = 6; backward, two products,
    //   two reductions and two casts per expert, the cast and the two split gradients once
    //   = 6·2 + 3 = 15.
    // Together 4 + 3 + 3 + 6 + 15 = 31 kernels: 31 x 32.5 us = 1.0075 ms of host time.
    Model m = small_moe();
    m.arch = Arch::gpt_oss;
    const auto ops = moe_layer_ops(m, balanced(), ep4());
    const char* names[] = {"moe_permute", "expert_act_clamp", "expert_act_clamp_bwd", "expert_fc2_bias",
                           "expert_fc2_bias_bwd"};
    const int kernels[] = {4, 3, 3, 6, 15};
    double host_s = 0;
    for (int i = 0; i < 5; ++i) {
      const Op* op = find(ops, names[i]);
      REQUIRE(op != nullptr);
      CHECK(op->host_kernels == kernels[i]);
      CHECK_FALSE(op->graphed);
      host_s += 32.5e-6 * op->count * op->host_kernels;
    }
    CHECK(host_s == approx(1.0075e-3));
    CHECK(find(ops, "moe_unpermute")->host_kernels == 1);
    CHECK(find(ops, "moe_permute_bwd")->host_kernels == 1);
  }
}
