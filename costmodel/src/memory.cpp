// Per-stage memory model. [derived] marks arithmetic on a cited formula or code path,
// [assumed] a modelling choice without a published source. Source keys:
//   F24      Fujii, Watanabe, Yokota, "Accelerating Large Language Model Training with 4D
//            Parallelism and Memory Consumption Estimator", arXiv 2411.06465 (2024).
//   F24-code its estimator: okoge-kaz/Megatron-LM tools/memory_estimate/
//            memory_consumption_estimator.py (branch v0.8.0-abci, 85347a6b),
//            megatron/training/theoretical_memory_usage.py (branch v0.9.0-abci) and the test
//            vectors of tools/memory_estimate/tests_memory_consumption_estimator.py, which the
//            tests reproduce in tests/costmodel/fujii_reference.cpp.
//   F24-web  the same author's later browser tool and its notes, okoge-kaz/okoge-kaz.github.io
//            static/js/memory-estimator.js (a simplification, not the paper's model).
//   K22      Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
//            Models", arXiv 2205.05198, Table 2.
//   N21      Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters
//            Using Megatron-LM", arXiv 2104.04473.
//   ZeRO     Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
//            Parameter Models", arXiv 1910.02054.
//   MLM      NVIDIA/Megatron-LM: megatron/core/pipeline_parallel/schedules.py,
//            megatron/core/tensor_parallel/{layers,cross_entropy}.py, megatron/core/distributed/,
//            docs/user-guide/features/dist_optimizer.md, README "activation recomputation".
//   TE       NVIDIA/TransformerEngine: transformer_engine/pytorch/attention/
//            dot_product_attention/context_parallel.py (AttnFuncWithCPAndKVP2P).
//   ZB       Qi et al., "Zero Bubble Pipeline Parallelism", arXiv 2401.10241, §2.1 and Table 2.
//   H23      Hagemann et al., "Efficient Parallelization Layouts for Large-Scale Distributed
//            Model Training", arXiv 2311.05610 (the fused RMSNorm kernel lets smaller TP/PP
//            layouts fit); Aleph-Alpha/scaling is the public successor of its trainer.
//   NCCL (NVIDIA/nccl), PT (pytorch/pytorch). Constants are listed in costmodel/README.md.
#include "tetra/costmodel/memory.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "fsdp2_memory.hpp"
#include "memory_terms.hpp"
#include "moe_memory.hpp"
#include "tetra/parallel/execution.hpp"
#include "tetra/model/moe.hpp"
#include "tetra/ops/ops.hpp"
#include "tetra/parallel/params.hpp"

namespace tetra::costmodel {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// ---- Runtime and communication constants (CUDA, NCCL, PT). The same for every source. ----

/// CUDA context of one process (driver state, module images of PyTorch/cuBLAS/NCCL kernels)
/// [assumed: F24-web's notes give 300-500 MB; the upper end is taken because 2023-era
/// CUDA 11 loads all kernel images eagerly].
constexpr double kCudaContextBytes = 0.5 * kGiB;

/// NCCL buffers of one connection to one peer on one channel, one per protocol
/// (NVIDIA/nccl src/include/device.h and src/init.cc defaults):
///   SIMPLE: NCCL_BUFFSIZE ([training] nccl_buffsize, 4 MiB by default,
///           docs/userguide/source/env.rst);
///   LL128:  NCCL_LL128_ELEMS_PER_THREAD (120) x NCCL_LL128_MAX_NTHREADS (640) x NCCL_STEPS (8)
///           x 8 B = 4,915,200 B;
///   LL:     NCCL_LL_LINES_PER_THREAD (8) x NCCL_LL_MAX_NTHREADS (512) x NCCL_STEPS (8)
///           x 16 B (one ncclLLFifoLine) = 524,288 B.
constexpr double kNcclLowLatencyBytes = 120.0 * 640 * 8 * 8 + 8.0 * 512 * 8 * 16;
/// Channels NCCL opens per communicator on an NVSwitch node (16 coll channels, typical of
/// NCCL's topology search on DGX A100/H100) [assumed], and connections per channel: the ring
/// predecessor and one tree peer [derived from NCCL's ring + tree connection setup].
constexpr double kNcclChannels = 16;
constexpr double kNcclConnectionsPerChannel = 2;
/// At the default buffer: 16 x 2 x 9.1875 MiB = 294 MiB per communicator (F24-web assumes
/// ~0.5 GB).
double nccl_communicator_bytes(const parallel::Training& training) {
  return kNcclChannels * kNcclConnectionsPerChannel * (training.nccl_buffsize + kNcclLowLatencyBytes);
}

/// cuBLAS workspace PyTorch allocates per (handle, stream) through its caching allocator
/// (PT aten/src/ATen/cuda/CublasHandlePool.cpp, default CUBLAS_WORKSPACE_CONFIG):
/// Hopper ":4096:8" = 32 MiB; earlier GPUs ":4096:2:16:8" = 2 x 4 MiB + 8 x 16 KiB.
double cublas_workspace_bytes(int compute_capability) noexcept {
  return compute_capability >= 90 ? 32.0 * kMiB : 2.0 * 4.0 * kMiB + 8.0 * 16.0 * 1024.0;
}

}  // namespace

using namespace memory_terms;

namespace detail {

bool saves_fp8_inputs(const parallel::Training& training) noexcept {
  const parallel::MemoryHabits x = parallel::memory_habits(training);
  return x.fp8_linears && x.saves_quantized_inputs;
}

}  // namespace detail

double StageMemory::static_bytes() const noexcept {
  return params_bytes + fp8_cache_bytes + grads_bytes + optimizer_bytes + buffers_bytes +
         fragmentation_fraction * transient_bytes;
}

double reserved_with_activations(const StageMemory& stage, double activation_bytes) {
  const double reserved = stage.static_bytes() + (1.0 + stage.fragmentation_fraction) * activation_bytes;
  const double allocated = reserved - stage.fragmentation_fraction * (stage.transient_bytes + activation_bytes);
  return std::min(reserved, std::max(stage.reserved_limit_bytes, allocated));
}

double activation_bytes_per_layer(const model::Model& model, const parallel::Training& training,
                                  const parallel::Layout& layout) {
  switch (layout.recompute) {
    case parallel::Recompute::none:
      return layer_saved_full(model, training, layout, false);
    case parallel::Recompute::selective: {
      // MLM selective recompute: core attention is recomputed, only the s^2 terms go (K22);
      // recompute_modules drop what their parts keep (recompute_modules.hpp).
      const bool core_attn = parallel::recomputes(layout, parallel::RecomputeModule::core_attn);
      return layer_saved_full(model, training, layout, core_attn) - dense_module_savings(model, training, layout);
    }
    case parallel::Recompute::full: {
      // Only the layer input is stored: 2 s' b h, the SP shard with SP (K22 Table 2).
      const Geometry g = geometry(model, training, layout);
      return 2.0 * g.s * g.b * g.h / g.nd;
    }
    case parallel::Recompute::selective_op: {
      // torchtitan's per-op policy (`torchtitan/parallelisms/parallelize_llama.py`
      // `_save_list`, ops::layer_ops): the block input (the SP shard), the outputs of the
      // saved matmuls wq (2 h), wv (2 h k/a) and w1 (2 f) inside the TP region, w2's output
      // (2 h, a partial sum of full width under TP), SDPA's output (2 h) and fp32
      // log-sum-exp, and under SP the reduce-scatter shards after wo and w2 (2 h / t each).
      // Everything else is rebuilt one block at a time in backward.
      const Geometry g = geometry(model, training, layout);
      const double sbh = g.s * g.b * g.h;
      double bytes = 2.0 * sbh / g.nd;                                   // block input
      bytes += (2.0 + 2.0 * g.kv + 2.0) * sbh / g.t;                     // wq, wv, SDPA out
      bytes += 2.0 * g.s * g.b * g.f / g.t;                              // w1
      if (parallel::memory_habits(training).saves_unread_outputs) bytes += 2.0 * sbh;  // w2 out
      if (g.sp) bytes += 2.0 * 2.0 * sbh / g.t;                          // wo, w2 RS shards
      if (!unfused_attention(training.attention)) bytes += 4.0 * g.a * g.s * g.b / g.t;
      return bytes;
    }
    case parallel::Recompute::selective_layer: {
      // The checkpointed blocks keep their input, the others everything (parallel::block_kinds).
      double bytes = 0.0;
      for (const parallel::BlockKind& kind : parallel::block_kinds(layout)) {
        parallel::Layout one = layout;
        one.recompute = kind.recompute;
        bytes += kind.share * activation_bytes_per_layer(model, training, one);
      }
      return bytes;
    }
  }
  return 0.0;
}

double inflight_micro_batches(const parallel::Layout& layout, int micro_batches, int stage) {
  const double m = std::max(micro_batches, 1);
  const int p = std::max(layout.pp, 1);
  const int r = std::clamp(stage, 0, p - 1);
  switch (layout.schedule) {
    case parallel::Schedule::gpipe:
    case parallel::Schedule::layered:
      // GPipe: every micro-batch's forward before any backward (N21 section 2.2); layered
      // gradient accumulation keeps all m of a chunk (Lamy-Poirier, arXiv 2106.02679: every
      // micro-batch passes a layer before any passes the next).
      return m;
    case parallel::Schedule::one_f_one_b:
    case parallel::Schedule::zb_h1:
      // MLM schedules.py: warm-up p - r - 1 (capped at m), peak = warm-up + 1; ZB-H1 equals
      // 1F1B (ZB Table 2).
      return std::min(static_cast<double>(p - r), m);
    case parallel::Schedule::interleaved: {
      // MLM get_pp_rank_microbatches: min(m v, 2 (p - r - 1) + (v - 1) G + 1) chunk
      // micro-batches with G = p, each L/(p v) layers, i.e. / v stage micro-batches [derived].
      const double v = std::max(layout.vp, 1);
      const double chunks = std::min(m * v, 2.0 * (p - r - 1) + (v - 1.0) * p + 1.0);
      return chunks / v;
    }
  }
  return std::min(static_cast<double>(p - r), m);
}

namespace {

// ---- Per-stage terms of estimate_memory, in the order they add up. ----

/// What every pipeline rank of one estimate shares: the inputs, their shapes, and the per-layer
/// and per-GPU terms that do not depend on the stage.
struct LayoutTerms {
  const model::Model& model;
  const parallel::Training& training;
  const parallel::Layout& layout;
  parallel::MemoryHabits hab;
  Geometry g;
  StateBytes sb;
  int p = 1;                      ///< pipeline ranks
  int m = 1;                      ///< micro-batches of the step
  double shard = 1;               ///< ZeRO / distributed-optimizer group: DP x CP (MLM)
  double edp = 1;                 ///< expert data-parallel group (Layout::edp())
  double vocab = 0;               ///< padded vocabulary
  double linear_per_layer = 0;    ///< one layer's linear weights on this rank (all but the norms)
  double q8 = 1;                  ///< bytes per element of a quantised FP8 / FP4 copy
  double fp8_copies = 2;          ///< FP8 copies of a quantised weight on this GPU
  double a_layer = 0;             ///< saved bytes of one layer and micro-batch
  double transient_layer = 0;     ///< working set of one layer's backward
  detail::MoeLayerMemory moe_layer;
  double attention_delta = 0;     ///< MLA / explicit head_dim / Q-K norm saved bytes per layer
  double communication_bytes = 0;
  double runtime_bytes = 0;
  double fragmentation = 0;       ///< allocator share of the per-micro-batch blocks it keeps
  double cache_share = 0;         ///< share it has cached, released or not (MemoryOptions)
  double capacity_bytes = 0;
};

/// Working set of one dense layer in backward [derived]: its transients, plus the rebuilt layer
/// under recomputation.
double layer_working_bytes(const model::Model& model, const parallel::Training& training,
                           const parallel::Layout& layout) {
  double bytes = layer_transient(model, training, layout);
  if (layout.recompute == parallel::Recompute::full ||
      layout.recompute == parallel::Recompute::selective_op ||
      layout.recompute == parallel::Recompute::selective_layer) {
    // The recomputed layer is rebuilt one at a time during backward [derived].
    bytes += layer_saved_full(model, training, layout, false);
  }
  return bytes;
}

/// Communicators with more than one rank (F24-web counts one per group > 1): TP, CP, PP, DP;
/// the DP x CP group the gradients are reduced over when c > 1; the embedding group of tied
/// embeddings; Megatron's gradient-norm group.
int communicator_count(const model::Model& model, const parallel::Training& training,
                       const parallel::Layout& layout) {
  const int p = std::max(layout.pp, 1);
  int communicators = 0;
  communicators += layout.tp > 1 ? 1 : 0;
  communicators += layout.cp > 1 ? 1 : 0;
  // Transformer Engine's CP ring batches its send and receive only at cp = 2
  // (AttnFuncWithCPAndKVP2P: batch_p2p_comm = NVTE_BATCH_MHA_P2P_COMM or cp_size == 2); above,
  // each step is a plain isend to the next rank and irecv from the previous one, and c10d runs
  // an unbatched point-to-point on a two-rank communicator of its own per pair
  // (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp pointToPoint: "For single P2P, preserve
  // the old two-rank behavior", key getKeySendRecv(rank, peer)): two more, with their buffers.
  // PyTorch's own CP all-gathers instead, as do TE's all_gather and a2a (collectives of the CP
  // group's communicator).
  if (layout.cp_ring() > 2 &&
      (layout.cp_comm == parallel::CpComm::p2p || layout.cp_comm == parallel::CpComm::a2a_p2p) &&
      !parallel::execution_traits(training, layout).torch_cp) {
    communicators += 2;
  }
  // Hierarchical CP runs on the sub-groups Megatron-Core creates beside the CP group (the CP
  // group itself still reduces the loss): the all-to-all group, and the ring's group, whose
  // communicator carries the ring's batched sends where the ring has two ranks.
  if (layout.cp > 1 && layout.cp_comm == parallel::CpComm::a2a_p2p) {
    communicators += layout.cp_ring() > 2 ? 1 : 2;
  }
  communicators += p > 1 ? 1 : 0;
  communicators += layout.dp > 1 ? 1 : 0;
  // The gradients are reduced over DP x CP (Megatron-Core `get_data_parallel_group(
  // with_context_parallel=True)`; FSDP2 over torchtitan's dp_shard_cp mesh), a group of its
  // own even where dp = 1 and it holds the CP ranks alone.
  communicators += layout.cp > 1 ? 1 : 0;
  communicators += (model.tied_embeddings && p > 1) ? 1 : 0;
  // MoE: the EP group of the token all-to-all and the expert data-parallel group the expert
  // gradients are reduced over (Megatron-Core parallel_state `_EXPERT_MODEL_PARALLEL_GROUP`,
  // `_EXPERT_DATA_PARALLEL_GROUP`).
  if (model.moe.has_value()) {
    communicators += layout.ep > 1 ? 1 : 0;
    communicators += std::max(layout.edp(), 1) > 1 ? 1 : 0;
  }
  // Megatron-Core reduces the gradient norm of every step that clips (clip_grad = 1.0 by
  // default; clip_grads.py get_grad_norm_fp32) over its grad-stats group, a communicator of its
  // own: the whole world under the distributed optimizer, the model-parallel ranks (tp x pp)
  // otherwise (optimizer.py / distrib_optimizer.py get_grad_stats_parallel_group, core_r0.9.0:
  // get_model_parallel_group).
  if (parallel::memory_habits(training).megatron) {
    const long long stats =
        training.zero_stage >= 1 ? layout.world() : static_cast<long long>(std::max(layout.tp, 1)) * p;
    communicators += stats > 1 ? 1 : 0;
  }
  return communicators;
}

LayoutTerms layout_terms(const model::Model& model, const hw::Cluster& cluster,
                         const parallel::Training& training, const parallel::Layout& layout,
                         const MemoryOptions& options) {
  const Geometry g = geometry(model, training, layout);
  const double shard = static_cast<double>(std::max(layout.dp, 1)) * std::max(layout.cp, 1);
  const double layer_params = static_cast<double>(parallel::params_per_layer(model));
  const double fragmentation = fragmentation_share(training, layout, options);
  return LayoutTerms{
      .model = model,
      .training = training,
      .layout = layout,
      .hab = parallel::memory_habits(training),
      .g = g,
      .sb = state_bytes(training),
      .p = std::max(layout.pp, 1),
      .m = micro_batch_count(layout, training),
      .shard = shard,
      .edp = static_cast<double>(std::max(layout.edp(), 1)),
      .vocab = static_cast<double>(parallel::padded_vocab(model, layout.tp)),
      .linear_per_layer = std::max(0.0, layer_params - 2.0 * g.h) / g.t,
      .q8 = parallel::quantized_bytes_per_element(training.fp8.recipe),
      .fp8_copies = parallel::fp8_on(training.fp8, cluster.gpu).copies(),
      .a_layer = activation_bytes_per_layer(model, training, layout) +
                 te_flash_output_copy(model, cluster.gpu, training, layout),
      .transient_layer = layer_working_bytes(model, training, layout),
      // MoE / MLA per-layer terms (moe_memory.cpp).
      .moe_layer = detail::moe_layer_memory(model, training, layout),
      .attention_delta = detail::attention_saved_delta(model, training, layout),
      .communication_bytes = communicator_count(model, training, layout) * nccl_communicator_bytes(training),
      .runtime_bytes = kCudaContextBytes + cublas_workspace_bytes(cluster.gpu.compute_capability),
      .fragmentation = fragmentation,
      .cache_share = std::max(options.cached_share, fragmentation),
      .capacity_bytes = cluster.gpu.memory_bytes,
  };
}

/// MTP modules on this stage whose layer has experts (as the model's last layer).
int mtp_moe_layers(const LayoutTerms& terms, const parallel::StageParams& st) {
  const model::Model& model = terms.model;
  return model.moe.has_value() && model::is_moe_layer(model, model.layers - 1) ? st.mtp_layers : 0;
}

/// Weights, gradients and optimizer states of one rank (F24-code, ZeRO), and what FSDP2 adds to the
/// transients with them.
struct ModelStates {
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  double expert = 0;                     ///< routed experts' share of the three
  double layer_transient = 0;            ///< FSDP2 all-gather / reduce-scatter buffers of a block
  std::optional<double> step_temporary;  ///< FSDP2's optimizer temporary
};

// Routed-expert weights on this GPU: their optimizer states (and gradients / weights under
// ZeRO-2/3) are sharded over the expert data-parallel group edp = tp*cp*dp/(ep*etp), the rest
// over dp x cp (Megatron-Core distributed optimizer: one buffer per group,
// `param_and_grad_buffer` with the expert-data-parallel group for expert parameters).
// ZeRO stages 2/3 are idealised over N = d c (ZeRO).

/// ZeRO 0, 1 and 2: the weights replicated, the optimizer states (and under ZeRO-2 the
/// gradients) sharded.
ModelStates zero_states(const LayoutTerms& terms, int zero_stage, double phi, double phi_e) {
  const StateBytes& sb = terms.sb;
  const double phi_d = phi - phi_e;
  ModelStates s;
  s.params = phi * sb.w;
  switch (zero_stage) {
    case 0:
      s.grads = phi * sb.g;
      s.optimizer = phi * sb.o;
      s.expert = phi_e * (sb.w + sb.g + sb.o);
      break;
    case 1:
      s.grads = phi * sb.g;
      s.optimizer = phi_d * sb.o / terms.shard + phi_e * sb.o / terms.edp;
      s.expert = phi_e * (sb.w + sb.g + sb.o / terms.edp);
      break;
    default:
      s.grads = phi_d * sb.g / terms.shard + phi_e * sb.g / terms.edp +
                unsharded_gradient_share(terms.layout, terms.m) * phi * sb.g;
      s.optimizer = phi_d * sb.o / terms.shard + phi_e * sb.o / terms.edp;
      s.expert = phi_e * (sb.w + (sb.g + sb.o) / terms.edp);
      break;
  }
  return s;
}

/// ZeRO-3 (DeepSpeed): everything sharded, plus the gathered weights of the layer being
/// computed and the one prefetched: 2 x P_layer / t in the training dtype [assumed].
ModelStates zero3_states(const LayoutTerms& terms, double phi, double phi_e) {
  const StateBytes& sb = terms.sb;
  const double phi_d = phi - phi_e;
  const double layer_params = static_cast<double>(parallel::params_per_layer(terms.model));
  const double gathered = 2.0 * layer_params / terms.g.t * sb.w;
  ModelStates s;
  s.params = phi_d * sb.w / terms.shard + phi_e * sb.w / terms.edp + gathered;
  s.grads = phi_d * sb.g / terms.shard + phi_e * sb.g / terms.edp;
  s.optimizer = phi_d * sb.o / terms.shard + phi_e * sb.o / terms.edp;
  s.expert = phi_e * (sb.w + sb.g + sb.o) / terms.edp;
  return s;
}

/// FSDP2 (fsdp2_memory.cpp).
ModelStates fsdp2_model_states(const LayoutTerms& terms, const parallel::StageParams& st) {
  const detail::Fsdp2States f = detail::fsdp2_states(terms.model, terms.training, terms.layout, st);
  ModelStates s;
  s.params = f.sharded_params + f.resident_unsharded;
  s.grads = f.sharded_grads + f.accumulated_grads;
  s.optimizer = f.optimizer;
  s.layer_transient = f.gather_transient + f.reduce_transient;
  s.step_temporary = f.optimizer_temporary;
  return s;
}

ModelStates model_states(const LayoutTerms& terms, const parallel::StageParams& st) {
  const double phi = static_cast<double>(st.params);
  const double phi_e = static_cast<double>(st.expert_params);
  const int zero_stage = std::clamp(terms.training.zero_stage, 0, 3);
  if (zero_stage < 3) return zero_states(terms, zero_stage, phi, phi_e);
  if (terms.hab.fsdp) return fsdp2_model_states(terms, st);
  return zero3_states(terms, phi, phi_e);
}

/// Linear weights of the stage on this rank: the dense layers', and for MoE layers (and MTP
/// modules) their own linears, the experts' share included.
double stage_linear_params(const LayoutTerms& terms, const parallel::StageParams& st) {
  if (!terms.model.moe.has_value()) return terms.linear_per_layer * st.layers;
  const int mtp_moe = mtp_moe_layers(terms, st);
  const double moe_linear = detail::moe_layer_linear_params(terms.model, terms.layout);
  const double dense = terms.linear_per_layer;
  return dense * (st.layers - st.moe_layers) + moe_linear * (st.moe_layers + mtp_moe) +
         dense * (st.mtp_layers - mtp_moe);
}

/// FP8 weights (TE caches the quantised weights of every linear from the first micro-batch to
/// the last, `is_first_microbatch` in linear.py): the row-wise copy for the forward GEMM and the
/// transposed / column-wise copy for dgrad, q + q per linear weight, q alone where one copy
/// serves both (Fp8Training::copies). Under `fp8_param_gather` the parameter itself is the
/// row-wise FP8 copy: the bf16 weights of the linears go (2 -> q per parameter) and only the
/// second copy is extra. torchao's Float8 linears cast the weights every forward and keep no
/// cache.
void add_fp8_weight_copies(const LayoutTerms& terms, const parallel::StageParams& st, StageMemory& s) {
  const parallel::Training& training = terms.training;
  if (!terms.hab.fp8_linears || terms.hab.fsdp) return;
  const double linear = stage_linear_params(terms, st);
  const double q8 = terms.q8;
  const double copies = terms.fp8_copies;
  const double phi_e = static_cast<double>(st.expert_params);
  if (terms.model.moe.has_value()) s.expert_states_bytes += copies * q8 * phi_e;
  if (training.zero_stage >= 3) {
    // Sharded weights (Megatron-FSDP, `optim_grads_params`): a linear's FP8 copies exist only
    // while its layer is gathered, the layer computed and the one prefetched. Under
    // fp8_param_gather the shards are FP8 themselves and are gathered as FP8 (the bf16 linears
    // go, from the shard and from the gathered buffer), and backward adds the column-wise copy;
    // otherwise both copies are quantised from the gathered bf16 weights.
    constexpr double kGatheredLayers = 2.0;
    const double per_layer = terms.linear_per_layer;
    if (training.fp8.param_gather) {
      s.params_bytes -= (linear / terms.shard + kGatheredLayers * per_layer) * (terms.sb.w - q8);
      s.fp8_cache_bytes = kGatheredLayers * per_layer * (copies - 1.0) * q8;
    } else {
      s.fp8_cache_bytes = kGatheredLayers * per_layer * copies * q8;
    }
  } else if (training.fp8.param_gather) {
    s.params_bytes -= linear * (terms.sb.w - q8);
    s.fp8_cache_bytes = linear * (copies - 1.0) * q8;
  } else {
    s.fp8_cache_bytes = copies * linear * q8;
  }
}

/// In-flight micro-batches (N21 §2.2, MLM schedules.py, ZB Table 2), or the simulator's count.
double stage_inflight(const LayoutTerms& terms, const MemoryOptions& options, int stage) {
  const std::size_t idx = static_cast<std::size_t>(stage);
  return idx < options.inflight.size() ? options.inflight[idx]
                                       : inflight_micro_batches(terms.layout, terms.m, stage);
}

/// Saved bytes of the stage's layers for one micro-batch: the dense and attention part, and
/// the routed experts' part.
struct LayerSaved {
  double layers = 0;
  double experts = 0;
};
LayerSaved layer_saved_bytes(const LayoutTerms& terms, const parallel::StageParams& st) {
  // MoE layers save the router's, the shared and the routed experts' tensors instead of the
  // dense MLP's; MLA, a wider explicit head_dim or Q and K norms change the attention tensors;
  // MTP modules on the last stage add one layer each (moe_memory.cpp). Each term is zero on a
  // model without it.
  const int mtp = st.mtp_layers;
  const double moe_count = st.moe_layers + mtp_moe_layers(terms, st);
  const detail::MoeLayerMemory& moe = terms.moe_layer;
  return {(st.layers + mtp) * (terms.a_layer + terms.attention_delta) + moe_count * moe.saved_delta,
          moe_count * moe.expert_saved};
}

/// Saved activations of the stage's layers for s.inflight micro-batches.
void add_layer_activations(const LayoutTerms& terms, const parallel::StageParams& st, StageMemory& s) {
  const LayerSaved saved = layer_saved_bytes(terms, st);
  s.layer_activations_bytes = s.inflight * saved.layers;
  s.expert_activations_bytes = s.inflight * saved.experts;
  if (terms.layout.offload_layers > 0) {
    const double share = resident_layer_share(terms.layout, st.layers);
    s.layer_activations_bytes *= share;
    s.expert_activations_bytes *= share;
  }
  // Stage output kept for backward by pipeline engines that do not free it (MLM frees it:
  // `deallocate_output_tensor` in schedules.py).
  if (!terms.hab.frees_stage_output && st.stage < terms.p - 1)
    s.layer_activations_bytes += s.inflight * 2.0 * terms.g.s * terms.g.b * terms.g.h / terms.g.nd;
}

/// Embedding input (MLM theoretical_memory_usage.py: 8 bytes per token): int64 token ids (and
/// labels on the last stage) of the in-flight micro-batches.
double embedding_input_bytes(const LayoutTerms& terms, double inflight) {
  return inflight * 8.0 * terms.g.s * terms.g.b;
}

/// Logits of the last stage (MLM cross_entropy.py): what is held until backward, and the loss
/// backward's working set on top.
struct LogitsTerms {
  double held = 0;
  double transient = 0;
};

LogitsTerms logits_terms(const LayoutTerms& terms) {
  const Geometry& g = terms.g;
  const parallel::MemoryHabits& hab = terms.hab;
  const bool all_live = terms.layout.schedule == parallel::Schedule::gpipe ||
                        terms.layout.schedule == parallel::Schedule::layered;
  const double live = all_live ? static_cast<double>(terms.m) : 1.0;
  LogitsTerms l;
  if (ops::loss_on_vocab_shards(terms.training, terms.layout.tp)) {
    // MLM cross_entropy.py: fp32 softmax of the local shard held until backward (the bf16
    // logits under a compiled or fused loss), plus the LM-head input shard; bf16 logits /
    // logit gradient transient.
    const bool bf16_only = hab.compiled_loss || hab.fused_loss;
    const double saved = bf16_only ? 2.0 : 4.0;
    l.held = live * (saved * g.s * g.b * terms.vocab / g.t + 2.0 * g.s * g.b * g.h / g.nd);
    // PyTorch's loss_parallel backward builds `(grad_input + exp(x)) * grad_output` in fp32
    // beside the saved log-softmax x and the zero-filled NLL gradient: three more fp32
    // tensors of the shard's size at its peak (the exp and the sum, then the sum and the
    // product), 12 bytes per element on top of the 4 held.
    const bool out_of_place = !hab.vocab_parallel_loss_in_place && !bf16_only;
    l.transient = (out_of_place ? 12.0 : 2.0) * g.s * g.b * terms.vocab / g.t;
  } else {
    // Gathered logits: bf16 full-vocabulary logits (2) and the fp32 log-softmax saved by
    // cross_entropy (4) held; in backward the fp32 NLL gradient (4) and the log-softmax
    // gradient (4) on top: 14 bytes per token and vocabulary entry at the peak, on every TP
    // rank [derived from Aleph-Alpha/scaling losses/cross_entropy.py + PT autograd]. A fused
    // loss kernel saves the bf16 logits and per-row log-sum-exp only and writes the bf16 logit
    // gradient in backward (flash-attn `losses/cross_entropy.py`, `inplace_backward=False`):
    // 2 + 2.
    const bool bf16_only = hab.compiled_loss || hab.fused_loss;
    const double held = bf16_only ? 2.0 : hab.frees_logits_before_backward ? 4.0 : 6.0;
    l.held = live * held * g.s * g.b * terms.vocab;
    l.transient = (bf16_only ? 2.0 : 8.0) * g.s * g.b * terms.vocab;
  }
  return l;
}

/// Activations of the stage: its layers, the embedding input and the logits. Returns the
/// loss backward's working set.
double add_activations(const LayoutTerms& terms, const parallel::StageParams& st, StageMemory& s) {
  add_layer_activations(terms, st, s);
  if (st.has_embedding) s.embedding_bytes = embedding_input_bytes(terms, s.inflight);
  LogitsTerms logits;
  if (st.has_head) logits = logits_terms(terms);
  s.logits_bytes = logits.held;
  // MTP modules compute their own logits and loss on the last stage (Megatron-Core
  // `multi_token_prediction.py`), each holding what the main head holds.
  if (st.mtp_layers > 0) s.logits_bytes *= 1.0 + st.mtp_layers;
  s.activations_bytes = s.layer_activations_bytes + s.embedding_bytes + s.logits_bytes;
  return logits.transient;
}

/// Working set of one layer while it runs: the dense layer's, FSDP2's gathered and reduced
/// blocks, and a MoE layer's dispatch buffers (s.dispatch_bytes) and expert gradients; under
/// recompute the rebuilt layer also holds its MoE tensors.
double layer_working_set(const LayoutTerms& terms, const parallel::StageParams& st,
                         const ModelStates& states, StageMemory& s) {
  double working = terms.transient_layer + states.layer_transient;
  if (st.moe_layers + mtp_moe_layers(terms, st) == 0) return working;
  s.dispatch_bytes = terms.moe_layer.transient;
  const bool rebuilt = terms.layout.recompute == parallel::Recompute::full ||
                       terms.layout.recompute == parallel::Recompute::selective_layer;
  double rebuilt_moe = 0.0;
  if (rebuilt) {
    parallel::Layout none = terms.layout;
    none.recompute = parallel::Recompute::none;
    const double saved = detail::moe_layer_memory(terms.model, terms.training, none).saved_delta;
    rebuilt_moe = std::max(saved, 0.0);
  }
  working += terms.moe_layer.transient + rebuilt_moe;
  return working;
}

/// Optimizer phase (activations freed): fp32 gradient partition of DeepSpeed-style ZeRO and
/// the foreach-Adam temporary of the shard; FSDP2's own temporary.
double optimizer_step_extra(const LayoutTerms& terms, const parallel::StageParams& st,
                            const ModelStates& states) {
  if (states.step_temporary) return *states.step_temporary;
  if (terms.hab.fused_adam) return 0.0;
  const double phi = static_cast<double>(st.params);
  const double opt_shard = terms.training.zero_stage >= 1 ? terms.shard : 1.0;
  double extra = 4.0 * phi / opt_shard;  // fp32 grads of the owned shard
  if (terms.training.zero_stage >= 1) extra += 4.0 * phi / opt_shard;  // Adam temporary
  return extra;
}

/// Transients (the larger of the activation phase's and the optimizer phase's), communication
/// and runtime buffers, and the allocated total.
void add_buffers(const LayoutTerms& terms, double activation_phase_transient, double step_extra,
                 StageMemory& s) {
  const double comm_bytes = terms.communication_bytes;
  const double runtime_bytes = terms.runtime_bytes;
  s.optimizer_step_bytes = s.params_bytes + s.fp8_cache_bytes + s.grads_bytes +
                           s.optimizer_bytes + step_extra + comm_bytes + runtime_bytes;
  double transient = activation_phase_transient;
  const double act_phase = s.activations_bytes + transient;
  if (step_extra > act_phase) {
    transient = step_extra - s.activations_bytes;  // the optimizer phase sets the peak
  }
  s.transient_bytes = transient;
  s.communication_bytes = comm_bytes;
  s.runtime_bytes = runtime_bytes;
  s.outside_allocator_bytes = kCudaContextBytes + comm_bytes;
  s.buffers_bytes = transient + comm_bytes + runtime_bytes;
  s.allocated_bytes = s.params_bytes + s.fp8_cache_bytes + s.grads_bytes + s.optimizer_bytes +
                      s.activations_bytes + s.buffers_bytes;
}

/// Caching allocator (PT c10/cuda/CUDACachingAllocator.cpp; the share is discussed in
/// docs/memory.md): fragmentation of the blocks allocated and freed every micro-batch
/// (activations and transients).
void add_fragmentation(const LayoutTerms& terms, StageMemory& s) {
  s.fragmentation_bytes = terms.fragmentation * (s.activations_bytes + s.transient_bytes);
  s.reserved_bytes = s.allocated_bytes + s.fragmentation_bytes;
  if (terms.training.expandable_segments) {
    // At the device's limit an allocator with expandable segments unmaps every free page and
    // retries (c10/cuda/CUDACachingAllocator.cpp `release_blocks` -> `unmap_block`); the
    // default allocator can free only segments with no live block. Cached holes then cost
    // cache, not capacity: reserved stops at the device and what must fit is allocated.
    const double capacity = terms.capacity_bytes;
    s.reserved_limit_bytes = capacity;
    s.reserved_bytes = std::min(s.reserved_bytes, std::max(s.allocated_bytes, capacity));
    s.fragmentation_bytes = s.reserved_bytes - s.allocated_bytes;
  }
  // What the allocator reports: its cache of the same blocks, released ones included, never
  // above the device once what it must hold fits (PyTorch frees cached segments and retries).
  const double cached = s.allocated_bytes + terms.cache_share * (s.activations_bytes + s.transient_bytes);
  // cached >= reserved_bytes, as cache_share >= fragmentation.
  s.torch_reserved_bytes = std::min(cached, std::max(s.reserved_bytes, terms.capacity_bytes));
}

/// One pipeline rank: the terms above, in order.
StageMemory stage_memory(const LayoutTerms& terms, const parallel::StageParams& st, double inflight) {
  StageMemory s;
  s.stage = st.stage;
  s.layers = st.layers;
  s.moe_layers = st.moe_layers;
  s.fragmentation_fraction = terms.fragmentation;
  const ModelStates states = model_states(terms, st);
  s.params_bytes = states.params;
  s.grads_bytes = states.grads;
  s.optimizer_bytes = states.optimizer;
  s.expert_states_bytes = states.expert;
  add_fp8_weight_copies(terms, st, s);
  s.inflight = inflight;
  const double logits_transient = add_activations(terms, st, s);
  // Transients of the activation phase: one layer's backward or the loss backward.
  const double transient = std::max(layer_working_set(terms, st, states, s), logits_transient);
  add_buffers(terms, transient, optimizer_step_extra(terms, st, states), s);
  add_fragmentation(terms, s);
  return s;
}

/// Peak stage and headroom. Stages that all reach the device under expandable segments: the
/// fullest allocated one.
void summarize(const parallel::Training& training, MemoryReport& report) {
  double peak = -1.0;
  double peak_allocated = -1.0;
  for (const StageMemory& s : report.stages) {
    const bool fuller_at_peak = s.reserved_bytes == peak && s.allocated_bytes > peak_allocated;
    if (s.reserved_bytes > peak || fuller_at_peak) {
      peak = s.reserved_bytes;
      peak_allocated = s.allocated_bytes;
      report.peak_stage = s.stage;
    }
  }
  report.peak_bytes = std::max(peak, 0.0);
  report.headroom_bytes = report.capacity_bytes;
  for (const StageMemory& s : report.stages) {
    const double held = training.expandable_segments ? s.allocated_bytes : s.reserved_bytes;
    report.headroom_bytes = std::min(report.headroom_bytes, report.capacity_bytes - held);
  }
  report.fits = report.peak_bytes <= report.capacity_bytes;
}

}  // namespace

MemoryReport estimate_memory(const model::Model& model, const hw::Cluster& cluster,
                             const parallel::Training& training, const parallel::Layout& layout,
                             const MemoryOptions& options) {
  MemoryReport report;
  report.capacity_bytes = cluster.gpu.memory_bytes;
  report.usable_bytes = cluster.gpu.memory_bytes * options.memory_fraction;
  const LayoutTerms terms = layout_terms(model, cluster, training, layout, options);
  for (const parallel::StageParams& st : parallel::stage_params(model, layout, training.seq_len))
    report.stages.push_back(stage_memory(terms, st, stage_inflight(terms, options, st.stage)));
  summarize(training, report);
  return report;
}

double offloaded_bytes_per_layer(const model::Model& model, const hw::Cluster& cluster,
                                 const parallel::Training& training, const parallel::Layout& layout) {
  const LayoutTerms terms = layout_terms(model, cluster, training, layout, MemoryOptions{});
  const parallel::StageParams st = parallel::stage_params(model, layout, training.seq_len).front();
  const int layers = st.layers + st.mtp_layers;
  if (layers <= 0) return 0.0;
  const LayerSaved saved = layer_saved_bytes(terms, st);
  return (saved.layers + saved.experts) / layers;
}

}  // namespace tetra::costmodel
