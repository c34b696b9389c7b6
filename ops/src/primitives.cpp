// The primitive ops every block builder uses: GEMMs, memory-bound kernels, collectives and
// point-to-point sends, the FP8 / FP4 casts of Transformer Engine and torchao, the TP
// exchanges around a linear, and the byte counts of norms, residuals and RoPE.
#include <algorithm>

#include "ops_builders.hpp"
#include "tetra/ops/ops.hpp"
#include "tetra/parallel/params.hpp"

namespace tetra::ops::detail {

using parallel::AttentionKernel;
using parallel::Fp8Recipe;
using parallel::norm_computes_amax;
using parallel::reads_tensor_amax;
using parallel::torchao_recipe;

Op gemm(Pass pass, const char* name, long long m, long long n, long long k) {
  Op op;
  op.kind = OpKind::gemm;
  op.pass = pass;
  op.name = name;
  op.m = m;
  op.n = n;
  op.k = k;
  op.flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return op;
}

Op mem(Pass pass, const char* name, MemoryKernel kernel, double bytes) {
  Op op;
  op.kind = OpKind::memory_bound;
  op.pass = pass;
  op.name = name;
  op.mem = kernel;
  op.bytes = bytes;
  return op;
}

Op coll(Pass pass, const char* name, CollectiveKind kind, CommDim dim, int group, double bytes,
        Wait wait) {
  Op op;
  op.kind = OpKind::collective;
  op.pass = pass;
  op.name = name;
  op.coll = kind;
  op.dim = dim;
  op.group = group;
  op.bytes = bytes;
  op.async = wait == Wait::async;
  return op;
}

Op p2p(Pass pass, const char* name, CommDim dim, double bytes, int count, Wait wait) {
  Op op;
  op.kind = OpKind::p2p;
  op.pass = pass;
  op.name = name;
  op.coll = CollectiveKind::send_recv;
  op.dim = dim;
  op.group = 2;
  op.bytes = bytes;
  op.count = count;
  op.async = wait == Wait::async;
  return op;
}

Op issued_as(int kernels, Op op) {
  op.host_kernels = kernels;
  return op;
}

/// A GEMM of a transformer linear layer: in the recipe's format under FP8.
Op linear_gemm(const Dims& d, Pass pass, const char* name, long long m, long long n, long long k) {
  Op op = gemm(pass, name, m, n, k);
  op.format = d.x.linear_format;
  return op;
}

/// The casts TE runs before a linear's FP8 GEMMs on `elements` of a high-precision operand
/// (`NVIDIA/TransformerEngine: transformer_engine/pytorch/module/linear.py`): the operand is
/// read once and written in the low-precision format, the row-wise copy for this GEMM and the
/// transposed (Hopper) or column-wise (MXFP8 / NVFP4) copy that the other GEMM of the pair
/// needs (input: fprop and wgrad; output gradient: dgrad and wgrad; weight: fprop and dgrad);
/// a per-tensor-scaled operand on Blackwell needs no second copy (Fp8Training::copies).
/// Current scaling and NVFP4 first read the operand once more for its amax
/// (parallel::reads_tensor_amax), unless a fused norm computed it (CastInput::te_norm_output,
/// parallel::norm_computes_amax: current scaling only). Current scaling's quantizer also zeroes
/// the amax before its pass and derives the scale from it before the cast, each in a one-thread
/// kernel (`transformer_engine/common/recipe/current_scaling.cu`: zero_amax_kernel,
/// compute_scale_from_amax_kernel, launched by Float8CurrentScalingQuantizer::quantize_impl):
/// GPU time of their own; the host issues them in the C++ call whose host time the amax and
/// the cast carry (Op::host_kernels 0).
/// `gathered`: the tensor is all-gathered over TP under SP (a column-parallel input, a
/// row-parallel output gradient); the amax is then all-reduced (one fp32, MAX) over the TP
/// group before the cast, so that every rank casts with the same scale
/// (`transformer_engine/pytorch/csrc/quantizer.cpp`, `with_amax_reduction`).
/// torchao (`torchao/float8/float8_linear.py`, `float8_scaling_utils.py`) casts each use of
/// an operand from its high-precision copy, an amax reduction before each: the forward
/// operand here, and again the transposed one for the other GEMM in backward. Eager, the two
/// casts are separate kernels that each read the operand (2 act + 2 q); compiled, Inductor
/// emits them as one kernel (act + 2 q), as TE's fused cast-transpose.
void quantize(std::vector<Op>& ops, const Dims& d, Pass pass, double elements, Run run,
              CastFeeds feeds, CastInput input) {
  if (d.x.recipe == Fp8Recipe::none || elements <= 0) return;
  const bool recompute = run == Run::recompute;
  if (torchao_recipe(d.x.recipe)) {
    Op a = mem(pass, "fp8_amax", MemoryKernel::amax, d.act * elements);
    a.recompute = recompute;
    ops.push_back(a);
    // Tensorwise writes the copy this GEMM reads and the transposed one the other GEMM of the
    // pair reads; rowwise scales each GEMM's operand along its own axis (quantize_other_axis).
    const double reads = d.x.eager_kernels ? 2.0 : 1.0;
    const double copies = d.x.recipe == Fp8Recipe::rowwise ? 1.0 : 2.0;
    Op q = mem(pass, "fp8_cast", MemoryKernel::quantize, (reads * d.act + copies * d.x.quantized) * elements);
    q.recompute = recompute;
    ops.push_back(q);
    return;
  }
  if (reads_tensor_amax(d.x.recipe)) {
    const bool current = d.x.recipe == Fp8Recipe::current;
    if (input != CastInput::te_norm_output || !norm_computes_amax(d.x.recipe)) {
      if (current) {
        Op z = issued_as(0, mem(pass, "fp8_amax_zero", MemoryKernel::amax, 4.0));
        z.recompute = recompute;
        ops.push_back(z);
      }
      Op a = mem(pass, "fp8_amax", MemoryKernel::amax, d.act * elements);
      a.recompute = recompute;
      ops.push_back(a);
    }
    if (feeds == CastFeeds::sp_gather && d.sp) {
      Op r = coll(pass, "tp_ar_amax", CollectiveKind::all_reduce, CommDim::tp,
                  static_cast<int>(d.t), 4.0);
      r.recompute = recompute;
      ops.push_back(r);
    }
    if (current) {
      Op c = issued_as(0, mem(pass, "fp8_scale", MemoryKernel::amax, 12.0));
      c.recompute = recompute;
      ops.push_back(c);
    }
  }
  Op q = mem(pass, "fp8_cast", MemoryKernel::quantize,
             (d.act + d.x.cast_copies * d.x.quantized) * elements);
  q.recompute = recompute;
  ops.push_back(q);
}

/// Rowwise Float8 quantizes each operand a second time, along the other axis, for the other
/// GEMM that reads it (`torchao/float8/float8_linear.py` at 6243040: the weight per input
/// channel for grad_input, the input and the output gradient per column for grad_weight), each
/// from the high-precision tensor: a column amax and a cast that writes the transposed copy.
void quantize_other_axis(std::vector<Op>& ops, const Dims& d, Pass pass, double elements) {
  if (d.x.recipe != Fp8Recipe::rowwise || elements <= 0) return;
  const double reads = d.x.eager_kernels ? 2.0 : 1.0;
  ops.push_back(mem(pass, "fp8_amax_t", MemoryKernel::amax, d.act * elements));
  ops.push_back(mem(pass, "fp8_cast_t", MemoryKernel::quantize, (reads * d.act + d.x.quantized) * elements));
}

/// The weight cast of one linear, spread over the step's micro-batches (see Dims). torchao
/// keeps no cache: it casts the weight in every forward, recomputed ones included, unless
/// FSDP2 all-gathers it in FP8 already (`enable_fsdp_float8_all_gather`, fp8_param_gather).
void quantize_weight(std::vector<Op>& ops, const Dims& d, long long in, long long out, Run run) {
  const double elements = static_cast<double>(in) * static_cast<double>(out);
  if (torchao_recipe(d.x.recipe)) {
    if (!d.x.fp8_param_gather) quantize(ops, d, Pass::forward, elements, run);
    return;
  }
  if (run == Run::recompute) return;  // the cached copy serves the recomputed forward too
  quantize(ops, d, Pass::forward, elements / d.x.micro_batches, Run::first);
}

/// Rowwise backward GEMMs run without fast accumulation, which torchao routes to cuBLAS's
/// tensor-wise kernel with unit scales and a separate rescale of the output by the row and
/// column scales (`torchao/float8/float8_python_api.py` addmm_float8_unwrapped, pytorch/ao
/// PR #1325): one read and one write of the output.
void rowwise_rescale(std::vector<Op>& ops, const Dims& d, Pass pass, double output_elements) {
  if (d.x.recipe != Fp8Recipe::rowwise) return;
  ops.push_back(mem(pass, "fp8_rescale", MemoryKernel::copy, 2.0 * d.act * output_elements));
}

/// Forward core-attention FLOPs of one call: 4·b·s_q·s_kv·heads·d (QK^T and AV), halved when
/// causal (Megatron current master; flash-attention benchmarks use the same count).
double attention_fwd_flops(const AttentionShape& a) {
  const double f = 4.0 * a.batch * static_cast<double>(a.seq_q) * static_cast<double>(a.seq_kv) *
                   a.heads * a.head_dim;
  return a.causal ? f / 2.0 : f;
}

Op attention(Pass pass, const char* name, const Dims& d, AttentionKernel kernel, Mask mask,
             long long seq_q, long long seq_kv, int count) {
  Op op;
  op.kind = OpKind::attention;
  op.pass = pass;
  op.name = name;
  op.attn.kernel = kernel;
  op.attn.causal = mask == Mask::causal;
  op.attn.batch = static_cast<int>(d.b);
  op.attn.seq_q = seq_q;
  op.attn.seq_kv = seq_kv;
  op.attn.heads = static_cast<int>(d.nq / d.t);
  op.attn.kv_heads = static_cast<int>(std::max(1LL, d.nkv / d.t));
  op.attn.head_dim = static_cast<int>(d.dh);
  op.count = count;
  const double fwd = attention_fwd_flops(op.attn);
  op.flops = pass == Pass::forward ? fwd : 2.0 * fwd;  // Megatron: backward = 2 x forward
  return op;
}

/// The TP collective after a row-parallel linear in forward (RS with SP, AR without). Under
/// tp_comm_overlap it is issued before the GEMM, async, so that it runs under it
/// (TE userbuffers' GEMM + reduce-scatter pipeline, `transformer_engine/pytorch/module/base.py`
/// initialize_ub); `at` says which placement the caller is at.
void tp_row_forward(std::vector<Op>& ops, const Dims& d, Pass pass, Run run, RowCollective at) {
  if (d.t <= 1 || (at == RowCollective::under_gemm) != d.x.tp_overlap) return;
  const double bytes = d.act * static_cast<double>(d.tokens * d.h);  // S = 2·s'·b·h
  Op op = d.sp ? coll(pass, "tp_rs", CollectiveKind::reduce_scatter, CommDim::tp,
                      static_cast<int>(d.t), bytes, async_if(d.x.tp_overlap))
               : coll(pass, "tp_ar", CollectiveKind::all_reduce, CommDim::tp,
                      static_cast<int>(d.t), bytes);
  op.recompute = run == Run::recompute;
  ops.push_back(op);
}

/// The SP all-gather before a column-parallel linear in forward (async under
/// tp_comm_overlap: the all-gather + GEMM pipeline of TE userbuffers).
void tp_column_forward(std::vector<Op>& ops, const Dims& d, Pass pass, Run run) {
  if (d.t <= 1 || !d.sp) return;
  Op op = coll(pass, "tp_ag", CollectiveKind::all_gather, CommDim::tp, static_cast<int>(d.t),
               d.x.tp_gather_bytes * static_cast<double>(d.tokens * d.h), async_if(d.x.tp_gather_overlap));
  op.recompute = run == Run::recompute;
  ops.push_back(op);
}

// Eager RMSNorm (`huggingface/transformers: models/llama/modeling_llama.py` LlamaRMSNorm, the
// form of `Aleph-Alpha/scaling: src/scaling/core/nn/norm/rms_norm.py` without its kernel):
// x.float() (act + 4), pow(2) (4 + 4), mean (4), x * rsqrt(var) (4 + 4), .to(act) (4 + act),
// weight * y (2 act): 4·act + 28 bytes per element. Autograd runs the chain backwards
// (`pytorch/pytorch: tools/autograd/derivatives.yaml`, `torch/csrc/autograd/FunctionsManual.cpp`):
// the weight mul's input grad dy·w (2 act) and weight grad dy·y summed over tokens (3 act
// product + act reduce), the cast (act + 4), the rsqrt mul's input grad g·r (4 + 4) and rsqrt
// grad g·x summed per row (4 + 4 + 4, then 4), mean_backward's expand / N (4), pow_backward
// grad·(2·x.pow(1)) (4 + 4, 4 + 4, 4 + 4 + 4), the add of both branches of x (4 + 4 + 4), the
// cast back (4 + act): 8·act + 76 bytes per element.
// Each step is a kernel the host issues: forward 8 (the six above, and the add of eps and the
// rsqrt on [T, 1]), backward 16 (the thirteen above, and rsqrt's gradient
// -0.5 · grad · result.pow(3), three kernels on [T, 1]).
static double eager_norm_fwd_per_elem(const Dims& d) { return 4.0 * d.act + 28.0; }
static double eager_norm_bwd_per_elem(const Dims& d) { return 8.0 * d.act + 76.0; }
constexpr int kEagerNormFwdKernels = 8;
constexpr int kEagerNormBwdKernels = 16;

static double norm_fwd_bytes(const Dims& d) {
  // read x, write y (bf16), one row of h per token: 2·(T_sp·h)·act (section 6.3)
  const double per = d.eager_norm ? eager_norm_fwd_per_elem(d) : 2.0 * d.act;
  return per * static_cast<double>(d.tokens_sp * d.h);
}
static double norm_bwd_bytes(const Dims& d) {
  // read x and dy, write dx
  const double per = d.eager_norm ? eager_norm_bwd_per_elem(d) : 3.0 * d.act;
  return per * static_cast<double>(d.tokens_sp * d.h);
}
Op norm_forward(const Dims& d, const char* name) {
  return issued_as(d.eager_norm ? kEagerNormFwdKernels : 1,
                   mem(Pass::forward, name, norm_kernel(d), norm_fwd_bytes(d)));
}
Op norm_backward(const Dims& d, const char* name) {
  return issued_as(d.eager_norm ? kEagerNormBwdKernels : 1,
                   mem(Pass::backward_input, name, norm_kernel(d), norm_bwd_bytes(d)));
}
double residual_bytes(const Dims& d) {
  // read two operands, write one; Megatron GPT's fused bias-dropout-add also writes (fwd) /
  // reads (bwd) the 1-byte dropout mask.
  return (3.0 * d.act + (d.dropout ? 1.0 : 0.0)) * static_cast<double>(d.tokens_sp * d.h);
}
/// Bytes per element of q / k for rotary: fused kernel read + write (2 act) in each pass.
/// Eager q·cos + rotate_half(q)·sin (`huggingface/transformers: modeling_llama.py`
/// apply_rotary_pos_emb, the same in `Aleph-Alpha/scaling: core/nn/rotary.py`): mul (2 act),
/// neg of one half (act), cat (2 act), mul (2 act), add (3 act) = 10 act. Its backward
/// (`pytorch/pytorch: tools/autograd/derivatives.yaml`): g·cos and g·sin (2 act each), cat's
/// split is a view, neg (act), the two slices' backward each zero a full gradient and copy a
/// half in (2 act each), and the three gradients of q are summed (3 act twice) = 15 act.
/// gpt-oss's YaRN RoPE scales cos and sin by its attention factor (0.1 ln 32 + 1 = 1.35 at
/// factor 32, `yarn_rotary_pos_embedding.py` _yarn_get_concentration_factor), which TE's fused
/// kernel refuses, so Megatron-Core runs its eager `_apply_rotary_pos_emb_bshd` (`rope_utils.py`
/// apply_rotary_pos_emb: "mscale ... is not supported by TE's fused RoPE"): the eager steps
/// above plus the final cat with the empty pass-through part (2 act) = 12 act forward, 15 act
/// backward (the cat's backward is a view).
/// Each eager step is a kernel the host issues, for q and for k: forward 5 (6 with gpt-oss's
/// final cat), backward 9 (the two products, the neg, two zero-and-copy slice gradients, two
/// sums).
static double rope_fwd_per_elem(const Dims& d) {
  if (d.gpt_oss) return 12.0 * d.act;
  return (d.x.eager_kernels ? 10.0 : 2.0) * d.act;
}
static double rope_bwd_per_elem(const Dims& d) {
  return (d.x.eager_kernels || d.gpt_oss ? 15.0 : 2.0) * d.act;
}
Op rope_forward(const Dims& d, double elements) {
  const int per_tensor = d.gpt_oss ? 6 : (d.x.eager_kernels ? 5 : 0);
  return issued_as(per_tensor > 0 ? 2 * per_tensor : 1,
                   mem(Pass::forward, "rope", MemoryKernel::rope, rope_fwd_per_elem(d) * elements));
}
Op rope_backward(const Dims& d, double elements) {
  return issued_as(d.gpt_oss || d.x.eager_kernels ? 2 * 9 : 1,
                   mem(Pass::backward_input, "rope_bwd", MemoryKernel::rope,
                       rope_bwd_per_elem(d) * elements));
}
/// gpt-oss's output-projection bias: Megatron-Bridge's gpt-oss provider sets
/// `bias_dropout_fusion = False` (`gpt_oss_bridge.py`), so `bias_dropout_add_unfused` adds the
/// bias in its own kernel (read and write the output, 2 act per element; dropout at p = 0
/// returns its input) before the residual add; its backward sums the gradient over the tokens
/// (read, 1 act).
double proj_bias_fwd_bytes(const Dims& d) { return 2.0 * d.act * static_cast<double>(d.tokens_sp * d.h); }
double proj_bias_bwd_bytes(const Dims& d) { return d.act * static_cast<double>(d.tokens_sp * d.h); }
MemoryKernel norm_kernel(const Dims& d) {
  return d.llama ? MemoryKernel::rmsnorm : MemoryKernel::layernorm;
}

}  // namespace tetra::ops::detail
