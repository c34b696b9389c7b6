#pragma once
/// How one training step is laid out over the cluster ([layout]) and how it trains
/// ([training]); the keys are listed in docs/scenario-format.md.

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tetra/parallel/data_loader.hpp"
#include "tetra/parallel/fp8.hpp"
#include "tetra/parallel/cuda_graph.hpp"
#include "tetra/parallel/recompute_modules.hpp"
#include "tetra/parallel/torch_native.hpp"

namespace tetra::parallel {

/// Activation recomputation: none; Megatron's selective (core attention only); full (every
/// layer from its input); torchtitan's per-op selective checkpointing (`selective_op`: the
/// outputs of every second matmul and of attention are saved, the rest of the block is
/// recomputed, `torchtitan/parallelisms/parallelize_llama.py` `_save_list`); torchtitan's
/// per-layer selective checkpointing (`selective_layer`: every `ac_freq`-th block recomputed in
/// full, the others keep everything; `ptd_checkpoint_wrapper._count % ac_freq == 0`,
/// `torchtitan/models/llama3/parallelize_llama.py` at 820504e).
enum class Recompute { none, selective, full, selective_op, selective_layer };
enum class Schedule { gpipe, one_f_one_b, interleaved, zb_h1, layered };
/// Attention kernels: FlashAttention 2 / 3 / 1, cuDNN's fused attention (Transformer Engine's
/// FusedAttention, PyTorch's cuDNN SDPA), Megatron's fused softmax (unfused GEMMs), plain PyTorch.
/// The core-attention kernel. triton: the Triton FlashAttention that MPT / llm-foundry run
/// under `attn_impl: triton` (`llmfoundry/models/layers/flash_attn_triton.py`).
enum class AttentionKernel { flash2, flash3, flash1, cudnn, fused, torch, triton };
enum class Precision { bf16, fp16, fp32 };
enum class Framework { megatron, deepspeed, fsdp };
enum class Optimizer { adam };
/// How tokens reach their experts' ranks (Megatron-Core `moe_token_dispatcher_type`):
/// alltoall (all-to-all over the EP group), allgather (all-gather of the tokens, local
/// selection, reduce-scatter back), flex (fused dispatch / combine kernels of a backend).
enum class MoeDispatcher { alltoall, allgather, flex };

/// The flex dispatcher's kernels (Megatron-Core `moe_flex_dispatcher_backend`): DeepEP's
/// (deepseek-ai/DeepEP) or HybridEP's (its hybrid-ep branch, NVIDIA). Both send a token once
/// to each other node that holds one of its experts; they differ in the rate they reach
/// across nodes (costmodel::hierarchical_all_to_all).
enum class FlexBackend { deepep, hybridep };

/// How Transformer Engine's context parallelism hands attention its inputs (Megatron-Core
/// `cp_comm_type`, `transformer_engine/pytorch/attention/dot_product_attention/
/// context_parallel.py`): p2p, a ring passing K and V to the next rank, each step under the
/// previous one's attention (AttnFuncWithCPAndKVP2P); all_gather, K and V gathered whole
/// before the attention and their gradients reduce-scattered after it, both exposed
/// (AttnFuncWithCPAndKVAllGather); a2a, DeepSpeed-Ulysses' all-to-alls that trade the
/// sequence split for a head split around a full-sequence attention (AttnFuncWithCPAndQKVOA2A);
/// a2a_p2p ("a2a+p2p", hierarchical CP), the all-to-alls inside groups of Layout::cp_a2a
/// consecutive CP ranks and the ring over the cp / cp_a2a groups (AttnFuncWithCPAndKVP2P with
/// cp_group = [a2a group, p2p group]).
enum class CpComm { p2p, all_gather, a2a, a2a_p2p };

/// The parallel layout of one step. dp is always resolved (never 0) once a scenario is loaded.
struct Layout {
  int tp = 1;
  int cp = 1;
  int pp = 1;
  int dp = 1;
  /// HSDP (framework fsdp): replicas of the FSDP shard group; the dp ranks split into
  /// dp_shard = dp / dp_replicate ranks that shard the model and dp_replicate that replicate it
  /// (torchtitan `data_parallel_replicate_degree` x `data_parallel_shard_degree`).
  int dp_replicate = 1;
  int dp_shard = 0;                ///< as written in [layout]; 0 = dp / dp_replicate
  int vp = 1;                      ///< model chunks (virtual stages) per pipeline rank
  int mbs = 1;                     ///< micro-batch size in sequences
  bool sp = false;                 ///< sequence parallelism (needs tp > 1)
  Recompute recompute = Recompute::none;
  /// Under recompute = selective: the parts of each layer Megatron-Core re-runs
  /// (recompute_modules.hpp); empty = core attention, Megatron-Core's default list.
  RecomputeModules recompute_modules;
  /// selective_layer: one block in ac_freq is checkpointed (torchtitan `selective_ac_option`,
  /// default "2").
  int ac_freq = 2;
  /// Megatron-Core `cpu_offloading_num_layers` (with `cpu_offloading_activations`): the saved
  /// activations of this many transformer layers of a model chunk go to host memory after
  /// their forward and come back for their backward (Transformer Engine `cpu_offload.py`).
  int offload_layers = 0;
  Schedule schedule = Schedule::one_f_one_b;
  std::string rank_order = "tp-cp-dp-pp";  ///< innermost first, as Megatron orders ranks
  int first_stage_layers = 0;      ///< uneven split: layers on the first stage (0 = even)
  int last_stage_layers = 0;       ///< uneven split: layers on the last stage (0 = even)
  /// Megatron-Core `account_for_embedding_in_pipeline_split` / `..._loss_...`: the embedding
  /// (loss) counts as one layer of the first (last) virtual stage, which then holds one
  /// transformer layer fewer. Resolved into first/last_stage_layers when the scenario loads.
  bool embedding_in_split = false;
  bool loss_in_split = false;
  /// Expert parallelism: the routed experts of a MoE layer split over ep ranks (Megatron-Core
  /// `expert_model_parallel_size`). The ep ranks are carved out of the dp x cp x tp ranks
  /// (`parallel_state.initialize_model_parallel`: expert_tensor x expert x expert_data = tp x
  /// cp x dp), so ep does not enter world().
  int ep = 1;
  /// Tensor parallelism inside each expert (Megatron-Core `expert_tensor_parallel_size`); may
  /// differ from tp.
  int etp = 1;
  MoeDispatcher moe_dispatcher = MoeDispatcher::alltoall;
  FlexBackend moe_flex_backend = FlexBackend::deepep;  ///< used by the flex dispatcher only
  CpComm cp_comm = CpComm::p2p;  ///< Megatron-Core `cp_comm_type` (used when cp > 1)
  /// Under cp_comm a2a_p2p: the CP ranks of one all-to-all group, consecutive in the CP group
  /// (Megatron-Core `hierarchical_context_parallel_sizes` = [cp_a2a, cp / cp_a2a],
  /// parallel_state.create_hierarchical_groups: level 0 innermost); 1 otherwise.
  int cp_a2a = 1;

  /// CP ranks of one ring: cp / cp_a2a under a2a_p2p, cp under p2p.
  [[nodiscard]] int cp_ring() const noexcept {
    return cp_comm == CpComm::a2a_p2p && cp_a2a > 0 ? cp / cp_a2a : cp;
  }

  /// DP ranks of one FSDP shard group (one HSDP replica).
  [[nodiscard]] int shard_dp() const noexcept { return dp / (dp_replicate > 0 ? dp_replicate : 1); }

  [[nodiscard]] long long world() const noexcept {
    return static_cast<long long>(tp) * cp * pp * dp;
  }

  /// Expert data parallelism: replicas of each expert shard, tp*cp*dp / (ep*etp)
  /// (Megatron-Core `parallel_state`: `expert_data_parallel_size`). 0 when ep*etp does not
  /// divide tp*cp*dp (an invalid layout).
  [[nodiscard]] int edp() const noexcept {
    const long long dense = static_cast<long long>(tp) * cp * dp;
    const long long expert = static_cast<long long>(ep) * etp;
    return expert > 0 && dense % expert == 0 ? static_cast<int>(dense / expert) : 0;
  }

  /// Every field equal (a simulator reuses work for the same layout).
  friend bool operator==(const Layout&, const Layout&) = default;
};

/// Default routing imbalance (Training::moe_imbalance): 1 + MaxVio_global = 1.04, the measured
/// maximal expert-load violation of auxiliary-loss-free balancing, the bias-based router of
/// DeepSeek-V3 (Wang et al., "Auxiliary-Loss-Free Load Balancing Strategy for
/// Mixture-of-Experts", arXiv 2408.15664, Table 2: MaxVio_global 0.04 for the 1B and the 3B
/// model, against 0.72 / 0.52 with an auxiliary loss). MaxVio is max load / mean load - 1 over
/// experts; an EP rank holding several experts averages some of it out, a single micro-batch
/// adds to it. Force-balanced benchmark runs (the Megatron-Bridge tables) are 1.0.
inline constexpr double kMoeRoutingImbalance = 1.04;

struct Training {
  // The plain keys (seq_len, global_batch, zero_stage and the switches), one member each.
#define TRAINING_SWITCH(name, value, needs, meaning, source) bool name = value;
#define TRAINING_NUMBER(type, name, value, lowest, highest, meaning, source) type name = value;
#include "tetra/parallel/training_keys.def"
  Precision precision = Precision::bf16;   ///< weights and activations ("fp8" sets fp8 below)
  Fp8Training fp8;                         ///< FP8 / FP4 GEMMs of the linear layers
  Precision grad_dtype = Precision::fp32;  ///< dtype gradients are accumulated and reduced in
  Optimizer optimizer = Optimizer::adam;
  /// Megatron-Core precision-aware optimizer (`use_precision_aware_optimizer` with
  /// `exp_avg_dtype` = `exp_avg_sq_dtype`): the dtype Adam keeps both moments in; the master
  /// weights stay fp32.
  Precision adam_moments_dtype = Precision::fp32;
  AttentionKernel attention = AttentionKernel::flash2;
  Framework framework = Framework::megatron;
  /// PyTorch-native options of framework fsdp (torch_native.hpp).
  TorchNative torch;
  /// MoE token capacity per expert as a multiple of the balanced share
  /// (tokens * top_k / experts); tokens above it are dropped (Megatron-Core
  /// `moe_expert_capacity_factor`). Nothing = dropless.
  std::optional<double> moe_capacity_factor;
  /// Routing imbalance: tokens routed to the busiest expert rank over the mean (>= 1). It
  /// scales the expert GEMMs, the dispatch traffic and the expert activations of that rank.
  /// Default: kMoeRoutingImbalance (below). A capacity factor caps it.
  double moe_imbalance = kMoeRoutingImbalance;
  /// What runs inside CUDA graphs (cuda_graph.hpp): their kernels cost the host nothing.
  CudaGraphs cuda_graphs;
  /// The attention mask the data loader builds on the host (data_loader.hpp); nothing = the
  /// framework's (loader_mask).
  std::optional<LoaderMask> dataloader_mask;

  /// Tokens the busiest expert rank computes over the balanced share: the routing imbalance,
  /// capped by a capacity factor (the excess is dropped), or exactly the factor when padded to
  /// it.
  [[nodiscard]] double moe_expert_load() const noexcept {
    const double load = std::max(moe_imbalance, 1.0);
    if (!moe_capacity_factor) return load;
    return moe_pad_to_capacity ? *moe_capacity_factor : std::min(load, *moe_capacity_factor);
  }
  /// Whether each MoE layer copies its per-expert token counts to the host and waits for them:
  /// dropless, or dropping without padding, where the counts (or the dropped total) size the
  /// grouped GEMM and the permutation (Megatron-Core `MoEAlltoAllTokenDispatcher.preprocess`
  /// and `_maybe_dtoh_and_synchronize`, which skips them under `drop_and_pad`).
  [[nodiscard]] bool moe_counts_on_host() const noexcept { return !(moe_capacity_factor && moe_pad_to_capacity); }
};

/// One kind of transformer block a layout runs and the share of the blocks of that kind.
struct BlockKind {
  Recompute recompute = Recompute::none;
  double share = 1.0;
};

/// The kinds of block of a layout: its own recompute for every block, except under
/// selective_layer, where one block in ac_freq is recomputed in full and the others not.
/// Costs and activations of a layer are the share-weighted sums over the kinds.
[[nodiscard]] std::vector<BlockKind> block_kinds(const Layout& layout);

/// The modules the layout re-runs in backward: under recompute = selective its
/// recompute_modules (core attention when the list is empty), otherwise none.
[[nodiscard]] RecomputeModules recomputed_modules(const Layout& layout) noexcept;
/// Whether `module` is among them.
[[nodiscard]] bool recomputes(const Layout& layout, RecomputeModule module) noexcept;

/// Micro-batches per step per DP rank: global_batch / (mbs * dp).
[[nodiscard]] int micro_batches(const Layout& layout, const Training& training) noexcept;

/// Bytes of one element of the given dtype.
[[nodiscard]] int bytes_of(Precision p) noexcept;

/// Scenario spellings: none | selective | full | selective_op | selective_layer.
[[nodiscard]] const char* to_string(Recompute r) noexcept;
/// Scenario spellings: gpipe | 1f1b | interleaved | zb-h1 | layered.
[[nodiscard]] const char* to_string(Schedule s) noexcept;
/// Scenario spellings: flash2 | flash3 | flash1 | cudnn | fused | torch.
[[nodiscard]] const char* to_string(AttentionKernel a) noexcept;
/// Scenario spellings: bf16 | fp16 | fp32.
[[nodiscard]] const char* to_string(Precision p) noexcept;
/// Scenario spellings: megatron | deepspeed | fsdp.
[[nodiscard]] const char* to_string(Framework f) noexcept;
/// Scenario spelling: adam.
[[nodiscard]] const char* to_string(Optimizer o) noexcept;
/// Megatron-Core spellings: alltoall | allgather | flex.
[[nodiscard]] const char* to_string(MoeDispatcher d) noexcept;
[[nodiscard]] const char* to_string(FlexBackend b) noexcept;
/// Megatron-Core spellings: p2p | all_gather | a2a.
[[nodiscard]] const char* to_string(CpComm c) noexcept;

/// Inverses of to_string (exact, case-sensitive scenario spellings); nothing for an unknown
/// name.
[[nodiscard]] std::optional<Recompute> parse_recompute(std::string_view name) noexcept;
[[nodiscard]] std::optional<Schedule> parse_schedule(std::string_view name) noexcept;
[[nodiscard]] std::optional<AttentionKernel> parse_attention(std::string_view name) noexcept;
[[nodiscard]] std::optional<Precision> parse_precision(std::string_view name) noexcept;
[[nodiscard]] std::optional<Framework> parse_framework(std::string_view name) noexcept;
[[nodiscard]] std::optional<Optimizer> parse_optimizer(std::string_view name) noexcept;
[[nodiscard]] std::optional<MoeDispatcher> parse_moe_dispatcher(std::string_view name) noexcept;
[[nodiscard]] std::optional<FlexBackend> parse_flex_backend(std::string_view name) noexcept;
/// Also takes "allgather", the spelling of Megatron-LM's `--cp-comm-type` help.
[[nodiscard]] std::optional<CpComm> parse_cp_comm(std::string_view name) noexcept;

}  // namespace tetra::parallel
