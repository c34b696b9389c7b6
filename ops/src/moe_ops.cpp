// Op list of a mixture-of-experts block and of multi-head latent attention on one rank.
//
// MoE block: Megatron-Core `megatron/core/transformer/moe/` (moe_layer.py MoELayer.forward:
// router, token dispatch, experts, combine, shared experts; token_dispatcher.py
// MoEAlltoAllTokenDispatcher / MoEAllGatherTokenDispatcher / MoEFlexTokenDispatcher;
// experts.py TEGroupedMLP; moe_utils.py permute / unpermute). Expert ranks: parallel_state.py
// folds expert_tensor x expert x expert_data over the tp x cp x dp ranks of a pipeline stage.
// MLA: Megatron-Core `multi_latent_attention.py` MLASelfAttention (DeepSeek-V2/V3, arXiv
// 2405.04434 section 2.1).
#include <algorithm>
#include <cmath>

#include "ops_builders.hpp"
#include "tetra/model/moe.hpp"

namespace tetra::ops::detail {

using model::Model;
using model::Moe;
using parallel::CudaGraphScope;
using parallel::casts_splits_together;
using parallel::Layout;
using parallel::MoeDispatcher;
using parallel::RecomputeModule;
using parallel::Training;

void set_moe_dims(Dims& d, const Model& m, const Training& tr, const Layout& l) {
  if (!m.moe) return;
  const Moe& e = *m.moe;
  d.moe = true;
  d.experts = std::max(1, e.num_experts);
  d.topk = std::max(1, e.experts_per_token);
  d.fe = e.moe_ffn_hidden;
  d.shared_f = e.shared_width();
  d.ep = std::max(1, l.ep);
  d.etp = std::max(1, l.etp);
  d.local_experts = std::max(1LL, d.experts / d.ep);
  d.dispatcher = l.moe_dispatcher;
  d.flex_backend = l.moe_flex_backend;
  // The slowest EP rank sets the pace: its experts see the mean load times the imbalance; a
  // capacity factor drops what exceeds it, padding fills every expert to it
  // (Megatron-Core `moe_expert_capacity_factor`, `moe_pad_expert_input_to_capacity`).
  d.imbalance = tr.moe_expert_load();
  // Tokens entering the block on this rank: the SP shard (Megatron-Core requires SP with TP
  // under MoE). Each EP rank receives on average T_in·k routed copies from its EP peers
  // (ep ranks send ep·T_in·k copies to E experts, E/ep of them local); the ETP all-gather
  // multiplies that by etp. One local expert computes the share of E/ep of them.
  const double t_in = static_cast<double>(d.tokens_sp);
  d.expert_tokens_mean = t_in * static_cast<double>(d.topk * d.etp) / static_cast<double>(d.local_experts);
  d.expert_tokens = d.expert_tokens_mean * d.imbalance;
}

namespace {

/// Kernels the host issues for the ops of the MoE block that eager PyTorch runs as more than
/// one kernel (Op::host_kernels), read from the sources of Megatron-Core at d98e8a64 and
/// Transformer Engine at d0067d0:
///  - the fused permutation (`moe_utils.permute`, fused=True: TE `moe_permute_with_probs`,
///    transformer_engine/pytorch/permutation.py lines 321 and 370): `make_row_id_map` launches
///    three Triton passes (transformer_engine/pytorch/triton/permutation.py lines 73, 93, 111),
///    then `permute_with_mask_map` one kernel (line 174). The unfused permutation launches more;
///    the unpermutation (`unpermute_with_mask_map`) and both backwards launch one.
constexpr int kPermuteKernels = 4;
///  - the all-to-all dispatcher's sort of the received tokens by local expert and its inverse
///    before the combine (`sort_chunks_by_idxs`, fused: TE `moe_sort_chunks_by_index`,
///    transformer_engine/pytorch/permutation.py lines 1109-1150): `make_chunk_sort_map` and
///    `sort_chunks_by_map`, two Triton kernels; the backward one `sort_chunks_by_map`.
constexpr int kSortChunksKernels = 2;
///  - gpt-oss's clamp (`weighted_bias_quick_geglu_impl`, megatron/core/fusions/
///    fused_bias_geglu.py lines 425-432): a clamp of each half and torch.cat; backward, each
///    clamp's gradient and the chunk's gradient (the concatenation of the halves): three each.
constexpr int kClampKernels = 3;
///  - gpt-oss's expert bias (`TEGroupedMLP._apply_bias`, megatron/core/transformer/moe/
///    experts.py lines 345-381): per local expert, b·p and t + b·p (two kernels); over all
///    experts, torch.cat and .to(bf16). Backward (autograd): the cast back to fp32, per expert
///    the two products of the gradient (with p for b, with b for p), their two reductions and
///    the casts of the bf16 inputs' gradients (of t and of b), six, and the concatenations of
///    the two torch.split gradients (of the output and of the probabilities).
constexpr int kBiasKernelsPerExpert = 2;
constexpr int kBiasKernelsOnce = 2;
constexpr int kBiasBwdKernelsPerExpert = 6;
constexpr int kBiasBwdKernelsOnce = 3;

///  - the router's scoring after its GEMM (Megatron-Core at d98e8a64: `TopKRouter.routing`,
///    megatron/core/transformer/moe/router.py, and megatron/core/transformer/moe/moe_utils.py).
///    Top-k, fused (`moe_router_fusion`): Transformer Engine's `fused_topk_with_score_function`,
///    one kernel each way. Eager (`topk_routing_with_score_function`): torch.topk, the softmax
///    of the k scores, the cast back, the probabilities scattered into zeros (zeros, the
///    out-of-place scatter's copy and scatter) and the routing map (zeros, int cast, copy,
///    scatter, bool cast): 11; backward the scatter's gather, the cast, the softmax backward and
///    the top-k gradient scattered into zeros: 5.
///    The load-balancing loss, when its coefficient is above 0 (`_apply_aux_loss`), fused:
///    TE's score kernel (`fused_compute_score_for_moe_aux_loss`), the token count
///    (`routing_map.sum`), TE's `fused_moe_aux_loss` and the metrics tracker's division and
///    accumulation: 5; backward `MoEAuxLossAutoScaler`'s ones_like and scale, the two TE
///    kernels' backward and the sum into the logits' gradient: 5. Eager
///    (`compute_routing_scores_for_aux_loss`, `switch_load_balancing_loss_func`): softmax,
///    topk, the routing map as above (5), the count, the probabilities' sum over tokens, the
///    product with the counts, its sum and scale, the tracker's two: 14; backward the scaler's
///    two, the scale's, the product's and the broadcast sum's gradients, the softmax backward
///    and the sum into the logits' gradient: 7.
constexpr int kRouterTopkKernels[2] = {11, 1};      ///< forward: eager, fused
constexpr int kRouterTopkBwdKernels[2] = {5, 1};
constexpr int kRouterAuxLossKernels[2] = {14, 5};
constexpr int kRouterAuxLossBwdKernels[2] = {7, 5};

int router_scoring_kernels(const Dims& d, Pass pass) {
  const int fused = d.x.router_fusion ? 1 : 0;
  const bool forward = pass == Pass::forward;
  int kernels = forward ? kRouterTopkKernels[fused] : kRouterTopkBwdKernels[fused];
  if (d.x.router_aux_loss) {
    kernels += forward ? kRouterAuxLossKernels[fused] : kRouterAuxLossBwdKernels[fused];
  }
  return kernels;
}

/// Rows of one expert's GEMM (at least one).
long long expert_rows(const Dims& d) { return std::max(1LL, static_cast<long long>(std::ceil(d.expert_tokens))); }

/// One grouped-GEMM call over the local experts as `local_experts` GEMMs of the per-expert
/// shape (TE GroupedLinear runs one cuBLASLt GEMM per expert, `te.pytorch.GroupedLinear`),
/// each priced at its own small-M efficiency. FLOPs: the balanced token count (model FLOPs).
Op expert_gemm(const Dims& d, Pass pass, const char* name, long long m, long long n, long long k,
               double flops_per_expert) {
  Op op = linear_gemm(d, pass, name, m, n, k);
  op.count = static_cast<int>(d.local_experts);
  op.flops = flops_per_expert;
  return op;
}

/// Routed copies this rank's experts compute (the busiest rank).
double routed_rows(const Dims& d) { return d.expert_tokens * static_cast<double>(d.local_experts); }

/// Routed copies one rank sends in the dispatch: its T_in tokens, k copies each, `imbalance`
/// times that to the busiest rank.
double sent_copies(const Dims& d) {
  return static_cast<double>(d.tokens_sp) * static_cast<double>(d.topk) * d.imbalance;
}

/// Bytes one rank sends in the dispatch (or the combine): its sent copies, h wide, at the
/// activation dtype. The all-to-all's size S in nccl-tests' sense, of which (ep−1)/ep leaves
/// the rank.
double dispatch_bytes(const Dims& d) { return d.act * static_cast<double>(d.h) * sent_copies(d); }

/// Which way an EP / ETP exchange moves tokens: to their experts (dispatch, the combine's
/// backward; all-gather under the allgather dispatcher and expert TP) or back to the ranks of
/// their tokens (combine, the dispatch's backward; reduce-scatter).
enum class Toward : bool { tokens, experts };

/// Dispatch (or combine, or their backward) over the EP group. alltoall sends every routed
/// copy of a token to its expert's rank; flex (DeepEP or HybridEP) sends the same bytes inside a
/// node but each token only once to each other node that holds one of its experts
/// (costmodel::hierarchical_all_to_all); allgather gathers every EP rank's tokens and
/// reduce-scatters the combined output back (`MoEAllGatherTokenDispatcher`).
void ep_exchange(std::vector<Op>& ops, const Dims& d, Pass pass, const char* name, Toward toward,
                 Run run) {
  const bool gather = toward == Toward::experts;
  const bool recompute = run == Run::recompute;
  if (d.ep <= 1) return;
  const int ep = static_cast<int>(d.ep);
  Op op;
  if (d.dispatcher == MoeDispatcher::allgather) {
    const double s = d.act * static_cast<double>(d.tokens_sp) * static_cast<double>(d.h) * static_cast<double>(ep);
    op = coll(pass, name, gather ? CollectiveKind::all_gather : CollectiveKind::reduce_scatter, CommDim::ep, ep, s);
  } else {
    op = coll(pass, name, CollectiveKind::all_to_all, CommDim::ep, ep, dispatch_bytes(d));
    op.paired = d.x.a2a_overlap;
    if (d.dispatcher == MoeDispatcher::flex) {
      op.route_topk = static_cast<int>(d.topk);
      op.route_experts = static_cast<int>(d.experts);
      op.route_backend = d.flex_backend;
    }
  }
  op.recompute = recompute;
  ops.push_back(op);
}

/// The all-to-all dispatcher's own exchanges beside the tokens' (`MoEAlltoAllTokenDispatcher`,
/// megatron/core/transformer/moe/token_dispatcher.py at d98e8a64): `preprocess` all-gathers
/// every EP rank's token count per expert (int64, lines 570-574) before the sync that sizes the
/// exchange, and `token_dispatch` sends the routing probabilities in an all-to-all of their
/// own after the tokens (line 718; one per routed copy, fp32 as the Qwen3 provider's
/// `moe_router_dtype`), whose backward returns their gradients. The flex dispatchers carry both
/// inside their kernels.
bool exchanges_metadata(const Dims& d) { return d.dispatcher == MoeDispatcher::alltoall && d.ep > 1; }

Op count_exchange(const Dims& d) {
  const int ep = static_cast<int>(d.ep);
  return coll(Pass::forward, "ep_count_ag", CollectiveKind::all_gather, CommDim::ep, ep,
              8.0 * static_cast<double>(d.experts) * static_cast<double>(ep));
}

Op probs_exchange(const Dims& d, Pass pass, const char* name) {
  Op op = coll(pass, name, CollectiveKind::all_to_all, CommDim::ep, static_cast<int>(d.ep), 4.0 * sent_copies(d));
  op.paired = d.x.a2a_overlap;
  return op;
}

/// The expert-TP all-gather of the received tokens (or reduce-scatter of the expert output)
/// over the etp ranks of an expert (`MoEAlltoAllTokenDispatcher`, tp > 1 branch).
void etp_exchange(std::vector<Op>& ops, const Dims& d, Pass pass, const char* name, Toward toward,
                  Run run) {
  const bool gather = toward == Toward::experts;
  const bool recompute = run == Run::recompute;
  if (d.etp <= 1) return;
  Op op = coll(pass, name, gather ? CollectiveKind::all_gather : CollectiveKind::reduce_scatter, CommDim::tp,
               static_cast<int>(d.etp), d.act * routed_rows(d) * static_cast<double>(d.h));
  op.recompute = recompute;
  ops.push_back(op);
}

/// permute (moe_utils.permute: gather of the token rows into expert order, read T_in·h, write
/// k·T_in·h) and unpermute (read the k·T_in·h expert outputs and the probabilities, write the
/// weighted sum T_in·h): memory-bound, (1 + k)·act·T_in·h each, the same in backward.
double permute_bytes(const Dims& d) {
  return (1.0 + static_cast<double>(d.topk)) * d.act * static_cast<double>(d.tokens_sp) * static_cast<double>(d.h);
}

/// The all-to-all dispatcher's second permutation (`MoEAlltoAllTokenDispatcher`,
/// megatron/core/transformer/moe/token_dispatcher.py at d98e8a64, lines 753-790 and 796-818):
/// the all-to-all delivers the tokens grouped by source rank, so with more than one local
/// expert `dispatch_postprocess` sorts them by expert (`sort_chunks_by_idxs`, "Permutation 2",
/// the probabilities with them) and `combine_preprocess` restores the source order before the
/// combine ("Unpermutation 2"); under drop-and-pad the same reorder is a transpose and
/// `.contiguous()`. Each reads and writes every received row; the backward of each reorders the
/// gradient back. The flex dispatchers deliver the tokens in expert order themselves (DeepEP's
/// permute after its dispatch is the model's moe_permute; HybridEP permutes inside its kernels).
bool sorts_by_local_expert(const Dims& d) {
  return d.dispatcher == MoeDispatcher::alltoall && d.local_experts > 1;
}
double sort_chunks_bytes(const Dims& d, bool with_probs) {
  return 2.0 * routed_rows(d) * (d.act * static_cast<double>(d.h) + (with_probs ? 4.0 : 0.0));
}
Op sort_chunks(const Dims& d, Pass pass, const char* name, bool with_probs) {
  const int kernels = pass == Pass::forward ? kSortChunksKernels : 1;
  return issued_as(kernels, mem(pass, name, MemoryKernel::copy, sort_chunks_bytes(d, with_probs)));
}

/// The shared experts: a gated MLP of width shared_f, TP-split like the dense MLP (Megatron-Core
/// SharedExpertMLP, fused SwiGLU kernels: 3 activation bytes per element forward, 5 backward).
MlpCore shared_expert_core(const Dims& d) {
  MlpCore c;
  c.width = d.shared_f;
  c.gated = true;
  c.fc1 = single_linear("shared_fc1", "shared_fc1_dgrad", "shared_fc1_wgrad", 2 * d.shared_f / d.t);
  c.names = {"shared_swiglu", "shared_fc2", "shared_swiglu_bwd", "shared_fc2_dgrad", "shared_fc2_wgrad"};
  c.act_fwd_bytes = 3.0;
  c.act_bwd_bytes = 5.0;
  return c;
}

/// The experts' gated activation: read gate and up, write the FC2 input (3 act per output
/// element).
Op expert_activation(const Dims& d) {
  return mem(Pass::forward, "expert_swiglu", MemoryKernel::swiglu,
             3.0 * d.act * routed_rows(d) * static_cast<double>(d.fe / d.etp));
}

/// gpt-oss's clamped activation (`activation_func_clamp_value` 7.0): before the fused weighted
/// quick-GeGLU, `weighted_bias_quick_geglu_impl` (Megatron-Core `fusions/fused_bias_geglu.py`)
/// clamps the gate half and the linear half of the FC1 output in eager PyTorch and concatenates
/// them again: each clamp reads and writes its half, torch.cat reads and writes the whole, 4
/// act per FC1 output element. Backward (autograd): each clamp's gradient reads the gradient and
/// the input and writes, 3 act per element, and the chunk's gradient concatenates the halves, 2.
double expert_clamp_elems(const Dims& d) { return routed_rows(d) * static_cast<double>(d.fe * 2 / d.etp); }
Op expert_clamp(const Dims& d) {
  return issued_as(kClampKernels,
                   mem(Pass::forward, "expert_act_clamp", MemoryKernel::copy, 4.0 * d.act * expert_clamp_elems(d)));
}
Op expert_clamp_bwd(const Dims& d) {
  return issued_as(kClampKernels, mem(Pass::backward_input, "expert_act_clamp_bwd", MemoryKernel::copy,
                                      5.0 * d.act * expert_clamp_elems(d)));
}

/// gpt-oss's expert FC2 bias: TEGroupedMLP returns it unapplied and `_apply_bias`
/// (Megatron-Core `moe/experts.py`) adds it scaled by each token's router probability, one
/// expert at a time over the split output: b·p in fp32 (write 4 bytes per element), t + b·p
/// (read 2 + 4, write 4), torch.cat (read and write 4), .to(bf16) (read 4, write 2) = 28 bytes
/// per element of the routed FC2 output. Backward (autograd): the cast back to fp32 (read 2,
/// write 4), t's gradient cast to bf16 (read 4, write 2), and the two reductions of the
/// product, over the tokens for b and over h for p (each: multiply, read 4, write 4, then read
/// 4) = 36 bytes. Counted at a 2-byte activation as 14 and 18 act.
double expert_bias_fwd_bytes(const Dims& d) { return 14.0 * d.act * routed_rows(d) * static_cast<double>(d.h); }
double expert_bias_bwd_bytes(const Dims& d) { return 18.0 * d.act * routed_rows(d) * static_cast<double>(d.h); }

/// The bias loop's kernels: `per_expert` for each local expert and `once` around the loop.
int bias_host_kernels(const Dims& d, int per_expert, int once) {
  return per_expert * static_cast<int>(d.local_experts) + once;
}

Op expert_bias_fwd(const Dims& d) {
  return issued_as(bias_host_kernels(d, kBiasKernelsPerExpert, kBiasKernelsOnce),
                   mem(Pass::forward, "expert_fc2_bias", MemoryKernel::copy, expert_bias_fwd_bytes(d)));
}

Op expert_bias_bwd(const Dims& d) {
  return issued_as(bias_host_kernels(d, kBiasBwdKernelsPerExpert, kBiasBwdKernelsOnce),
                   mem(Pass::backward_input, "expert_fc2_bias_bwd", MemoryKernel::copy, expert_bias_bwd_bytes(d)));
}

}  // namespace

/// The FP8 cast of the experts' GEMM inputs: Transformer Engine's GroupedLinear quantizes each
/// expert's split with its own quantizer, one kernel (or amax and cast) per split
/// (`multi_tensor_quantize_impl`, transformer_engine/pytorch/csrc/extensions/cast.cpp at
/// d0067d0: "Quantize kernels individually"), except where its kernels cover all splits
/// (parallel::casts_splits_together: delayed scaling, NVFP4). The quantizer's one-thread
/// kernels (zeroing the amax, deriving the scale) run once per split on the GPU.
void expert_quantize(std::vector<Op>& ops, const Dims& d, Pass pass, double elements, Run run) {
  const std::size_t from = ops.size();
  quantize(ops, d, pass, elements, run);
  if (casts_splits_together(d.x.recipe)) return;
  for (std::size_t i = from; i < ops.size(); ++i) {
    if (!ops[i].is_compute()) continue;
    // The amax zeroing and the scale (issued_as 0: no host cost of their own) repeat on the
    // GPU once per split; the amax and the cast carry the split loop's host time.
    if (ops[i].host_kernels == 0) {
      ops[i].count = static_cast<int>(d.local_experts);
    } else {
      ops[i].host_kernels = static_cast<int>(d.local_experts);
    }
  }
}

void moe_block_forward(std::vector<Op>& ops, const Dims& d, Run run) {
  const bool recompute = run == Run::recompute;
  const Pass fw = Pass::forward;
  auto push = [&](Op op) {
    op.recompute = recompute;
    ops.push_back(op);
  };
  const long long t_in = d.tokens_sp;
  const long long fe1 = d.fe * 2 / d.etp;  // gated expert FC1 (gate and up) on this ETP rank
  const long long fe2 = d.fe / d.etp;
  const long long me = expert_rows(d);
  const double mean = d.expert_tokens_mean;
  push(norm_forward(d, "mlp_norm"));
  // Router: one h x E GEMM in the training precision, then scores and top-k over the fp32
  // logits (read and write 4 bytes per logit).
  push(gemm(fw, "router", t_in, d.experts, d.h));
  const double logits = static_cast<double>(t_in * d.experts);
  push(issued_as(router_scoring_kernels(d, fw),
                 mem(fw, "router_topk", MemoryKernel::softmax, 8.0 * logits)));
  if (exchanges_metadata(d)) push(count_exchange(d));
  push(issued_as(kPermuteKernels, mem(fw, "moe_permute", MemoryKernel::copy, permute_bytes(d))));
  ep_exchange(ops, d, fw, "ep_dispatch", Toward::experts, run);
  if (exchanges_metadata(d)) push(probs_exchange(d, fw, "ep_probs_dispatch"));
  etp_exchange(ops, d, fw, "etp_ag", Toward::experts, run);
  if (sorts_by_local_expert(d)) push(sort_chunks(d, fw, "moe_sort_chunks", true));
  quantize_weight(ops, d, d.h, fe1 * d.local_experts, run);
  expert_quantize(ops, d, fw, routed_rows(d) * static_cast<double>(d.h), run);
  push(expert_gemm(d, fw, "expert_fc1", me, fe1, d.h, 2.0 * mean * static_cast<double>(fe1 * d.h)));
  if (d.gpt_oss) push(expert_clamp(d));
  push(expert_activation(d));
  quantize_weight(ops, d, fe2, d.h * d.local_experts, run);
  expert_quantize(ops, d, fw, routed_rows(d) * static_cast<double>(fe2), run);
  push(expert_gemm(d, fw, "expert_fc2", me, d.h, fe2, 2.0 * mean * static_cast<double>(fe2 * d.h)));
  if (d.gpt_oss) push(expert_bias_fwd(d));
  if (sorts_by_local_expert(d)) push(sort_chunks(d, fw, "moe_unsort_chunks", false));
  etp_exchange(ops, d, fw, "etp_rs", Toward::tokens, run);
  ep_exchange(ops, d, fw, "ep_combine", Toward::tokens, run);
  push(mem(fw, "moe_unpermute", MemoryKernel::copy, permute_bytes(d)));
  if (d.shared_f > 0) {
    // Shared experts: a dense gated MLP of width shared_f, TP-split like the dense MLP
    // (Megatron-Core SharedExpertMLP), after the routed experts (no moe_shared_expert_overlap).
    mlp_core_forward(ops, d, shared_expert_core(d), run);
  }
  push(mem(fw, "residual_add", MemoryKernel::residual_add, residual_bytes(d)));
}

void moe_block_host_side(std::vector<Op>& ops, std::size_t from, const Dims& d) {
  const bool whole = d.x.graphs.has(CudaGraphScope::moe);
  auto named = [](const Op& op, std::initializer_list<std::string_view> names) {
    for (std::string_view n : names) {
      if (n == op.name) return true;
    }
    return false;
  };
  for (std::size_t i = from; i < ops.size(); ++i) {
    Op& op = ops[i];
    if (whole) {
      op.graphed = true;
    } else if (named(op, {"mlp_norm", "router", "router_topk", "mlp_norm_bwd", "router_topk_bwd",
                          "router_dgrad", "router_wgrad"})) {
      op.graphed = d.x.graphs.has(CudaGraphScope::moe_router);
    } else if (named(op, {"ep_count_ag", "moe_permute", "moe_permute_bwd"})) {
      op.graphed = d.x.graphs.has(CudaGraphScope::moe_preprocess);
    }
    // Dropless: the grouped GEMM needs each expert's token count on the host, so the host
    // copies them from the device after the permutation and waits for that copy
    // (`MoEAlltoAllTokenDispatcher.preprocess` / `_maybe_dtoh_and_synchronize`,
    // megatron/core/transformer/moe/token_dispatcher.py at d98e8a64, lines 594-596 and
    // 921-960; the flex dispatchers' `.tolist()` of the counts alike). Backward reuses them.
    // Dropping without padding waits one kernel earlier, for the kept total that sizes the
    // permutation (lines 545-552); the model keeps the one place.
    if (!whole && d.x.counts_on_host && op.pass == Pass::forward && i > from &&
        named(ops[i - 1], {"moe_permute"})) {
      op.host_wait = HostWait::token_counts;
    }
    // Under the combined 1F1B schedule (moe_a2a_overlap) the host issues one layer's backward
    // between the pieces of another micro-batch's forward: the combine backward and the MLP
    // backward, then the forward's dispatch, whose sync drains both, then the dispatch
    // backward and the rest (`TransformerLayerSchedulePlan.run`,
    // megatron/core/models/common/model_chunk_schedule_plan.py at d98e8a64, lines 261-301).
    // The backward's dispatch is issued only once the GPU has drained.
    if (!whole && d.x.counts_on_host && d.x.a2a_overlap && named(op, {"ep_dispatch_bwd"})) {
      op.host_wait = HostWait::token_counts;
    }
  }
}

void moe_block_backward(std::vector<Op>& ops, const Dims& d) {
  const Pass bi = Pass::backward_input;
  const Pass bw = Pass::backward_weight;
  const long long t_in = d.tokens_sp;
  const long long fe1 = d.fe * 2 / d.etp;
  const long long fe2 = d.fe / d.etp;
  const long long me = expert_rows(d);
  const double mean = d.expert_tokens_mean;
  ops.push_back(mem(bi, "residual_add_bwd", MemoryKernel::residual_add, residual_bytes(d)));
  if (d.recomputed.has(RecomputeModule::moe)) {
    // "moe": the MoE block from its input again, dispatch and combine included.
    moe_block_forward(ops, d, Run::recompute);
  } else {
    if (d.recomputed.has(RecomputeModule::shared_experts) && d.shared_f > 0) {
      mlp_core_forward(ops, d, shared_expert_core(d), Run::recompute);
    }
    if (d.recomputed.has(RecomputeModule::moe_act)) {
      // "moe_act": the experts' activation again from the saved FC1 output (gpt-oss's clamp
      // is inside the checkpointed function), and its cast for the FC2 weight gradient.
      if (d.gpt_oss) {
        Op clamp = expert_clamp(d);
        clamp.recompute = true;
        ops.push_back(clamp);
      }
      Op act = expert_activation(d);
      act.recompute = true;
      ops.push_back(act);
      expert_quantize(ops, d, Pass::forward, routed_rows(d) * static_cast<double>(fe2), Run::recompute);
    }
    recompute_norm(ops, d, "mlp_norm");
  }
  if (d.shared_f > 0) mlp_core_backward(ops, d, shared_expert_core(d));
  ops.push_back(mem(bi, "moe_unpermute_bwd", MemoryKernel::copy, permute_bytes(d)));
  ep_exchange(ops, d, bi, "ep_combine_bwd", Toward::experts, Run::first);
  etp_exchange(ops, d, bi, "etp_ag_grad", Toward::experts, Run::first);
  if (sorts_by_local_expert(d)) ops.push_back(sort_chunks(d, bi, "moe_unsort_chunks_bwd", false));
  // FC2: dgrad (M = rows, N = fe2, K = h), wgrad (M = h, N = fe2, K = rows) per expert.
  if (d.gpt_oss) ops.push_back(expert_bias_bwd(d));
  expert_quantize(ops, d, bi, routed_rows(d) * static_cast<double>(d.h), Run::first);
  ops.push_back(expert_gemm(d, bi, "expert_fc2_dgrad", me, fe2, d.h, 2.0 * mean * static_cast<double>(fe2 * d.h)));
  ops.push_back(expert_gemm(d, bw, "expert_fc2_wgrad", d.h, fe2, me, 2.0 * mean * static_cast<double>(fe2 * d.h)));
  ops.push_back(mem(bi, "expert_swiglu_bwd", MemoryKernel::swiglu, 5.0 * d.act * routed_rows(d) * static_cast<double>(fe2)));
  if (d.gpt_oss) ops.push_back(expert_clamp_bwd(d));
  expert_quantize(ops, d, bi, routed_rows(d) * static_cast<double>(fe1), Run::first);
  ops.push_back(expert_gemm(d, bi, "expert_fc1_dgrad", me, d.h, fe1, 2.0 * mean * static_cast<double>(fe1 * d.h)));
  ops.push_back(expert_gemm(d, bw, "expert_fc1_wgrad", fe1, d.h, me, 2.0 * mean * static_cast<double>(fe1 * d.h)));
  if (sorts_by_local_expert(d)) ops.push_back(sort_chunks(d, bi, "moe_sort_chunks_bwd", true));
  etp_exchange(ops, d, bi, "etp_rs_grad", Toward::tokens, Run::first);
  if (exchanges_metadata(d)) ops.push_back(probs_exchange(d, bi, "ep_probs_dispatch_bwd"));
  ep_exchange(ops, d, bi, "ep_dispatch_bwd", Toward::tokens, Run::first);
  ops.push_back(mem(bi, "moe_permute_bwd", MemoryKernel::copy, permute_bytes(d)));
  const double logits = static_cast<double>(t_in * d.experts);
  ops.push_back(issued_as(router_scoring_kernels(d, bi),
                          mem(bi, "router_topk_bwd", MemoryKernel::softmax, 12.0 * logits)));
  ops.push_back(gemm(bi, "router_dgrad", t_in, d.h, d.experts));
  ops.push_back(gemm(bw, "router_wgrad", d.experts, d.h, t_in));
  ops.push_back(norm_backward(d, "mlp_norm_bwd"));
}

namespace {

/// Dims of MLA's core attention: every head has its own K and V (nkv = nq); the kernel's
/// head width is the mean of the query-key (nope + rope) and value widths, which gives its
/// FLOPs exactly: 2·s²·heads·(d_qk + d_v) = 4·s²·heads·(d_qk + d_v)/2.
Dims mla_core_dims(const Dims& d) {
  Dims a = d;
  a.nkv = d.nq;
  a.dh = (d.qk_nope + d.qk_rope + d.v_dim) / 2;
  return a;
}

/// Dims of a GEMM that runs on the SP shard (MLA's down projections run before the latent
/// all-gather).
Dims sp_shard_dims(const Dims& d) {
  Dims s = d;
  s.tokens = d.tokens_sp;
  return s;
}

/// Widths of MLA's projections on one TP rank, shared by its forward and backward.
struct MlaShapes {
  long long q_in = 0;     // query up-projection input: the q latent, or h without one
  long long q_out = 0;    // heads/t x (nope + rope)
  long long kv_down = 0;  // kv latent + the shared rope key
  long long kv_out = 0;   // heads/t x (nope + v)
  long long o_in = 0;     // heads/t x v
  long long latent = 0;   // the latents the SP all-gather moves: q_in + kv_down
  double rope_elements = 0;  // rope of every local query head and the one shared key
};

MlaShapes mla_shapes(const Dims& d) {
  MlaShapes m;
  m.q_in = d.q_lora > 0 ? d.q_lora : d.h;
  m.q_out = d.nq * (d.qk_nope + d.qk_rope) / d.t;
  m.kv_down = d.kv_lora + d.qk_rope;
  m.kv_out = d.nq * (d.qk_nope + d.v_dim) / d.t;
  m.o_in = d.nq * d.v_dim / d.t;
  m.latent = m.q_in + m.kv_down;
  m.rope_elements = static_cast<double>(d.tokens * (d.nq / d.t + 1) * d.qk_rope);
  return m;
}

/// Whether the up projections cast their weights to FP8, or reuse the copies the forward cast.
enum class WeightCasts : bool { reuse, cast };

/// The query and key/value up projections and RoPE. The weight casts run in the forward only:
/// the "mla_up_proj" re-run before backward reads the FP8 weights the forward cast.
void mla_up_projections(std::vector<Op>& ops, const Dims& d, const MlaShapes& m, Run run,
                        WeightCasts casts) {
  const bool cast_weights = casts == WeightCasts::cast;
  const bool recompute = run == Run::recompute;
  const Pass fw = Pass::forward;
  auto push = [&](Op op) {
    op.recompute = recompute;
    ops.push_back(op);
  };
  if (cast_weights) quantize_weight(ops, d, m.q_in, m.q_out, run);
  quantize(ops, d, fw, static_cast<double>(d.tokens * m.q_in), run);
  push(linear_gemm(d, fw, "q_up", d.tokens, m.q_out, m.q_in));
  if (cast_weights) quantize_weight(ops, d, d.kv_lora, m.kv_out, run);
  quantize(ops, d, fw, static_cast<double>(d.tokens * d.kv_lora), run);
  push(linear_gemm(d, fw, "kv_up", d.tokens, m.kv_out, d.kv_lora));
  // RoPE on the rope part of every query head and on the one shared rope key.
  push(rope_forward(d, m.rope_elements));
}

}  // namespace

void mla_block_forward(std::vector<Op>& ops, const Dims& d, const Training& tr, Run run) {
  const bool recompute = run == Run::recompute;
  const Pass fw = Pass::forward;
  auto push = [&](Op op) {
    op.recompute = recompute;
    ops.push_back(op);
  };
  const Dims ds = sp_shard_dims(d);
  const MlaShapes m = mla_shapes(d);
  push(norm_forward(d, "input_norm"));
  quantize(ops, ds, fw, static_cast<double>(d.tokens_sp * d.h), run);
  if (d.q_lora > 0) {
    quantize_weight(ops, d, d.h, d.q_lora, run);
    push(linear_gemm(d, fw, "q_down", d.tokens_sp, d.q_lora, d.h));
  }
  quantize_weight(ops, d, d.h, m.kv_down, run);
  push(linear_gemm(d, fw, "kv_down", d.tokens_sp, m.kv_down, d.h));
  // RMSNorm of the q and kv latents, then the SP all-gather of the latents.
  push(mem(fw, "latent_norm", norm_kernel(d), 2.0 * d.act * static_cast<double>(d.tokens_sp * (d.q_lora + d.kv_lora))));
  if (d.t > 1 && d.sp) {
    Op ag = coll(fw, "tp_ag_latent", CollectiveKind::all_gather, CommDim::tp, static_cast<int>(d.t),
                 d.act * static_cast<double>(d.tokens * m.latent));
    push(ag);
  }
  mla_up_projections(ops, d, m, run, WeightCasts::cast);
  attention_forward(ops, mla_core_dims(d), tr, run);
  quantize_weight(ops, d, m.o_in, d.h, run);
  quantize(ops, d, fw, static_cast<double>(d.tokens * m.o_in), run);
  tp_row_forward(ops, d, fw, run, RowCollective::under_gemm);
  push(linear_gemm(d, fw, "attn_proj", d.tokens, d.h, m.o_in));
  tp_row_forward(ops, d, fw, run, RowCollective::after_gemm);
  push(mem(fw, "residual_add", MemoryKernel::residual_add, residual_bytes(d)));
}

void mla_block_backward(std::vector<Op>& ops, const Dims& d, const Training& tr) {
  const Pass bi = Pass::backward_input;
  const Dims ds = sp_shard_dims(d);
  const MlaShapes m = mla_shapes(d);
  ops.push_back(mem(bi, "residual_add_bwd", MemoryKernel::residual_add, residual_bytes(d)));
  row_backward(ops, d, "attn_proj_dgrad", "attn_proj_wgrad", m.o_in, d.h);
  const Dims core = mla_core_dims(d);
  if (d.recomputed.has(RecomputeModule::mla_up_proj)) {
    // "mla_up_proj": the up projections and RoPE again from the saved latents, before the core
    // attention's backward reads Q, K and V.
    mla_up_projections(ops, d, m, Run::recompute, WeightCasts::reuse);
  }
  if (d.recomputed.has(RecomputeModule::core_attn)) attention_forward(ops, core, tr, Run::recompute);
  attention_backward(ops, core, tr);
  ops.push_back(rope_backward(d, m.rope_elements));
  input_grad(ops, d, "kv_up_dgrad", d.kv_lora, m.kv_out, Operands::recipe, CastFeeds::local);
  weight_grad(ops, d, "kv_up_wgrad", d.kv_lora, m.kv_out, Operands::recipe);
  input_grad(ops, d, "q_up_dgrad", m.q_in, m.q_out, Operands::recipe, CastFeeds::local);
  weight_grad(ops, d, "q_up_wgrad", m.q_in, m.q_out, Operands::recipe);
  if (d.t > 1) {
    // The latents' gradients go back to their SP shards (reduce-scatter), or are summed over
    // TP without SP.
    const double bytes = d.act * static_cast<double>(d.tokens * m.latent);
    ops.push_back(d.sp ? coll(bi, "tp_rs_latent", CollectiveKind::reduce_scatter, CommDim::tp,
                              static_cast<int>(d.t), bytes)
                       : coll(bi, "tp_ar_latent", CollectiveKind::all_reduce, CommDim::tp,
                              static_cast<int>(d.t), bytes));
  }
  ops.push_back(mem(bi, "latent_norm_bwd", norm_kernel(d),
                    3.0 * d.act * static_cast<double>(d.tokens_sp * (d.q_lora + d.kv_lora))));
  recompute_norm(ops, d, "input_norm");
  input_grad(ops, ds, "kv_down_dgrad", d.h, m.kv_down, Operands::recipe, CastFeeds::local);
  weight_grad(ops, ds, "kv_down_wgrad", d.h, m.kv_down, Operands::recipe);
  if (d.q_lora > 0) {
    input_grad(ops, ds, "q_down_dgrad", d.h, d.q_lora, Operands::recipe, CastFeeds::local);
    weight_grad(ops, ds, "q_down_wgrad", d.h, d.q_lora, Operands::recipe);
  }
  ops.push_back(norm_backward(d, "input_norm_bwd"));
}

}  // namespace tetra::ops::detail
