#pragma once
/// The op list of one training step on one rank (docs/architecture.md, "Data flow" step 2):
/// the GEMMs, attention calls, memory-bound kernels and collectives that a layout puts into one
/// transformer layer for one micro-batch, plus the embedding (first stage), LM head (last
/// stage), pipeline boundary, data-parallel gradient buckets and the optimizer step.
///
/// Shapes follow Megatron-LM's column/row-parallel linears
/// (`NVIDIA/Megatron-LM: megatron/core/tensor_parallel/layers.py`,
/// `LinearWithGradAccumulationAndAsyncCommunication`): with `T` tokens on the rank (after the
/// SP all-gather),
///   forward `Y = X W^T`  : M = T,   N = out, K = in
///   dgrad   `dX = dY W`  : M = T,   N = in,  K = out
///   wgrad   `dW = dY^T X`: M = out, N = in,  K = T
/// Collectives follow Megatron-LM and TransformerEngine: TP with/without SP
/// (`megatron/core/tensor_parallel/layers.py`, `mappings.py`), the CP ring of TransformerEngine's
/// AttnFuncWithCPAndKVP2P (`transformer_engine/pytorch/attention/dot_product_attention/
/// context_parallel.py`), the PP boundary (`megatron/core/pipeline_parallel/schedules.py`) and
/// the DP buckets (`megatron/core/distributed/param_and_grad_buffer.py`).
///
/// FLOP convention (`Op::flops`): Megatron's model FLOPs (`megatron/training/training.py`
/// `num_floating_point_operations`):
/// a GEMM counts 2·M·N·K, core attention forward 4·b·s_q·s_kv·heads·head_dim (halved when
/// causal), its backward twice the forward; memory-bound kernels and communication count 0;
/// ops re-run by activation recomputation carry `recompute = true` and are not model FLOPs.
/// Summed over all ranks and micro-batches of a step the non-recompute FLOPs equal
/// `megatron_step_flops` (flops.hpp), the numerator of tetrasim's MFU.
///
/// Overlap (what the framework overlaps; the simulator honours `Op::async`):
///   - an op with `async = true` is issued on its communication stream and the compute stream
///     runs on: it overlaps the next compute op in the list and must finish before the compute
///     op after that one. This models
///       * the SP all-gather that re-gathers a column-parallel input in backward (overlapped
///         with the dgrad GEMM, needed by the wgrad GEMM),
///       * the SP reduce-scatter (or the all-reduce without SP) of a column-parallel dgrad,
///         overlapped with the wgrad GEMM,
///       * the CP ring KV exchange: a `p2p` op with `count = c − 1` directly before the
///         attention-step op with the same count; repetition i of the exchange overlaps
///         repetition i of the attention step,
///       * ZeRO-3 parameter all-gathers (prefetched under the previous layer's compute).
///   - every other collective (TP all-gather / reduce-scatter / all-reduce on the forward path
///     and the row-parallel backward all-gather) blocks the compute stream.
///   - DP gradient buckets (`dp_gradient_ops`) are issued when the last micro-batch's backward
///     has produced them (Megatron's `overlap_grad_reduce`); parameter all-gathers after the
///     optimizer (`overlap_param_gather` overlaps them with the next step's forward).
///
/// Everything here is a pure function of value types; no strings are built per op
/// (`Op::name` points at a static literal). One `std::vector<Op>` per call.

#include <cstdint>
#include <vector>

#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"

namespace tetra::ops {

/// What an op does to the machine.
enum class OpKind : std::uint8_t {
  gemm,          ///< dense matrix multiply (cuBLASLt), fields m, n, k
  attention,     ///< core attention kernel, field attn
  memory_bound,  ///< elementwise / reduction kernel, fields mem and bytes
  collective,    ///< NCCL collective, fields coll, dim, group, bytes
  p2p,           ///< point-to-point send/recv (CP ring, PP boundary), fields dim, group, bytes
};

/// Which pass an op belongs to. Recomputed forward ops keep `forward` and set `recompute`.
enum class Pass : std::uint8_t {
  forward,
  backward_input,   ///< activation gradients (dgrad, attention backward, kernel backwards)
  backward_weight,  ///< weight gradients (wgrad); ZB-H1 may defer these
  optimizer,        ///< optimizer step and DP gradient / parameter communication
};

/// Memory-bound kernels (names match the `[[memory_bound]]` rows of a profile where they exist).
enum class MemoryKernel : std::uint8_t {
  copy,           ///< plain copy / cast
  rmsnorm,        ///< RMSNorm (llama), fwd or bwd
  layernorm,      ///< LayerNorm (gpt), fwd or bwd
  rope,           ///< rotary embedding on q and k
  swiglu,         ///< SwiGLU activation (gated MLP)
  gelu,           ///< GeLU activation (gpt MLP)
  residual_add,   ///< residual add (bias-dropout-add without bias)
  softmax,        ///< unfused attention softmax over s^2 scores (attention = fused | torch)
  embedding,      ///< embedding lookup (fwd) or scatter-add of its gradient (bwd)
  cross_entropy,  ///< vocab-parallel cross entropy over the logits (fwd or bwd)
  grad_norm,      ///< gradient-norm reduction before clipping
  adam,           ///< fused Adam step over the local (sharded) parameters
  quantize,       ///< FP8 / FP4 cast of a GEMM operand with its transpose or columnwise copy
  amax,           ///< absolute-maximum reduction before a current-scaling cast
};

/// NCCL collective, named as nccl-tests names its tests.
enum class CollectiveKind : std::uint8_t { all_reduce, all_gather, reduce_scatter, send_recv, all_to_all };

/// The process group a communication op runs over.
enum class CommDim : std::uint8_t {
  tp,     ///< tensor-parallel group (size tp)
  cp,     ///< context-parallel ring (size cp)
  pp,     ///< neighbouring pipeline stages (pair)
  dp,     ///< data-parallel group (size dp)
  dp_cp,  ///< gradient group of DP x CP ranks (size dp·cp); equals dp when cp == 1
  /// HSDP replicas: ranks that hold the same FSDP shard (size dp_replicate), one per shard
  /// group, the outer part of the DP dimension (torchtitan mesh dp_replicate x dp_shard).
  dp_replicate,
  /// Expert-parallel group (size ep): the ranks that exchange tokens in a MoE layer's
  /// dispatch and combine. Megatron-Core folds expert_tensor x expert x expert_data over the
  /// tp x cp x dp ranks of a stage, innermost first, so an EP group is ep ranks etp apart.
  ep,
  /// Expert data-parallel group (size tp·cp·dp / (ep·etp)): the replicas of one expert shard,
  /// over which expert gradients are reduced; ranks ep·etp apart.
  expert_dp,
  /// Hierarchical CP (parallel::CpComm::a2a_p2p): the all-to-all group of cp_a2a consecutive
  /// CP ranks, and the ring of the cp / cp_a2a ranks cp_a2a apart that hold the same slot in
  /// their all-to-all groups (Megatron-Core parallel_state.create_hierarchical_groups).
  cp_a2a,
  cp_ring,
};

/// What the host waits for before it issues an op (sim::HostCost): nothing; a value read back
/// from the device (a device-to-host round trip, e.g. `.item()`); or a dropless MoE
/// dispatcher's token counts, after which its own Python runs before the next launch.
enum class HostWait : std::uint8_t { none, round_trip, token_counts };

/// One core-attention call on one rank (per repetition when `Op::count > 1`).
struct AttentionShape {
  parallel::AttentionKernel kernel = parallel::AttentionKernel::flash2;
  bool causal = true;        ///< causal mask over this block (half the FLOPs)
  int batch = 1;             ///< sequences (micro-batch size)
  long long seq_q = 0;       ///< query positions in this call
  long long seq_kv = 0;      ///< key/value positions in this call
  int heads = 0;             ///< query heads on this rank (heads / tp)
  int kv_heads = 0;          ///< kv heads on this rank (kv_heads / tp)
  int head_dim = 0;
};

/// One op of the op list (a flat value type; fields that do not apply to `kind` stay 0).
struct Op {
  OpKind kind = OpKind::gemm;
  Pass pass = Pass::forward;
  const char* name = "";     ///< static label, e.g. "qkv", "fc1", "tp_ag", "core_attention"
  // gemm
  long long m = 0, n = 0, k = 0;
  parallel::GemmFormat format = parallel::GemmFormat::training;  ///< element format of the GEMM's inputs
  // attention
  AttentionShape attn;
  // memory_bound
  MemoryKernel mem = MemoryKernel::copy;
  /// memory_bound: bytes read + written; collective: nccl-tests' size S (the whole
  /// gathered / scattered buffer for all-gather / reduce-scatter, the buffer for all-reduce);
  /// p2p: bytes sent by this rank per repetition.
  double bytes = 0;
  // collective / p2p
  CollectiveKind coll = CollectiveKind::all_reduce;
  CommDim dim = CommDim::tp;
  int group = 1;             ///< ranks in the group (2 for a p2p pair)
  /// Model FLOPs of one repetition (see the header comment); 0 for non-compute ops.
  double flops = 0;
  bool recompute = false;    ///< re-run of a forward op under activation recomputation
  bool async = false;        ///< overlapped with the next compute op (header comment)
  /// Runs under the compute of the pass of another micro-batch co-scheduled with this one
  /// (Training::moe_a2a_overlap): no compute op of this pass waits for it.
  bool paired = false;
  /// Issued inside a CUDA graph (Training::cuda_graphs): the host launches none of its kernels.
  bool graphed = false;
  /// The host waits for the GPU to finish the ops before this one before it issues it
  /// (sim/layer.hpp): a value it reads back, or a dropless dispatcher's token counts.
  HostWait host_wait = HostWait::none;
  int count = 1;             ///< repetitions of this op back to back
  /// Kernels the host issues for one repetition: more than one where the framework splits
  /// the op per expert (Transformer Engine's per-split quantization).
  int host_kernels = 1;
  /// A MoE dispatch or combine that sends each token once per destination node (the flex
  /// dispatcher, costmodel::hierarchical_all_to_all): the token's expert count (top-k) and the
  /// routed experts they are drawn from; 0 = a plain all-to-all.
  int route_topk = 0;
  int route_experts = 0;
  parallel::FlexBackend route_backend = parallel::FlexBackend::deepep;  ///< whose kernels cross the nodes

  [[nodiscard]] bool is_compute() const noexcept {
    return kind == OpKind::gemm || kind == OpKind::attention || kind == OpKind::memory_bound;
  }
  [[nodiscard]] bool is_comm() const noexcept { return !is_compute(); }
  /// FLOPs of all repetitions.
  [[nodiscard]] double total_flops() const noexcept { return flops * count; }
};

/// Ops of one transformer layer, one micro-batch, one rank, in program order: forward,
/// then (under recompute) the re-run forward ops marked `recompute`, then the backward with
/// input-gradient and weight-gradient ops interleaved as Megatron issues them (dgrad, then
/// wgrad of the same linear). Selective recompute re-runs core attention forward; full
/// recompute re-runs the whole layer forward with its TP collectives. Under ZeRO-3 the
/// layer's parameter all-gathers (forward, and again in backward) are included. A layout with
/// several kinds of block (selective_layer, parallel::block_kinds) is priced one kind at a time:
/// given such a layout, this lists a block that is not checkpointed.
[[nodiscard]] std::vector<Op> layer_ops(const model::Model& model, const parallel::Training& training,
                                        const parallel::Layout& layout);

/// Ops of one MoE transformer layer (model::is_moe_layer), one micro-batch, one rank: the
/// attention block as in layer_ops (MLA when the model has it), then the MoE block: norm,
/// router GEMM (h x E) and top-k, permute, dispatch over the EP group (all-to-all, or
/// all-gather under the allgather dispatcher), the ETP all-gather when etp > 1, the routed
/// experts as grouped GEMMs (`count` = E/ep experts of the per-expert shape: the busiest EP
/// rank's tokens per expert, T_in·k·etp/(E/ep) times Training::moe_imbalance; their FLOPs the
/// balanced count), the combine, unpermute, the shared experts as a TP-split dense MLP, the
/// residual; and the backward in reverse. Dispatch and combine block the compute stream:
/// Megatron-Core overlaps them only under `overlap_moe_expert_parallel_comm` (not modelled).
/// Equals layer_ops on a dense model.
[[nodiscard]] std::vector<Op> moe_layer_ops(const model::Model& model, const parallel::Training& training,
                                            const parallel::Layout& layout);

/// Ops of the input embedding on the first stage for one micro-batch: lookup (vocab-parallel)
/// and its TP reduction (all-reduce, or reduce-scatter with SP), and their backward.
[[nodiscard]] std::vector<Op> embedding_ops(const model::Model& model, const parallel::Training& training,
                                            const parallel::Layout& layout);

/// Ops of the last stage's head for one micro-batch: final norm, LM head GEMMs (forward,
/// dgrad, wgrad over the padded vocabulary / tp), vocab-parallel cross entropy with its small
/// TP all-reduces, and the backward TP reduction of the head's input gradient. Frameworks other
/// than megatron gather the full-vocabulary logits over TP and run the loss in fp32 on them.
[[nodiscard]] std::vector<Op> head_ops(const model::Model& model, const parallel::Training& training,
                                       const parallel::Layout& layout);

/// Bytes of the activation (forward) or its gradient (backward) sent across one pipeline
/// boundary per micro-batch: `[s/c (/t with SP), b, h]` in the activation dtype
/// (`NVIDIA/Megatron-LM: megatron/core/pipeline_parallel/schedules.py`).
[[nodiscard]] double pp_boundary_bytes(const model::Model& model, const parallel::Training& training,
                                       const parallel::Layout& layout) noexcept;

/// Data-parallel gradient communication of pipeline rank `stage` once per step
/// (`NVIDIA/Megatron-LM: megatron/core/distributed/distributed_data_parallel_config.py`,
/// `param_and_grad_buffer.py`): buckets of `max(40e6, 1e6·dp·cp)` parameters over the
/// stage's local parameters, the last one partial; gradients in `training.grad_dtype`.
/// framework = deepspeed (Aleph Alpha's trainer): a blocking fp32 all-reduce of the whole
/// gradient in 500M-element buckets after the backward, and (ZeRO-1) a parameter all-gather
/// after the optimizer; the simulator runs neither overlapped.
/// zero_stage 0: an all-reduce per bucket (pass optimizer, issued during the last backward);
/// zero_stage 1/2: a reduce-scatter per bucket, then after the optimizer an all-gather of the
/// bf16 parameters per bucket; zero_stage 3: one gradient reduce-scatter per layer
/// (`count` = layers on the stage) plus the embedding/head shards over the FSDP shard group
/// (dp_shard·cp ranks of the dp_cp group); under HSDP each reduced shard is then all-reduced
/// over the dp_replicate replicas. Group dp_cp otherwise. Empty when dp·cp == 1.
[[nodiscard]] std::vector<Op> dp_gradient_ops(const model::Model& model, const parallel::Training& training,
                                              const parallel::Layout& layout, int stage);

/// Gradient communication of the routed experts of pipeline rank `stage` once per step
/// (framework megatron, zero_stage < 3): Megatron-Core's expert buffers, bucketed as the dense
/// ones, reduce-scattered (zero_stage 1/2, then the parameter all-gather) or all-reduced over
/// the expert data-parallel group (CommDim::expert_dp, size tp·cp·dp/(ep·etp)). Empty on a dense
/// model or when that group has one rank. dp_gradient_ops leaves these parameters out.
[[nodiscard]] std::vector<Op> expert_gradient_ops(const model::Model& model, const parallel::Training& training,
                                                  const parallel::Layout& layout, int stage);

/// The optimizer step of pipeline rank `stage`: gradient-norm reduction and the fused Adam
/// kernel over the parameters this rank updates (sharded over dp·cp for zero_stage >= 1):
/// about 30 bytes per parameter (reads the fp32 parameter, gradient, m and v, writes the
/// parameter, m, v and the bf16 copy).
[[nodiscard]] std::vector<Op> optimizer_ops(const model::Model& model, const parallel::Training& training,
                                            const parallel::Layout& layout, int stage);

/// Whether the loss runs on each TP rank's shard of the vocabulary: Megatron's
/// `_VocabParallelCrossEntropy` always, torchtitan's loss parallel whenever tp > 1 (the output
/// projection keeps `Shard(-1)` logits; `apply_tp` in torchtitan's `parallelize_llama.py` at
/// 9dec370 and 820504e, on unless `disable_loss_parallel`). Otherwise the logits are gathered
/// to every TP rank and the loss runs on an fp32 copy of the full vocabulary (Aleph Alpha's
/// `lm_head.py` parallel_output=False; Hugging Face models under DeepSpeed). The op list and the
/// memory model both read it.
[[nodiscard]] bool loss_on_vocab_shards(const parallel::Training& training, int tp) noexcept;

/// Bytes of one transformer layer's parameters on a TP rank as data-parallel sharding
/// all-gathers them (ZeRO-3 / FSDP): the training precision, or FP8 for the linear weights
/// under fp8_param_gather (Megatron-Core's FP8 parameters, torchao's Float8 all-gather); the
/// distributed optimizer gathers MXFP8 weights in the gradient buffer's dtype.
[[nodiscard]] double gathered_layer_param_bytes(const model::Model& model, const parallel::Training& training, int tp);

/// Sum of `total_flops()` over ops; `include_recompute` adds the re-run forward ops
/// (hardware FLOPs).
[[nodiscard]] double sum_flops(const std::vector<Op>& ops, bool include_recompute = false) noexcept;

[[nodiscard]] const char* to_string(OpKind k) noexcept;
[[nodiscard]] const char* to_string(Pass p) noexcept;
[[nodiscard]] const char* to_string(MemoryKernel k) noexcept;
[[nodiscard]] const char* to_string(CollectiveKind k) noexcept;
[[nodiscard]] const char* to_string(CommDim d) noexcept;

}  // namespace tetra::ops
