#pragma once
/// The rules a layout must satisfy for a model, a cluster size and a training set-up
/// (docs/scenario-format.md; docs/architecture.md "Data flow" step 1). Shared by scenarios
/// (which adds file positions) and
/// search (which counts how many candidates each rule rejects).

#include <optional>
#include <string>

#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"

namespace tetra::parallel {

/// A broken rule: the [layout]/[training] key to blame, and what was expected.
/// `rule` is a short stable name used in search summaries (e.g. "tp-divides-heads").
struct LayoutIssue {
  std::string key;
  std::string rule;
  std::string message;
};

/// The first rule the layout breaks, or nothing. `world` is the cluster's GPU count.
/// Checks: positive sizes; tp divides heads and kv_heads; dp*tp*cp*pp == world;
/// mbs*dp divides global_batch; seq_len divisible by 2*cp (cp > 1); sp needs tp > 1;
/// layers split into pp*vp chunks (or a valid uneven first/last split, parallel::chunk_layers);
/// vp > 1 needs pp > 1 and the interleaved or layered schedule, and interleaved needs vp > 1
/// and micro-batches divisible by pp; zb-h1 needs pp > 1 or runs as 1f1b; zero_stage in 0..3.
///
/// Rules in the order they are checked (`rule` name, `key` blamed):
///  model-positive (layers), heads-divide-hidden (hidden), kv-heads-divide-heads (kv_heads);
///  positive (tp, cp, pp, dp, vp, mbs, seq_len, global_batch; first/last_stage_layers >= 0);
///  zero-stage-range (zero_stage); tp-divides-heads (tp), tp-divides-ffn (tp);
///  world-size (dp); batch-divides (global_batch); cp-divides-seq (cp); check_cp_comm's rules;
///  sp-needs-tp (sp), sp-divides-seq (sp: seq_len/cp divisible by tp);
///  uneven-needs-pp, uneven-split (first_stage_layers or last_stage_layers: the layers left
///  must split evenly, at least one each, over the vp chunks of the other ranks),
///  uneven-chunks (first_stage_layers or last_stage_layers: with vp > 1 an end rank holds at
///  least (vp-1)*k, k the common chunk size), layers-divide (pp, or vp when vp > 1);
///  vp-needs-pp (vp), vp-needs-interleaved (vp), interleaved-needs-vp (schedule),
///  interleaved-microbatches (global_batch: Megatron's interleaved schedule needs the
///  micro-batch count to be a multiple of pp); step-too-large (global_batch: at most 10^6
///  micro-batch passes, global_batch/(mbs*dp) * pp * vp, per step); rank-order (rank_order).
/// zb-h1 with pp == 1 is not an error (nothing to overlap; it runs as 1f1b).
[[nodiscard]] std::optional<LayoutIssue> check_layout(const model::Model& model, long long world,
                                                      const Training& training,
                                                      const Layout& layout);

/// The mixture-of-experts rules alone (part of check_layout, after sp-divides-seq), in order
/// (`rule`, key): positive (ep, etp); pad-needs-capacity (moe_pad_to_capacity without
/// moe_capacity_factor); ep-needs-moe (ep, etp or moe_capacity_factor on a dense
/// model); topk-exceeds-experts (experts_per_token); ep-divides-experts (ep);
/// ep-divides-dp (ep, or etp when etp > 1: ep*etp must divide tp*cp*dp, Megatron-Core's
/// expert rank decomposition tp*cp*dp = etp*ep*edp); etp-divides-ffn (etp: moe_ffn_hidden);
/// tp-divides-ffn (tp: the shared-expert width); ep-tp-needs-sp (sp: ep > 1 with tp > 1);
/// flex-needs-ep (moe_token_dispatcher), flex-dropless (moe_capacity_factor).
[[nodiscard]] std::optional<LayoutIssue> check_moe_layout(const model::Model& model,
                                                          const Training& training,
                                                          const Layout& layout);

/// Megatron-Core's rules for recompute_modules (part of check_layout), all keyed
/// recompute_modules: modules-need-selective (recompute = selective), mla-up-proj-needs-mla,
/// module-needs-moe (moe_act, moe, shared_experts), shared-experts-needs-shared,
/// modules-delayed-fp8 (moe_act / layernorm under delayed scaling), moe-recompute-a2a-overlap.
[[nodiscard]] std::optional<LayoutIssue> check_recompute_modules(const model::Model& model,
                                                                 const Training& training,
                                                                 const Layout& layout);

/// Transformer Engine's rules for cp_comm_type (part of check_layout, after cp-divides-seq; all
/// keyed cp_comm_type, checked when cp > 1): cp-comm-needs-megatron (not p2p outside framework
/// megatron), cp-comm-mla (MLA runs only in a ring: p2p or a2a+p2p), cp-comm-sinks (gpt-oss's
/// sliding windows and softmax sinks need a2a), a2a-divides-heads (a2a: heads/tp and kv_heads/tp
/// divisible by cp); under a2a+p2p, keyed cp_a2a: cp-a2a-divides-cp (1 < cp_a2a < cp, dividing
/// cp) and a2a-divides-heads (heads/tp and kv_heads/tp divisible by cp_a2a).
[[nodiscard]] std::optional<LayoutIssue> check_cp_comm(const model::Model& model, const Training& training,
                                                       const Layout& layout);

/// The PyTorch-native rules alone (part of check_layout): HSDP's dp_shard x dp_replicate = dp,
/// reshard_after_forward only under FSDP2 and dividing its shard group, compile and async TP
/// only with framework fsdp (async TP also needs compile and SP).
[[nodiscard]] std::optional<LayoutIssue> check_torch_native(const Training& training,
                                                            const Layout& layout);

}  // namespace tetra::parallel
