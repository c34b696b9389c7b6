#pragma once
// Op-list builders shared by the dense (ops.cpp) and MoE / MLA (moe_ops.cpp) layers; private to
// tetra::llama. Shapes and conventions: ops.hpp.

#include <array>
#include <vector>

#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"
#include "tetra/parallel/execution.hpp"
#include "tetra/ops/ops.hpp"

namespace tetra::ops::detail {

// Named choices of the builders, in place of bare booleans at their call sites.

/// A forward's first run, or its re-run before backward under activation recomputation (its
/// ops carry Op::recompute).
enum class Run : bool { first, recompute };
/// The mask of a core-attention call: causal, or full (a context-parallel ring step attends a
/// whole earlier chunk).
enum class Mask : bool { full, causal };
/// A collective the compute stream waits for, or one issued async that overlaps the next
/// compute op (Op::async).
enum class Wait : bool { blocking, async };
/// Wait::async where `overlapped` (a traits or training flag), else Wait::blocking.
constexpr Wait async_if(bool overlapped) { return overlapped ? Wait::async : Wait::blocking; }
/// The operands of a linear's GEMM follow the FP8 recipe (casts, rescales), or stay in the
/// training dtype (the LM head).
enum class Operands : bool { training_dtype, recipe };
/// What an FP8 cast feeds: a local GEMM, or the SP all-gather (the TP ranks must agree on the
/// scale: current scaling all-reduces the amax over TP).
enum class CastFeeds : bool { local, sp_gather };
/// What wrote the operand of an FP8 cast: any kernel, or the norm of Transformer Engine's
/// LayerNormLinear, which under current scaling computes the operand's amax in the same pass
/// (`transformer_engine/pytorch/csrc/extensions/normalization.cpp` FUSED_NORM_AMAX_FP8, TE 2.7
/// on) so that no amax pass reads it again.
enum class CastInput : bool { any, te_norm_output };
/// Where a row-parallel linear's TP collective goes: after its GEMM, or before it so that it
/// runs under the GEMM (tp_comm_overlap). The builder is called at both places; the traits pick.
enum class RowCollective : bool { after_gemm, under_gemm };

/// Everything the builders need, resolved once per call.
struct Dims {
  long long b = 1;      // micro-batch (sequences)
  long long s = 0;      // full sequence
  long long sr = 0;     // sequence on this CP rank, s / c
  long long t = 1;      // tp
  long long c = 1;      // cp
  long long h = 0;
  long long f = 0;      // ffn hidden
  long long nq = 0, nkv = 0, dh = 0;
  long long tokens = 0;     // T = b·s/c : tokens a column-parallel GEMM sees
  long long tokens_sp = 0;  // tokens a replicated (norm / residual) kernel sees: T/t with SP
  double act = 2;           // activation dtype bytes (ExecutionTraits::act)
  bool sp = false;
  bool gated = true;
  /// RMSNorm and RoPE (Model::llama_block).
  bool llama = true;
  /// gpt-oss's biased linears and YaRN RoPE (Arch::gpt_oss).
  bool gpt_oss = false;
  /// Per-head RMSNorms on Q and K before RoPE (Model::qk_norm).
  bool qk_norm = false;
  /// How the run executes: framework habits, precision, overlap, host (execution.hpp).
  parallel::ExecutionTraits x;
  /// RMSNorm as the eager fp32 chain (llama block, ExecutionTraits::unfused_rmsnorm).
  bool eager_norm = false;
  /// Megatron GPT dropout (attention and hidden, p = 0.1): `--attention-dropout` and
  /// `--hidden-dropout` default to 0.1 (`NVIDIA/Megatron-LM: megatron/arguments.py`, 2021).
  bool dropout = false;
  /// GPT linears carry biases (Megatron `--add-bias-linear`, on by default); Llama has none.
  bool bias = false;
  /// Parts of the layer re-run in backward by Megatron-Core's selective recomputation
  /// (parallel::recomputed_modules; core attention alone for a plain `selective`).
  parallel::RecomputeModules recomputed;
  // Multi-head latent attention (Model::mla): attention_block_* run the MLA projections.
  bool mla = false;
  long long q_lora = 0, kv_lora = 0, qk_nope = 0, qk_rope = 0, v_dim = 0;
  // MoE block of this layer (set_moe_dims); false on a dense layer.
  bool moe = false;
  long long experts = 0;        // routed experts E
  long long topk = 1;           // experts per token k
  long long fe = 0;             // FFN width of one routed expert
  long long shared_f = 0;       // width of the shared-expert MLP (0: none)
  long long ep = 1, etp = 1;    // expert-parallel and expert-tensor-parallel sizes
  long long local_experts = 1;  // E / ep
  /// Routed tokens one local expert computes on the busiest EP rank (balanced share times the
  /// imbalance), and the balanced share (model FLOPs).
  double expert_tokens = 0, expert_tokens_mean = 0;
  double imbalance = 1;
  parallel::MoeDispatcher dispatcher = parallel::MoeDispatcher::alltoall;
  parallel::FlexBackend flex_backend = parallel::FlexBackend::deepep;
  /// How Transformer Engine's context parallelism exchanges attention inputs (Layout::cp_comm),
  /// and the all-to-all level of the hierarchical scheme (Layout::cp_a2a; 1 otherwise).
  parallel::CpComm cp_comm = parallel::CpComm::p2p;
  long long ca = 1;
};

/// One linear of a column-parallel group: its op names and output width on this rank.
struct ColumnLinear {
  const char* fwd = "";
  const char* dgrad = "";
  const char* wgrad = "";
  long long out = 0;
};

/// The column-parallel linears that read one input. Megatron-Core fuses them into one GEMM
/// (`linear_qkv`, `linear_fc1`); a PyTorch-native model keeps separate `nn.Linear` modules
/// (torchtitan `Attention.wq / wk / wv`, `FeedForward.w1 / w3`), each its own GEMM, whose
/// input gradients autograd adds up.
struct ColumnGroup {
  std::array<ColumnLinear, 3> linears{};
  int count = 0;
  /// The group reads a norm's output through one fused module (Megatron-Core's
  /// TELayerNormColumnParallelLinear for `linear_qkv` and a dense `linear_fc1`).
  CastInput input = CastInput::any;
};

Dims dims_of(const model::Model& m, const parallel::Training& tr, const parallel::Layout& l);
/// Fills the MoE fields of `d` for a MoE layer of `m` (m.moe present).
void set_moe_dims(Dims& d, const model::Model& m, const parallel::Training& tr, const parallel::Layout& l);

Op gemm(Pass pass, const char* name, long long m, long long n, long long k);
Op mem(Pass pass, const char* name, MemoryKernel kernel, double bytes);
Op coll(Pass pass, const char* name, CollectiveKind kind, CommDim dim, int group, double bytes,
        Wait wait = Wait::blocking);
Op linear_gemm(const Dims& d, Pass pass, const char* name, long long m, long long n, long long k);
void quantize(std::vector<Op>& ops, const Dims& d, Pass pass, double elements, Run run,
              CastFeeds feeds = CastFeeds::local, CastInput input = CastInput::any);
void quantize_weight(std::vector<Op>& ops, const Dims& d, long long in, long long out, Run run);
void quantize_other_axis(std::vector<Op>& ops, const Dims& d, Pass pass, double elements);
void rowwise_rescale(std::vector<Op>& ops, const Dims& d, Pass pass, double output_elements);
void tp_row_forward(std::vector<Op>& ops, const Dims& d, Pass pass, Run run, RowCollective at);
void tp_column_forward(std::vector<Op>& ops, const Dims& d, Pass pass, Run run);
/// `op` as the host issues it: `kernels` launches from eager PyTorch (Op::host_kernels).
Op issued_as(int kernels, Op op);
/// One pass of a norm (TE's or Apex's fused kernel, or the eager chain), with the kernels the
/// host issues for it (primitives.cpp).
Op norm_forward(const Dims& d, const char* name);
Op norm_backward(const Dims& d, const char* name);
double residual_bytes(const Dims& d);
/// The gpt-oss output-projection bias in its own kernel, forward and backward (primitives.cpp).
double proj_bias_fwd_bytes(const Dims& d);
double proj_bias_bwd_bytes(const Dims& d);
/// Rotary embedding of q and k over `elements` of them, forward and backward, fused or eager.
Op rope_forward(const Dims& d, double elements);
Op rope_backward(const Dims& d, double elements);
/// Bytes per parameter the distributed optimizer all-gathers (ops.cpp).
double gathered_param_bytes(const model::Model& m, const parallel::Training& tr);
MemoryKernel norm_kernel(const Dims& d);
/// Megatron-Core's "layernorm" recomputation: the norm's forward again before its consumer's
/// backward reads the freed output.
void recompute_norm(std::vector<Op>& ops, const Dims& d, const char* name);
Op attention(Pass pass, const char* name, const Dims& d, parallel::AttentionKernel kernel, Mask mask,
             long long seq_q, long long seq_kv, int count);
Op p2p(Pass pass, const char* name, CommDim dim, double bytes, int count, Wait wait);
void attention_forward(std::vector<Op>& ops, const Dims& d, const parallel::Training& tr, Run run);
void attention_backward(std::vector<Op>& ops, const Dims& d, const parallel::Training& tr);
void weight_grad(std::vector<Op>& ops, const Dims& d, const char* wname, long long in, long long out,
                 Operands operands);
void input_grad(std::vector<Op>& ops, const Dims& d, const char* dname, long long in, long long out,
                Operands operands, CastFeeds feeds);
void row_backward(std::vector<Op>& ops, const Dims& d, const char* dname, const char* wname,
                  long long in, long long out);
/// One fused linear as a group.
ColumnGroup single_linear(const char* fwd, const char* dgrad, const char* wgrad, long long out);
/// The forward of a group: weight casts, the input cast and SP all-gather, one GEMM each.
void column_forward(std::vector<Op>& ops, const Dims& d, const ColumnGroup& g, Run run);
void column_backward(std::vector<Op>& ops, const Dims& d, const ColumnGroup& g, long long in, Operands operands);

/// Op names of one TP-split MLP besides its FC1 group (static strings, as Op::name needs).
struct MlpNames {
  const char* act;
  const char* fc2;
  const char* act_bwd;
  const char* fc2_dgrad;
  const char* fc2_wgrad;
};

/// One TP-split MLP without its norm and residual: FC1 (column-parallel), the activation, FC2
/// (row-parallel), with their TP collectives and FP8 casts. The dense MLP and MoE shared
/// experts are both one.
struct MlpCore {
  long long width = 0;          ///< FFN width before the TP split
  bool gated = true;            ///< SwiGLU (FC1 doubled) or GeLU
  ColumnGroup fc1;               ///< FC1 (gate and up when gated), on this rank
  MlpNames names{};
  double act_fwd_bytes = 0;     ///< activation kernel bytes per output element, in activation dtypes
  double act_bwd_bytes = 0;
  int act_fwd_kernels = 1;      ///< kernels the host issues for the activation, each pass
  int act_bwd_kernels = 1;
};
MlpCore dense_mlp_core(const Dims& d);
void mlp_core_forward(std::vector<Op>& ops, const Dims& d, const MlpCore& c, Run run);
void mlp_core_backward(std::vector<Op>& ops, const Dims& d, const MlpCore& c);

/// The dense MLP block (norm, FC1, activation, FC2, residual) forward and backward.
void mlp_block_forward(std::vector<Op>& ops, const Dims& d, Run run);
void mlp_block_backward(std::vector<Op>& ops, const Dims& d);

// torch_cp_ops.cpp
/// Core attention under PyTorch's context parallelism (framework fsdp, cp > 1): the K/V
/// all-gather, one SDPA call per CP rank, the fp32 merges, and in backward the fp32 dK/dV
/// passed around the ring.
void torch_cp_attention_forward(std::vector<Op>& ops, const Dims& d, parallel::AttentionKernel kernel, Run run);
void torch_cp_attention_backward(std::vector<Op>& ops, const Dims& d, parallel::AttentionKernel kernel);

// te_cp_ops.cpp
/// Core attention under Transformer Engine's context parallelism (cp > 1 outside framework
/// fsdp), by Dims::cp_comm: the p2p K/V ring, the K/V all-gather, or the Ulysses all-to-alls.
void te_cp_attention_forward(std::vector<Op>& ops, const Dims& d, parallel::AttentionKernel kernel, Run run);
void te_cp_attention_backward(std::vector<Op>& ops, const Dims& d, parallel::AttentionKernel kernel);

// moe_ops.cpp
/// The MoE block of one layer: norm, router, dispatch, grouped expert GEMMs, combine, shared
/// experts, residual (forward, marked `recompute` when re-run), and its backward.
void moe_block_forward(std::vector<Op>& ops, const Dims& d, Run run);
void moe_block_backward(std::vector<Op>& ops, const Dims& d);
/// Host side of the MoE block ops from `from` on: which run inside CUDA graphs (the router and
/// preprocessing scopes, or the whole block), and the dropless dispatcher's host sync.
void moe_block_host_side(std::vector<Op>& ops, std::size_t from, const Dims& d);
/// Marks the ops from `from` on as graphed when `scope` is captured (Training::cuda_graphs);
/// build_layer_ops marks every op of a layer under the `layer` and `full_iteration` scopes.
void mark_graphed(std::vector<Op>& ops, std::size_t from, const Dims& d, parallel::CudaGraphScope scope);
/// The MLA attention block (DeepSeek-V3) forward and backward.
void mla_block_forward(std::vector<Op>& ops, const Dims& d, const parallel::Training& tr, Run run);
void mla_block_backward(std::vector<Op>& ops, const Dims& d, const parallel::Training& tr);

}  // namespace tetra::ops::detail
