// Layout rules (the scenario keys of docs/scenario-format.md, checked at load as
// docs/architecture.md "Data flow" step 1 says; Megatron-LM argument checks in
// megatron/training/arguments.py and megatron/core/pipeline_parallel/schedules.py).
#include "tetra/parallel/validate.hpp"

#include <algorithm>
#include <array>


namespace tetra::parallel {

using model::Model;
using model::Moe;

namespace {

std::string str(long long v) { return std::to_string(v); }

LayoutIssue issue(std::string key, std::string rule, std::string message) {
  return LayoutIssue{std::move(key), std::move(rule), std::move(message)};
}

/// rank_order must name tp, cp, dp and pp once each, joined by '-'.
bool valid_rank_order(const std::string& order) {
  std::array<std::string, 4> want = {"cp", "dp", "pp", "tp"};
  std::array<std::string, 4> got;
  std::size_t n = 0;
  std::size_t start = 0;
  while (start <= order.size()) {
    const std::size_t dash = std::min(order.find('-', start), order.size());
    if (n == got.size()) return false;
    got[n++] = order.substr(start, dash - start);
    start = dash + 1;
  }
  if (n != got.size()) return false;
  std::sort(got.begin(), got.end());
  return got == want;
}

}  // namespace

std::optional<LayoutIssue> check_cp_comm(const Model& model, const Training& training, const Layout& layout) {
  // Transformer Engine's rules (`attn_forward_func_with_cp` in transformer_engine/pytorch/
  // attention/dot_product_attention/context_parallel.py, v2.13): K and V of another head
  // width than Q (MLA) only in the ring; sliding windows and learnable softmax sinks (gpt-oss
  // has both) only without it, sinks only under a2a; a2a scatters Q's and K/V's heads
  // (AttnFuncWithCPAndQKVOA2A: "The number of attention heads needs to be divisible by CP
  // size!").
  if (layout.cp_a2a != 1 && (layout.cp <= 1 || layout.cp_comm != CpComm::a2a_p2p)) {
    return issue("cp_a2a", "cp-a2a-needs-hierarchical",
                 "cp_a2a=" + str(layout.cp_a2a) +
                     " sizes the all-to-all level of cp_comm_type=\"a2a+p2p\" (cp > 1); "
                     "this layout has cp=" + str(layout.cp) + ", cp_comm_type=\"" +
                     to_string(layout.cp_comm) + "\"");
  }
  if (layout.cp <= 1) return std::nullopt;
  const std::string name = std::string("cp_comm_type=\"") + to_string(layout.cp_comm) + "\"";
  if (layout.cp_comm != CpComm::p2p && training.framework != Framework::megatron) {
    return issue("cp_comm_type", "cp-comm-needs-megatron",
                 name + " is Transformer Engine's context parallelism (framework \"megatron\"); framework \"" +
                     to_string(training.framework) + "\" runs its own");
  }
  if (training.framework != Framework::megatron) return std::nullopt;
  if (model.mla && layout.cp_comm != CpComm::p2p && layout.cp_comm != CpComm::a2a_p2p) {
    return issue("cp_comm_type", "cp-comm-mla", name + " does not run multi-head latent attention; use \"p2p\"");
  }
  if (model.arch == model::Arch::gpt_oss && layout.cp_comm != CpComm::a2a) {
    return issue("cp_comm_type", "cp-comm-sinks",
                 name + " does not run gpt-oss's sliding windows and softmax sinks; use \"a2a\"");
  }
  if (layout.cp_comm == CpComm::a2a) {
    const long long q = model.heads / layout.tp;
    const long long kv = model.kv_heads / layout.tp;
    if (q % layout.cp != 0 || kv % layout.cp != 0) {
      return issue("cp_comm_type", "a2a-divides-heads",
                   name + " needs heads/tp = " + str(q) + " and kv_heads/tp = " + str(kv) +
                       " divisible by cp=" + str(layout.cp));
    }
  }
  if (layout.cp_comm == CpComm::a2a_p2p) {
    // Megatron-Core asserts prod(hierarchical_context_parallel_sizes) == cp; TE runs a level
    // of one rank as the other scheme alone (attn_forward_func_with_cp), which cp_comm_type
    // "a2a" or "p2p" names; the all-to-all level scatters the heads as a2a does.
    const long long a = layout.cp_a2a;
    if (a <= 1 || a >= layout.cp || layout.cp % a != 0) {
      return issue("cp_a2a", "cp-a2a-divides-cp",
                   name + " needs cp_a2a, the all-to-all group of hierarchical_context_parallel_sizes, "
                          "between 2 and cp/2 and dividing cp=" + str(layout.cp) + " (got " + str(a) +
                       "); a single level is cp_comm_type \"a2a\" or \"p2p\"");
    }
    const long long q = model.heads / layout.tp;
    const long long kv = model.kv_heads / layout.tp;
    if (q % a != 0 || kv % a != 0) {
      return issue("cp_a2a", "a2a-divides-heads",
                   name + " needs heads/tp = " + str(q) + " and kv_heads/tp = " + str(kv) +
                       " divisible by cp_a2a=" + str(a));
    }
  }
  return std::nullopt;
}

std::optional<LayoutIssue> check_layout(const Model& model, long long world,
                                        const Training& training, const Layout& layout) {
  // 1. Model shape (presets and HF import guarantee it; explicit [model] tables may not).
  if (model.layers <= 0 || model.hidden <= 0 || model.ffn_hidden <= 0 || model.heads <= 0 ||
      model.kv_heads <= 0 || model.vocab <= 0) {
    return issue("layers", "model-positive",
                 "layers, hidden, ffn_hidden, heads, kv_heads and vocab must all be positive");
  }
  if (model.head_dim_override == 0 && !model.mla && model.hidden % model.heads != 0) {
    return issue("hidden", "heads-divide-hidden",
                 "hidden=" + str(model.hidden) + " must be a multiple of heads=" +
                     str(model.heads));
  }
  if (model.heads % model.kv_heads != 0) {
    return issue("kv_heads", "kv-heads-divide-heads",
                 "kv_heads=" + str(model.kv_heads) + " must divide heads=" + str(model.heads));
  }

  // 2. Positive sizes.
  const std::array<std::pair<const char*, int>, 6> sizes = {{{"tp", layout.tp},
                                                             {"cp", layout.cp},
                                                             {"pp", layout.pp},
                                                             {"dp", layout.dp},
                                                             {"vp", layout.vp},
                                                             {"mbs", layout.mbs}}};
  for (const auto& [key, value] : sizes) {
    if (value < 1) {
      return issue(key, "positive",
                   std::string(key) + "=" + str(value) + " must be a positive integer");
    }
  }
  if (training.seq_len < 1) {
    return issue("seq_len", "positive",
                 "seq_len=" + str(training.seq_len) + " must be a positive integer");
  }
  if (training.global_batch < 1) {
    return issue("global_batch", "positive",
                 "global_batch=" + str(training.global_batch) + " must be a positive integer");
  }
  if (layout.first_stage_layers < 0 || layout.last_stage_layers < 0) {
    const bool first = layout.first_stage_layers < 0;
    return issue(first ? "first_stage_layers" : "last_stage_layers", "positive",
                 std::string(first ? "first_stage_layers" : "last_stage_layers") +
                     " must be >= 0 (0 = even split)");
  }

  // 3. zero_stage.
  if (training.zero_stage < 0 || training.zero_stage > 3) {
    return issue("zero_stage", "zero-stage-range",
                 "zero_stage=" + str(training.zero_stage) + " must be 0, 1, 2 or 3");
  }

  // 4. Tensor parallelism splits heads, KV heads (query groups) and the FFN (Megatron
  //    requires num_attention_heads % tp == 0, num_query_groups % tp == 0).
  if (model.heads % layout.tp != 0 || model.kv_heads % layout.tp != 0) {
    return issue("tp", "tp-divides-heads",
                 "tp=" + str(layout.tp) + " must divide heads=" + str(model.heads) +
                     " and kv_heads=" + str(model.kv_heads));
  }
  if (model.ffn_hidden % layout.tp != 0) {
    return issue("tp", "tp-divides-ffn",
                 "tp=" + str(layout.tp) + " must divide ffn_hidden=" + str(model.ffn_hidden));
  }

  // 5. The layout covers the cluster exactly.
  if (layout.world() != world) {
    return issue("dp", "world-size",
                 "dp*tp*cp*pp = " + str(layout.dp) + "*" + str(layout.tp) + "*" +
                     str(layout.cp) + "*" + str(layout.pp) + " = " + str(layout.world()) +
                     " must equal the cluster's " + str(world) + " GPUs");
  }

  // 6. Every DP rank gets a whole number of micro-batches.
  const long long per_step = static_cast<long long>(layout.mbs) * layout.dp;
  if (training.global_batch % per_step != 0) {
    return issue("global_batch", "batch-divides",
                 "global_batch=" + str(training.global_batch) + " must be a multiple of mbs*dp = " +
                     str(layout.mbs) + "*" + str(layout.dp) + " = " + str(per_step));
  }

  // 7. Context parallelism: load-balanced causal split into 2*cp chunks (Megatron / TE).
  if (layout.cp > 1 && training.seq_len % (2 * layout.cp) != 0) {
    return issue("cp", "cp-divides-seq",
                 "seq_len=" + str(training.seq_len) + " must be divisible by 2*cp = " +
                     str(2 * layout.cp) + " (load-balanced context parallelism)");
  }
  if (auto cp = check_cp_comm(model, training, layout)) return cp;

  // 8. Sequence parallelism shards the sequence over TP.
  if (layout.sp && layout.tp == 1) {
    return issue("sp", "sp-needs-tp", "sp=true needs tp > 1");
  }
  if (layout.sp && (training.seq_len / layout.cp) % layout.tp != 0) {
    return issue("sp", "sp-divides-seq",
                 "sp=true needs seq_len/cp = " + str(training.seq_len / layout.cp) +
                     " to be divisible by tp=" + str(layout.tp));
  }

  // 8b. Mixture of experts: expert and expert-tensor parallelism.
  if (auto moe = check_moe_layout(model, training, layout)) return moe;

  // 8c. Selective recomputation by module.
  if (auto rc = check_recompute_modules(model, training, layout)) return rc;

  // 9. Layers into stages.
  const bool uneven = layout.first_stage_layers > 0 || layout.last_stage_layers > 0;
  if (uneven) {
    const std::string key = layout.first_stage_layers > 0 ? "first_stage_layers"
                                                          : "last_stage_layers";
    if (layout.pp < 2) {
      return issue(key, "uneven-needs-pp", key + " needs pp > 1");
    }
    // The fixed ends hold first/last_stage_layers over all their chunks; every other chunk
    // holds the common size k (parallel::chunk_layers, arXiv 2407.21783 section 3.3.2).
    const int v = layout.vp;
    const int fixed = (layout.first_stage_layers > 0 ? 1 : 0) + (layout.last_stage_layers > 0 ? 1 : 0);
    const int middle = layout.pp - fixed;
    const long long rest = static_cast<long long>(model.layers) - layout.first_stage_layers -
                           layout.last_stage_layers;
    const long long middle_chunks = static_cast<long long>(middle) * v;
    const bool ok = middle == 0 ? rest == 0 : (rest >= middle_chunks && rest % middle_chunks == 0);
    if (!ok) {
      return issue(key, "uneven-split",
                   "layers=" + str(model.layers) + " minus first_stage_layers=" +
                       str(layout.first_stage_layers) + " and last_stage_layers=" +
                       str(layout.last_stage_layers) + " leaves " + str(rest) +
                       (middle == 0 ? std::string(", expected 0 with pp=2")
                                    : ", which must split evenly (at least one each) over the " +
                                          (v > 1 ? str(middle_chunks) + " chunks of the " : std::string()) +
                                          str(middle) + " other pipeline ranks"));
    }
    if (v > 1) {
      // The end ranks' other vp-1 chunks hold k each; the outermost chunk keeps the rest (>= 0).
      const long long chunks = static_cast<long long>(layout.pp) * v;
      const long long k = middle > 0 ? rest / middle_chunks : (model.layers + chunks - 1) / chunks;
      const long long need = (v - 1) * k;
      for (const bool first : {true, false}) {
        const int have = first ? layout.first_stage_layers : layout.last_stage_layers;
        if (have > 0 && have < need) {
          const std::string name = first ? "first_stage_layers" : "last_stage_layers";
          return issue(name, "uneven-chunks",
                       name + "=" + str(have) + " must be at least (vp-1)*k = " + str(v - 1) +
                           "*" + str(k) + " = " + str(need) +
                           ": every chunk but the outermost holds k layers");
        }
      }
    }
  } else if (model.layers % (static_cast<long long>(layout.pp) * layout.vp) != 0) {
    return issue(layout.vp > 1 ? "vp" : "pp", "layers-divide",
                 "layers=" + str(model.layers) + " must split evenly into pp*vp = " +
                     str(layout.pp) + "*" + str(layout.vp) + " = " +
                     str(static_cast<long long>(layout.pp) * layout.vp) +
                     " chunks (or set first_stage_layers/last_stage_layers)");
  }

  // 10. Virtual stages go with the schedules that place vp chunks per rank: interleaved 1F1B
  //     and layered gradient accumulation (modular placement: Lamy-Poirier, arXiv 2106.02679;
  //     ServiceNow Fast-LLM puts stage i on pipeline rank i mod p).
  if (layout.vp > 1 && layout.pp < 2) {
    return issue("vp", "vp-needs-pp", "vp=" + str(layout.vp) + " needs pp > 1");
  }
  if (layout.vp > 1 && layout.schedule != Schedule::interleaved &&
      layout.schedule != Schedule::layered) {
    return issue("vp", "vp-needs-interleaved",
                 "vp=" + str(layout.vp) + " needs schedule=\"interleaved\" or \"layered\" (got \"" +
                     to_string(layout.schedule) + "\")");
  }
  if (layout.schedule == Schedule::interleaved && layout.vp < 2) {
    return issue("schedule", "interleaved-needs-vp",
                 "schedule=\"interleaved\" needs vp > 1 (got vp=" + str(layout.vp) + ")");
  }
  // Megatron's interleaved schedule runs micro-batches in groups of pp
  // (megatron/core/pipeline_parallel/schedules.py: "number of microbatches ... must be a
  // multiple of pipeline parallel size when using interleaved schedule").
  if (layout.schedule == Schedule::interleaved) {
    const long long m = training.global_batch / per_step;
    if (m % layout.pp != 0) {
      return issue("global_batch", "interleaved-microbatches",
                   "schedule=\"interleaved\" needs the micro-batches per DP rank "
                   "(global_batch/(mbs*dp) = " + str(m) + ") to be a multiple of pp=" +
                       str(layout.pp));
    }
  }
  // zb-h1 with pp == 1 is not an error: it runs as 1f1b (nothing to overlap).

  // 10b. A step small enough to replay: micro-batches per DP rank times model chunks (pp*vp)
  // at most kMaxPasses. Real runs stay far below (gbs 4096, dp 1, pp 32, vp 4: 524,288);
  // beyond it a simulation would run for minutes and exhaust memory.
  {
    constexpr double kMaxPasses = 1e6;
    const double passes = static_cast<double>(training.global_batch / per_step) * layout.pp * layout.vp;
    if (passes > kMaxPasses) {
      return issue("global_batch", "step-too-large",
                   "global_batch/(mbs*dp) * pp * vp = " + str(training.global_batch / per_step) + " * " +
                       str(layout.pp) + " * " + str(layout.vp) +
                       " micro-batch passes per step; at most 1000000 can be simulated");
    }
  }

  // 11. ac_freq belongs to selective_layer.
  if (layout.ac_freq != Layout{}.ac_freq && layout.recompute != Recompute::selective_layer) {
    return issue("ac_freq", "ac-freq-needs-selective-layer",
                 "ac_freq=" + str(layout.ac_freq) + " needs recompute = \"selective_layer\" (got \"" +
                     to_string(layout.recompute) + "\")");
  }

  // 11a. A mask built in the data loader is Megatron-Core GPTDataset's.
  if (training.dataloader_mask && *training.dataloader_mask != LoaderMask::none &&
      training.framework != Framework::megatron) {
    return issue("dataloader_mask", "loader-mask-needs-megatron",
                 std::string("dataloader_mask=\"") + to_string(*training.dataloader_mask) +
                     "\" is Megatron-Core GPTDataset's host-built attention mask; framework \"" +
                     to_string(training.framework) + "\" builds none");
  }

  // 11b. Activation offloading is Megatron-Core's (`cpu_offloading_num_layers`), which
  // transformer_block.py allows only below the layers of a model chunk.
  if (layout.offload_layers > 0) {
    if (training.framework != Framework::megatron) {
      return issue("offload_layers", "offload-needs-megatron",
                   "offload_layers=" + str(layout.offload_layers) +
                       " is Megatron-Core's cpu_offloading_num_layers; framework \"" +
                       to_string(training.framework) + "\" has no activation offloading");
    }
    // Megatron-Core transformer_config.py: "Currently there is no support for Pipeline
    // parallelism with CPU offloading"; recompute_granularity and CUDA graphs are refused too.
    if (layout.pp > 1) {
      return issue("offload_layers", "offload-needs-pp1",
                   "offload_layers=" + str(layout.offload_layers) +
                       " needs pp = 1 (Megatron-Core has no CPU offloading with pipeline parallelism; got pp=" +
                       str(layout.pp) + ")");
    }
    if (layout.recompute != Recompute::none) {
      return issue("offload_layers", "offload-no-recompute",
                   "offload_layers=" + str(layout.offload_layers) + " needs recompute = \"none\" (got \"" +
                       to_string(layout.recompute) + "\"): Megatron-Core offloads or recomputes, not both");
    }
    if (training.cuda_graphs.bits != 0) {
      return issue("offload_layers", "offload-no-cuda-graph",
                   "offload_layers=" + str(layout.offload_layers) + " cannot run with cuda_graph (Megatron-Core: "
                   "\"CUDA graphs not supported with CPU offloading\")");
    }
    if (layout.offload_layers >= model.layers) {
      return issue("offload_layers", "offload-below-layers",
                   "offload_layers=" + str(layout.offload_layers) + " must be below the model's layers (" +
                       str(model.layers) + ")");
    }
  }

  // 11c. bf16 Adam moments are Megatron-Core's precision-aware optimizer.
  if (training.adam_moments_dtype != Precision::fp32 && training.framework != Framework::megatron) {
    return issue("adam_moments_dtype", "moments-need-megatron",
                 std::string("adam_moments_dtype = \"") + to_string(training.adam_moments_dtype) +
                     "\" is Megatron-Core's precision-aware optimizer; framework \"" +
                     to_string(training.framework) + "\" keeps fp32 moments");
  }

  // 12. Rank order.
  if (!valid_rank_order(layout.rank_order)) {
    return issue("rank_order", "rank-order",
                 "rank_order=\"" + layout.rank_order +
                     "\" must name tp, cp, dp and pp once each, joined by '-' (e.g. \"tp-cp-dp-pp\")");
  }
  return check_torch_native(training, layout);
}

std::optional<LayoutIssue> check_moe_layout(const Model& model, const Training& training,
                                            const Layout& layout) {
  if (layout.ep < 1 || layout.etp < 1) {
    const char* key = layout.ep < 1 ? "ep" : "etp";
    return issue(key, "positive",
                 std::string(key) + "=" + str(layout.ep < 1 ? layout.ep : layout.etp) +
                     " must be a positive integer");
  }
  // Megatron-Core transformer_config.py: "moe_expert_capacity_factor must be set to use
  // moe_pad_expert_input_to_capacity".
  if (training.moe_pad_to_capacity && !training.moe_capacity_factor) {
    return issue("moe_pad_to_capacity", "pad-needs-capacity", "moe_pad_to_capacity needs moe_capacity_factor");
  }
  // The backend (Megatron-Core `moe_flex_dispatcher_backend`) applies to the flex dispatcher
  // only; elsewhere it would be ignored without a word.
  if (layout.moe_flex_backend != FlexBackend::deepep && layout.moe_dispatcher != MoeDispatcher::flex) {
    return issue("moe_flex_backend", "flex-backend-needs-flex",
                 std::string("moe_flex_backend=\"") + to_string(layout.moe_flex_backend) +
                     "\" needs moe_token_dispatcher = \"flex\"");
  }
  if (!model.moe) {
    if (layout.ep > 1 || layout.etp > 1) {
      const char* key = layout.ep > 1 ? "ep" : "etp";
      return issue(key, "ep-needs-moe",
                   std::string(key) + "=" + str(layout.ep > 1 ? layout.ep : layout.etp) +
                       " needs a mixture-of-experts model (num_experts in [model])");
    }
    if (training.moe_capacity_factor) {
      return issue("moe_capacity_factor", "ep-needs-moe",
                   "moe_capacity_factor needs a mixture-of-experts model (num_experts in [model])");
    }
    if (training.moe_a2a_overlap) {
      return issue("moe_a2a_overlap", "ep-needs-moe",
                   "moe_a2a_overlap needs a mixture-of-experts model (num_experts in [model])");
    }
    for (const auto& [set, key] : {std::pair{training.moe_router_fusion, "moe_router_fusion"},
                                   std::pair{training.moe_aux_loss, "moe_aux_loss"}}) {
      if (set) {
        return issue(key, "ep-needs-moe",
                     std::string(key) + " needs a mixture-of-experts model (num_experts in [model])");
      }
    }
    return std::nullopt;
  }
  const Moe& e = *model.moe;
  if (e.experts_per_token < 1 || e.experts_per_token > e.num_experts) {
    return issue("experts_per_token", "topk-exceeds-experts",
                 "experts_per_token=" + str(e.experts_per_token) + " must be between 1 and num_experts=" +
                     str(e.num_experts));
  }
  // Megatron-LM arguments.py: "num_experts must be divisible by expert_model_parallel_size".
  if (e.num_experts % layout.ep != 0) {
    return issue("ep", "ep-divides-experts",
                 "ep=" + str(layout.ep) + " must divide num_experts=" + str(e.num_experts));
  }
  // Megatron-Core parallel_state.initialize_model_parallel: the expert ranks are etp x ep x
  // edp x pp with world_size divisible by etp*ep*pp ("world_size ... is not divisible by
  // expert_tensor_model_pipeline_parallel size"); CP folds into the expert data-parallel
  // group, so ep*etp must divide tp*cp*dp.
  const long long dense = static_cast<long long>(layout.tp) * layout.cp * layout.dp;
  const long long expert = static_cast<long long>(layout.ep) * layout.etp;
  if (dense % expert != 0) {
    return issue(layout.etp > 1 ? "etp" : "ep", "ep-divides-dp",
                 "ep*etp = " + str(layout.ep) + "*" + str(layout.etp) + " = " + str(expert) +
                     " must divide tp*cp*dp = " + str(layout.tp) + "*" + str(layout.cp) + "*" +
                     str(layout.dp) + " = " + str(dense) +
                     " (Megatron-Core folds expert parallelism over the data, context and tensor ranks)");
  }
  // Each expert's FFN splits over etp (TEGroupedMLP: ffn_hidden_size / expert TP size).
  if (e.moe_ffn_hidden % layout.etp != 0) {
    return issue("etp", "etp-divides-ffn",
                 "etp=" + str(layout.etp) + " must divide moe_ffn_hidden=" + str(e.moe_ffn_hidden));
  }
  if (e.shared_width() % layout.tp != 0) {
    return issue("tp", "tp-divides-ffn",
                 "tp=" + str(layout.tp) + " must divide the shared-expert width " + str(e.shared_width()));
  }
  // Megatron-Core transformer_config.py: "When using expert parallelism and tensor
  // parallelism, sequence parallelism must be used".
  if (layout.ep > 1 && layout.tp > 1 && !layout.sp) {
    return issue("sp", "ep-tp-needs-sp",
                 "ep=" + str(layout.ep) + " with tp=" + str(layout.tp) + " needs sp=true");
  }
  // Megatron-Core MoEFlexTokenDispatcher: "Flex token dispatcher requires TPxEP > 1" (expert
  // TP x EP) and "does not support --moe-pad-expert-input-to-capacity".
  if (layout.moe_dispatcher == MoeDispatcher::flex) {
    if (expert < 2) {
      return issue("moe_token_dispatcher", "flex-needs-ep",
                   "moe_token_dispatcher=\"flex\" needs ep*etp > 1");
    }
    if (training.moe_capacity_factor) {
      return issue("moe_capacity_factor", "flex-dropless",
                   "moe_token_dispatcher=\"flex\" runs dropless; remove moe_capacity_factor");
    }
  }
  // Megatron-Core transformer_config.py, overlap_moe_expert_parallel_comm: "only supported with
  // expert model parallelism", "supported with alltoall/flex token dispatcher", "disable full
  // recomputation", and with pp > 1 "virtual_pipeline_model_parallel_size must be specified".
  if (training.moe_a2a_overlap) {
    if (layout.ep < 2) {
      return issue("moe_a2a_overlap", "a2a-overlap-needs-ep", "moe_a2a_overlap needs ep > 1");
    }
    if (layout.moe_dispatcher == MoeDispatcher::allgather) {
      return issue("moe_a2a_overlap", "a2a-overlap-dispatcher",
                   "moe_a2a_overlap needs moe_token_dispatcher = \"alltoall\" or \"flex\"");
    }
    if (layout.recompute == Recompute::full || layout.recompute == Recompute::selective_layer) {
      return issue("recompute", "a2a-overlap-recompute",
                   "moe_a2a_overlap cannot run with full recomputation (recompute=" +
                       std::string(to_string(layout.recompute)) + ")");
    }
    if (layout.pp > 1 && layout.schedule != Schedule::interleaved) {
      return issue("moe_a2a_overlap", "a2a-overlap-needs-vp",
                   "moe_a2a_overlap with pp=" + str(layout.pp) + " needs the interleaved schedule (vp)");
    }
  }
  return std::nullopt;
}

// Megatron-Core transformer_config.py (__post_init__, at d98e8a64dd): the module list applies
// under recompute_granularity = "selective"; "mla_up_proj is only supported with
// multi_latent_attention", "moe_act in recompute_modules is only supported with
// moe_grouped_gemm", "shared_experts recompute cannot work with --moe-shared-expert-overlap",
// "Delayed scaling does not support moe_act and layernorm recompute for fp8", and "disable moe
// in recompute_modules when enabling overlap_moe_expert_parallel_comm".
std::optional<LayoutIssue> check_recompute_modules(const Model& model, const Training& training,
                                                   const Layout& layout) {
  const RecomputeModules& m = layout.recompute_modules;
  if (m.empty()) return std::nullopt;
  const std::string list = format_recompute_modules(m);
  if (layout.recompute != Recompute::selective) {
    return issue("recompute_modules", "modules-need-selective",
                 "recompute_modules=" + list + " needs recompute = \"selective\" (got \"" +
                     to_string(layout.recompute) + "\")");
  }
  if (m.has(RecomputeModule::mla_up_proj) && !model.mla) {
    return issue("recompute_modules", "mla-up-proj-needs-mla",
                 "recompute_modules names mla_up_proj, which needs multi-head latent attention");
  }
  const bool moe = model.moe.has_value();
  for (const RecomputeModule mod : {RecomputeModule::moe_act, RecomputeModule::moe, RecomputeModule::shared_experts}) {
    if (m.has(mod) && !moe) {
      return issue("recompute_modules", "module-needs-moe",
                   std::string("recompute_modules names ") + to_string(mod) + ", which needs a mixture-of-experts model");
    }
  }
  if (m.has(RecomputeModule::shared_experts) && model.moe->shared_width() <= 0) {
    return issue("recompute_modules", "shared-experts-needs-shared",
                 "recompute_modules names shared_experts, but the model has none");
  }
  if ((m.has(RecomputeModule::moe_act) || m.has(RecomputeModule::layernorm)) &&
      training.fp8.recipe == Fp8Recipe::delayed) {
    return issue("recompute_modules", "modules-delayed-fp8",
                 "delayed FP8 scaling does not support moe_act and layernorm recomputation");
  }
  if (m.has(RecomputeModule::moe) && training.moe_a2a_overlap) {
    return issue("recompute_modules", "moe-recompute-a2a-overlap",
                 "recompute_modules names moe, which moe_a2a_overlap does not allow");
  }
  return std::nullopt;
}

std::optional<LayoutIssue> check_torch_native(const Training& training, const Layout& layout) {
  const TorchNative& tn = training.torch;
  const bool fsdp = training.framework == Framework::fsdp;
  // HSDP: the DP ranks are dp_shard shards times dp_replicate replicas (torchtitan
  // ParallelDims._validate: dp_replicate * dp_shard * cp * tp * pp == world_size).
  if (layout.dp_replicate != 1 || layout.dp_shard != 0) {
    const std::string key = layout.dp_shard != 0 ? "dp_shard" : "dp_replicate";
    if (!fsdp || training.zero_stage != 3) {
      return issue(key, "hsdp-needs-fsdp", key + " needs framework = \"fsdp\" with zero_stage = 3");
    }
    if (layout.dp_replicate < 1 || layout.dp % layout.dp_replicate != 0) {
      return issue("dp_replicate", "dp-split",
                   "dp_replicate=" + str(layout.dp_replicate) + " must divide dp=" + str(layout.dp));
    }
    if (layout.dp_shard != 0 && static_cast<long long>(layout.dp_shard) * layout.dp_replicate != layout.dp) {
      return issue("dp_shard", "dp-split",
                   "dp_shard*dp_replicate = " + str(layout.dp_shard) + "*" + str(layout.dp_replicate) +
                       " = " + str(static_cast<long long>(layout.dp_shard) * layout.dp_replicate) +
                       " must equal dp = GPUs/(tp*cp*pp) = " + str(layout.dp));
    }
  }
  // reshard_after_forward is FSDP2's (fully_shard); ZeRO-1/2 keep whole parameters anyway.
  if (tn.reshard_after_forward != TorchNative::kReshardDefault) {
    if (!fsdp || training.zero_stage != 3) {
      return issue("reshard_after_forward", "reshard-needs-fsdp",
                   "reshard_after_forward needs framework = \"fsdp\" with zero_stage = 3 (got "
                   "framework = \"" + std::string(to_string(training.framework)) +
                       "\", zero_stage = " + str(training.zero_stage) + ")");
    }
    // `_get_post_forward_mesh_info`: an int must be a factor of the shard mesh size.
    const long long shard = static_cast<long long>(layout.shard_dp()) * layout.cp;
    if (tn.reshard_after_forward > 0 && shard % tn.reshard_after_forward != 0) {
      return issue("reshard_after_forward", "reshard-divides",
                   "reshard_after_forward=" + str(tn.reshard_after_forward) +
                       " must divide the FSDP shard group of dp_shard*cp = " + str(shard) + " ranks");
    }
  }
  if (tn.compile && !fsdp) {
    return issue("compile", "compile-needs-fsdp", "compile needs framework = \"fsdp\" (torch.compile)");
  }
  // torchtitan refuses async TP without compile ("Async TP requires --training.compile",
  // `torchtitan/models/llama3/parallelize_llama.py` at 820504e).
  if (tn.async_tp && (!fsdp || !tn.compile)) {
    return issue("async_tp", "async-tp-needs-compile",
                 "async_tp needs framework = \"fsdp\" and compile = true");
  }
  if (tn.async_tp && !layout.sp) {
    return issue("async_tp", "async-tp-needs-sp", "async_tp needs tp > 1 with sp = true");
  }
  return std::nullopt;
}

}  // namespace tetra::parallel
