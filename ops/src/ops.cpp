// Op list of one layer / stage on one rank. Shapes: Megatron-LM column/row-parallel linears
// (`NVIDIA/Megatron-LM: megatron/core/tensor_parallel/layers.py`); collectives:
// Megatron-LM `megatron/core/tensor_parallel/{layers,mappings}.py`, TransformerEngine
// `transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py`,
// Megatron-LM `megatron/core/pipeline_parallel/schedules.py` and `megatron/core/distributed/`;
// byte counts of memory-bound kernels: each operand read once and the output written once.
#include "tetra/ops/ops.hpp"

#include <algorithm>

#include "tetra/parallel/params.hpp"
#include "ops_builders.hpp"

namespace tetra::llama {
namespace detail {


Dims dims_of(const Model& m, const Training& tr, const Layout& l) {
  Dims d;
  d.x = execution_traits(tr, l);
  d.b = std::max(1, l.mbs);
  d.s = std::max(1, tr.seq_len);
  d.t = std::max(1, l.tp);
  d.c = std::max(1, l.cp);
  d.sr = d.s / d.c;
  d.h = m.hidden;
  d.f = m.ffn_hidden;
  d.nq = m.heads;
  d.nkv = m.kv_heads > 0 ? m.kv_heads : m.heads;
  d.dh = m.head_dim();
  d.tokens = d.b * d.sr;
  d.sp = l.sp && d.t > 1;
  d.tokens_sp = d.sp ? d.tokens / d.t : d.tokens;
  d.act = d.x.act;
  d.gated = m.gated_mlp();
  d.llama = m.llama_block();
  d.gpt_oss = m.arch == Arch::gpt_oss;
  d.eager_norm = d.x.unfused_rmsnorm && d.llama;
  d.dropout = !d.llama && d.x.megatron;
  d.bias = !d.llama;
  d.recomputed = recomputed_modules(l);
  if (m.mla) {
    d.mla = true;
    d.q_lora = m.mla->q_lora_rank;
    d.kv_lora = m.mla->kv_lora_rank;
    d.qk_nope = m.mla->qk_nope_head_dim;
    d.qk_rope = m.mla->qk_rope_head_dim;
    d.v_dim = m.mla->v_head_dim;
  }
  return d;
}

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
        bool async) {
  Op op;
  op.kind = OpKind::collective;
  op.pass = pass;
  op.name = name;
  op.coll = kind;
  op.dim = dim;
  op.group = group;
  op.bytes = bytes;
  op.async = async;
  return op;
}

Op p2p(Pass pass, const char* name, CommDim dim, double bytes, int count, bool async) {
  Op op;
  op.kind = OpKind::p2p;
  op.pass = pass;
  op.name = name;
  op.coll = CollectiveKind::send_recv;
  op.dim = dim;
  op.group = 2;
  op.bytes = bytes;
  op.count = count;
  op.async = async;
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
/// read once and written twice in the low-precision format, the row-wise copy for this GEMM
/// and the transposed (Hopper) or column-wise (MXFP8 / NVFP4) copy that the other GEMM of the
/// pair needs (input: fprop and wgrad; output gradient: dgrad and wgrad; weight: fprop and
/// dgrad). Current scaling first reads the operand once more for its amax
/// (Float8CurrentScalingQuantizer); delayed scaling takes the scale of earlier steps and the
/// block-scaled recipes compute theirs per block inside the cast.
/// `gathered`: the tensor is all-gathered over TP under SP (a column-parallel input, a
/// row-parallel output gradient); current scaling then all-reduces its amax (one fp32, MAX)
/// over the TP group before the cast, so that every rank casts with the same scale
/// (`transformer_engine/pytorch/csrc/quantizer.cpp`, Float8CurrentScalingQuantizer with
/// `with_amax_reduction`).
/// torchao (`torchao/float8/float8_linear.py`, `float8_scaling_utils.py`) casts each use of
/// an operand from its high-precision copy, an amax reduction before each: the forward
/// operand here, and again the transposed one for the other GEMM in backward. Eager, the two
/// casts are separate kernels that each read the operand (2 act + 2 q); compiled, Inductor
/// emits them as one kernel (act + 2 q), as TE's fused cast-transpose.
void quantize(std::vector<Op>& ops, const Dims& d, Pass pass, double elements, bool recompute,
              bool gathered) {
  if (d.x.recipe == Fp8Recipe::none || elements <= 0) return;
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
  if (d.x.recipe == Fp8Recipe::current) {
    Op a = mem(pass, "fp8_amax", MemoryKernel::amax, d.act * elements);
    a.recompute = recompute;
    ops.push_back(a);
    if (gathered && d.sp) {
      Op r = coll(pass, "tp_ar_amax", CollectiveKind::all_reduce, CommDim::tp,
                  static_cast<int>(d.t), 4.0);
      r.recompute = recompute;
      ops.push_back(r);
    }
  }
  Op q = mem(pass, "fp8_cast", MemoryKernel::quantize, (d.act + 2.0 * d.x.quantized) * elements);
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
void quantize_weight(std::vector<Op>& ops, const Dims& d, long long in, long long out, bool recompute) {
  const double elements = static_cast<double>(in) * static_cast<double>(out);
  if (torchao_recipe(d.x.recipe)) {
    if (!d.x.fp8_param_gather) quantize(ops, d, Pass::forward, elements, recompute);
    return;
  }
  if (recompute) return;  // the cached copy serves the recomputed forward too
  quantize(ops, d, Pass::forward, elements / d.x.micro_batches, false);
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

Op attention(Pass pass, const char* name, const Dims& d, AttentionKernel kernel, bool causal,
             long long seq_q, long long seq_kv, int count) {
  Op op;
  op.kind = OpKind::attention;
  op.pass = pass;
  op.name = name;
  op.attn.kernel = kernel;
  op.attn.causal = causal;
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
/// initialize_ub); `overlapped` says which placement the caller is at.
void tp_row_forward(std::vector<Op>& ops, const Dims& d, Pass pass, bool recompute, bool overlapped) {
  if (d.t <= 1 || overlapped != d.x.tp_overlap) return;
  const double bytes = d.act * static_cast<double>(d.tokens * d.h);  // S = 2·s'·b·h
  Op op = d.sp ? coll(pass, "tp_rs", CollectiveKind::reduce_scatter, CommDim::tp,
                      static_cast<int>(d.t), bytes, d.x.tp_overlap)
               : coll(pass, "tp_ar", CollectiveKind::all_reduce, CommDim::tp,
                      static_cast<int>(d.t), bytes);
  op.recompute = recompute;
  ops.push_back(op);
}

/// The SP all-gather before a column-parallel linear in forward (async under
/// tp_comm_overlap: the all-gather + GEMM pipeline of TE userbuffers).
void tp_column_forward(std::vector<Op>& ops, const Dims& d, Pass pass, bool recompute) {
  if (d.t <= 1 || !d.sp) return;
  Op op = coll(pass, "tp_ag", CollectiveKind::all_gather, CommDim::tp, static_cast<int>(d.t),
               d.x.tp_gather_bytes * static_cast<double>(d.tokens * d.h), d.x.tp_gather_overlap);
  op.recompute = recompute;
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
double eager_norm_fwd_per_elem(const Dims& d) { return 4.0 * d.act + 28.0; }
double eager_norm_bwd_per_elem(const Dims& d) { return 8.0 * d.act + 76.0; }

double norm_fwd_bytes(const Dims& d) {
  // read x, write y (bf16), one row of h per token: 2·(T_sp·h)·act (section 6.3)
  const double per = d.eager_norm ? eager_norm_fwd_per_elem(d) : 2.0 * d.act;
  return per * static_cast<double>(d.tokens_sp * d.h);
}
double norm_bwd_bytes(const Dims& d) {
  // read x and dy, write dx
  const double per = d.eager_norm ? eager_norm_bwd_per_elem(d) : 3.0 * d.act;
  return per * static_cast<double>(d.tokens_sp * d.h);
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
double rope_fwd_per_elem(const Dims& d) {
  if (d.gpt_oss) return 12.0 * d.act;
  return (d.x.eager_kernels ? 10.0 : 2.0) * d.act;
}
double rope_bwd_per_elem(const Dims& d) { return (d.x.eager_kernels || d.gpt_oss ? 15.0 : 2.0) * d.act; }
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

void recompute_norm(std::vector<Op>& ops, const Dims& d, const char* name) {
  if (!d.recomputed.has(RecomputeModule::layernorm)) return;
  Op op = mem(Pass::forward, name, norm_kernel(d), norm_fwd_bytes(d));
  op.recompute = true;
  ops.push_back(op);
}

/// Core attention of the forward pass (plain, or the CP ring of TE's AttnFuncWithCPAndKVP2P:
/// step 0 causal on the two local chunks, c − 1 steps of half an s'×s' block without mask,
/// with the KV of the previous step sent on while the current one computes).
void attention_forward(std::vector<Op>& ops, const Dims& d, const Training& tr, bool recompute) {
  const AttentionKernel kernel = tr.attention;
  const bool unfused = kernel == AttentionKernel::fused || kernel == AttentionKernel::torch;
  auto push = [&](Op op) {
    op.recompute = recompute;
    ops.push_back(op);
  };
  if (d.c <= 1) {
    push(attention(Pass::forward, "core_attention", d, kernel, true, d.sr, d.sr, 1));
  } else if (d.x.torch_cp) {
    torch_cp_attention_forward(ops, d, kernel, recompute);
  } else {
    const double kv_bytes = 2.0 * d.act * static_cast<double>(d.b * d.sr) *
                            static_cast<double>(std::max(1LL, d.nkv / d.t) * d.dh);
    push(attention(Pass::forward, "core_attention", d, kernel, true, d.sr, d.sr, 1));
    push(p2p(Pass::forward, "cp_kv", CommDim::cp, kv_bytes, static_cast<int>(d.c - 1), true));
    push(attention(Pass::forward, "core_attention_ring", d, kernel, false, d.sr, d.sr / 2,
                   static_cast<int>(d.c - 1)));
  }
  if (unfused) {
    // Unfused attention materialises the s_q × s_kv scores. Fused (Megatron
    // scaled_upper_triang_masked_softmax): read + write at the activation dtype. Torch:
    // masked_fill with a 1-byte mask (2 act + 1), .float() (act + 4), softmax (4 + 4),
    // .to(act) (4 + act): 4 act + 17 bytes per score.
    const double scores = static_cast<double>(d.b) * static_cast<double>(d.nq / d.t) *
                          static_cast<double>(d.sr) * static_cast<double>(d.s);
    const double per = kernel == AttentionKernel::torch ? 4.0 * d.act + 17.0 : 2.0 * d.act;
    push(mem(Pass::forward, "softmax", MemoryKernel::softmax, per * scores));
    if (d.dropout) {
      // Attention dropout (Megatron core attention, p = 0.1): read the probabilities, write
      // the scaled copy and the 1-byte mask.
      push(mem(Pass::forward, "attention_dropout", MemoryKernel::copy, (2.0 * d.act + 1.0) * scores));
    }
  }
}

void attention_backward(std::vector<Op>& ops, const Dims& d, const Training& tr) {
  const AttentionKernel kernel = tr.attention;
  const bool unfused = kernel == AttentionKernel::fused || kernel == AttentionKernel::torch;
  if (unfused) {
    // Fused: read y and dy, write dx (3 act). Torch: cast back (act + 4), softmax backward
    // (4 + 4 + 4), cast (4 + act), masked_fill backward (2 act + 1): 4 act + 21 bytes.
    const double scores = static_cast<double>(d.b) * static_cast<double>(d.nq / d.t) *
                          static_cast<double>(d.sr) * static_cast<double>(d.s);
    if (d.dropout) {
      // read dy and the mask, write dx
      ops.push_back(mem(Pass::backward_input, "attention_dropout_bwd", MemoryKernel::copy,
                        (2.0 * d.act + 1.0) * scores));
    }
    const double per = kernel == AttentionKernel::torch ? 4.0 * d.act + 21.0 : 3.0 * d.act;
    ops.push_back(mem(Pass::backward_input, "softmax_bwd", MemoryKernel::softmax, per * scores));
  }
  if (d.c <= 1) {
    ops.push_back(attention(Pass::backward_input, "core_attention_bwd", d, kernel, true, d.sr,
                            d.sr, 1));
    return;
  }
  if (d.x.torch_cp) {
    torch_cp_attention_backward(ops, d, kernel);
    return;
  }
  // Backward ring: KV at step 0, KV + dKV at steps 1..c−2, dKV at step c−1: 2(c−1)·KV in all.
  const double kv_bytes = 2.0 * d.act * static_cast<double>(d.b * d.sr) *
                          static_cast<double>(std::max(1LL, d.nkv / d.t) * d.dh);
  ops.push_back(attention(Pass::backward_input, "core_attention_bwd", d, kernel, true, d.sr, d.sr, 1));
  ops.push_back(p2p(Pass::backward_input, "cp_kv_dkv", CommDim::cp, 2.0 * kv_bytes,
                    static_cast<int>(d.c - 1), true));
  ops.push_back(attention(Pass::backward_input, "core_attention_ring_bwd", d, kernel, false, d.sr,
                          d.sr / 2, static_cast<int>(d.c - 1)));
}

ColumnGroup single_linear(const char* fwd, const char* dgrad, const char* wgrad, long long out) {
  ColumnGroup g;
  g.linears[0] = ColumnLinear{fwd, dgrad, wgrad, out};
  g.count = 1;
  return g;
}

/// Q, K and V of the attention block on this rank.
ColumnGroup qkv_group(const Dims& d) {
  const long long q = d.nq * d.dh / d.t;
  const long long kv = d.nkv * d.dh / d.t;
  if (!d.x.separate_linears) return single_linear("qkv", "qkv_dgrad", "qkv_wgrad", q + 2 * kv);
  ColumnGroup g;
  g.linears = {ColumnLinear{"wq", "wq_dgrad", "wq_wgrad", q}, ColumnLinear{"wk", "wk_dgrad", "wk_wgrad", kv},
               ColumnLinear{"wv", "wv_dgrad", "wv_wgrad", kv}};
  g.count = 3;
  return g;
}

void column_forward(std::vector<Op>& ops, const Dims& d, const ColumnGroup& g, bool recompute) {
  for (int i = 0; i < g.count; ++i) quantize_weight(ops, d, d.h, g.linears[i].out, recompute);
  quantize(ops, d, Pass::forward, static_cast<double>(d.tokens * d.h), recompute, true);
  tp_column_forward(ops, d, Pass::forward, recompute);
  for (int i = 0; i < g.count; ++i) {
    Op op = linear_gemm(d, Pass::forward, g.linears[i].fwd, d.tokens, g.linears[i].out, d.h);
    op.recompute = recompute;
    ops.push_back(op);
  }
}

void attention_block_forward(std::vector<Op>& ops, const Dims& d, const Training& tr, bool recompute) {
  if (d.mla) {
    mla_block_forward(ops, d, tr, recompute);
    return;
  }
  const Pass fw = Pass::forward;
  auto push = [&](Op op) {
    op.recompute = recompute;
    ops.push_back(op);
  };
  const ColumnGroup qkv = qkv_group(d);
  const long long qkv_out = (d.nq + 2 * d.nkv) * d.dh / d.t;
  const long long q_in = d.nq * d.dh / d.t;

  push(mem(fw, "input_norm", norm_kernel(d), norm_fwd_bytes(d)));
  column_forward(ops, d, qkv, recompute);
  if (d.bias) {
    // The QKV linear keeps its bias (`megatron/model/transformer.py` ParallelAttention: no
    // skip_bias_add): F.linear -> addmm writes the broadcast bias into the output and the GEMM
    // reads it back (beta = 1): 2 act per output element. The other linears skip the bias
    // into the fused bias-GeLU / bias-dropout-add kernels.
    push(mem(fw, "qkv_bias", MemoryKernel::copy, 2.0 * d.act * static_cast<double>(d.tokens * qkv_out)));
  }
  if (d.llama) {
    // RoPE on q and k: read + write (nq + nkv)/t heads of dh per token
    push(mem(fw, "rope", MemoryKernel::rope,
             rope_fwd_per_elem(d) * static_cast<double>(d.tokens * (d.nq + d.nkv) / d.t * d.dh)));
  }
  attention_forward(ops, d, tr, recompute);
  if (d.bias && (tr.attention == AttentionKernel::fused || tr.attention == AttentionKernel::torch)) {
    // Unfused core attention returns [b·np, s, hn]: permute(2, 0, 1, 3).contiguous() copies it
    // to [s, b, h/t] (read + write).
    push(mem(fw, "context_permute", MemoryKernel::copy, 2.0 * d.act * static_cast<double>(d.tokens * q_in)));
  }
  quantize_weight(ops, d, q_in, d.h, recompute);
  quantize(ops, d, fw, static_cast<double>(d.tokens * q_in), recompute);
  tp_row_forward(ops, d, fw, recompute, true);
  push(linear_gemm(d, fw, "attn_proj", d.tokens, d.h, q_in));
  tp_row_forward(ops, d, fw, recompute, false);
  if (d.gpt_oss) push(mem(fw, "attn_proj_bias", MemoryKernel::copy, proj_bias_fwd_bytes(d)));
  push(mem(fw, "residual_add", MemoryKernel::residual_add, residual_bytes(d)));
}

MlpCore dense_mlp_core(const Dims& d) {
  MlpCore c;
  c.width = d.f;
  c.gated = d.gated;
  c.names = d.gated ? MlpNames{"swiglu", "fc2", "swiglu_bwd", "fc2_dgrad", "fc2_wgrad"}
                    : MlpNames{"gelu", "fc2", "gelu_bwd", "fc2_dgrad", "fc2_wgrad"};
  const long long width = d.f / d.t;
  if (d.gated && d.x.separate_linears) {
    c.fc1.linears = {ColumnLinear{"w1", "w1_dgrad", "w1_wgrad", width}, ColumnLinear{"w3", "w3_dgrad", "w3_wgrad", width}};
    c.fc1.count = 2;
  } else {
    c.fc1 = single_linear("fc1", "fc1_dgrad", "fc1_wgrad", width * (d.gated ? 2 : 1));
  }
  if (d.gated) {
    // SwiGLU: read gate and up (2·T·F/t), write T·F/t; eager silu(gate) (2 act) then
    // · up (3 act): 5 act per element. Backward: read dy and both inputs (3·T·F/t), write
    // both input gradients (2·T·F/t); eager: the mul's two gradients (3 act each) and silu
    // backward (3 act): 9 act per element.
    c.act_fwd_bytes = d.x.eager_kernels ? 5.0 : 3.0;
    c.act_bwd_bytes = d.x.eager_kernels ? 9.0 : 5.0;
  } else {
    c.act_fwd_bytes = 2.0;
    c.act_bwd_bytes = 3.0;
  }
  return c;
}

void mlp_core_forward(std::vector<Op>& ops, const Dims& d, const MlpCore& c, bool recompute) {
  const Pass fw = Pass::forward;
  auto push = [&](Op op) {
    op.recompute = recompute;
    ops.push_back(op);
  };
  const long long fc2_in = c.width / d.t;
  column_forward(ops, d, c.fc1, recompute);
  push(mem(fw, c.names.act, c.gated ? MemoryKernel::swiglu : MemoryKernel::gelu,
           c.act_fwd_bytes * d.act * static_cast<double>(d.tokens * fc2_in)));
  quantize_weight(ops, d, fc2_in, d.h, recompute);
  quantize(ops, d, fw, static_cast<double>(d.tokens * fc2_in), recompute);
  tp_row_forward(ops, d, fw, recompute, true);
  push(linear_gemm(d, fw, c.names.fc2, d.tokens, d.h, fc2_in));
  tp_row_forward(ops, d, fw, recompute, false);
}

void mlp_block_forward(std::vector<Op>& ops, const Dims& d, bool recompute) {
  const Pass fw = Pass::forward;
  auto push = [&](Op op) {
    op.recompute = recompute;
    ops.push_back(op);
  };
  push(mem(fw, "mlp_norm", norm_kernel(d), norm_fwd_bytes(d)));
  mlp_core_forward(ops, d, dense_mlp_core(d), recompute);
  push(mem(fw, "residual_add", MemoryKernel::residual_add, residual_bytes(d)));
}

void mark_graphed(std::vector<Op>& ops, std::size_t from, const Dims& d, CudaGraphScope scope) {
  if (!d.x.graphs.has(scope)) return;
  for (std::size_t i = from; i < ops.size(); ++i) ops[i].graphed = true;
}

/// The forward of one layer (used for the forward pass and, marked, for full recompute): the
/// attention block, then the dense MLP block or, on a MoE layer, the MoE block (moe_ops.cpp).
void layer_forward(std::vector<Op>& ops, const Dims& d, const Training& tr, bool recompute) {
  std::size_t from = ops.size();
  attention_block_forward(ops, d, tr, recompute);
  mark_graphed(ops, from, d, CudaGraphScope::attn);
  from = ops.size();
  if (d.moe) {
    moe_block_forward(ops, d, recompute);
    moe_block_host_side(ops, from, d);
  } else {
    mlp_block_forward(ops, d, recompute);
    mark_graphed(ops, from, d, CudaGraphScope::mlp);
  }
}

/// What torchtitan's per-op selective checkpointing recomputes of one block before its
/// backward (`pytorch/torchtitan: torchtitan/parallelisms/parallelize_llama.py` at 9dec370,
/// `_save_list` and `_custom_policy`): the outputs of aten.mm are saved except every second
/// one, counted per block, and those of SDPA and of the TP reduce-scatters always. The block
/// calls mm in the order wq, wk, wv, wo, w1, w3, w2 (`torchtitan/models/llama/model.py`:
/// `self.wq(x), self.wk(x), self.wv(x)`, then `self.wo(...)`, `self.w2(F.silu(self.w1(x)) *
/// self.w3(x))`), so wk, wo and w3 run again, with every non-saved op: both norms, the SP
/// all-gathers of their outputs, RoPE, SiLU and the product, the residual adds.
void layer_recompute_selective_op(std::vector<Op>& ops, const Dims& d) {
  const Pass fw = Pass::forward;
  auto push = [&](Op op) {
    op.recompute = true;
    ops.push_back(op);
  };
  const long long k_out = d.nkv * d.dh / d.t;
  const long long q_in = d.nq * d.dh / d.t;
  const long long fc2_in = d.f / d.t;
  push(mem(fw, "input_norm", norm_kernel(d), norm_fwd_bytes(d)));
  quantize(ops, d, fw, static_cast<double>(d.tokens * d.h), true, true);
  tp_column_forward(ops, d, fw, true);
  push(linear_gemm(d, fw, "wk", d.tokens, k_out, d.h));
  if (d.llama) {
    push(mem(fw, "rope", MemoryKernel::rope,
             rope_fwd_per_elem(d) * static_cast<double>(d.tokens * (d.nq + d.nkv) / d.t * d.dh)));
  }
  quantize(ops, d, fw, static_cast<double>(d.tokens * q_in), true);
  push(linear_gemm(d, fw, "wo", d.tokens, d.h, q_in));
  push(mem(fw, "residual_add", MemoryKernel::residual_add, residual_bytes(d)));
  push(mem(fw, "mlp_norm", norm_kernel(d), norm_fwd_bytes(d)));
  quantize(ops, d, fw, static_cast<double>(d.tokens * d.h), true, true);
  tp_column_forward(ops, d, fw, true);
  if (d.gated) {
    push(linear_gemm(d, fw, "w3", d.tokens, fc2_in, d.h));
    push(mem(fw, "swiglu", MemoryKernel::swiglu,
             (d.x.eager_kernels ? 5.0 : 3.0) * d.act * static_cast<double>(d.tokens * fc2_in)));
  } else {
    push(mem(fw, "gelu", MemoryKernel::gelu, 2.0 * d.act * static_cast<double>(d.tokens * fc2_in)));
  }
  push(mem(fw, "residual_add", MemoryKernel::residual_add, residual_bytes(d)));
}

/// Weight-gradient GEMM of an `in` x `out` weight, then its eager accumulation.
void weight_grad(std::vector<Op>& ops, const Dims& d, const char* wname, long long in, long long out,
                 bool linear) {
  if (linear) quantize_other_axis(ops, d, Pass::backward_weight, static_cast<double>(d.tokens * out));
  Op w = gemm(Pass::backward_weight, wname, out, in, d.tokens);
  if (linear) w.format = d.x.linear_format;
  ops.push_back(w);
  if (linear) rowwise_rescale(ops, d, Pass::backward_weight, static_cast<double>(in) * static_cast<double>(out));
  if (d.x.grad_accumulate > 0) {
    ops.push_back(mem(Pass::backward_weight, "grad_accumulate", MemoryKernel::copy,
                      d.x.grad_accumulate * static_cast<double>(in) * static_cast<double>(out)));
  }
}

/// The dgrad GEMM of a linear; a transformer linear (`linear`) first casts its output
/// gradient under FP8.
void input_grad(std::vector<Op>& ops, const Dims& d, const char* dname, long long in, long long out,
                bool linear, bool gathered) {
  Op g = gemm(Pass::backward_input, dname, d.tokens, in, out);
  if (linear) {
    quantize_other_axis(ops, d, Pass::backward_input, static_cast<double>(in) * static_cast<double>(out));
    quantize(ops, d, Pass::backward_input, static_cast<double>(d.tokens * out), false, gathered);
    g.format = d.x.linear_format;
  }
  ops.push_back(g);
  if (linear) rowwise_rescale(ops, d, Pass::backward_input, static_cast<double>(d.tokens * in));
}

/// Backward of a row-parallel linear: SP all-gather of the output gradient (blocking), dgrad,
/// wgrad.
void row_backward(std::vector<Op>& ops, const Dims& d, const char* dname, const char* wname,
                  long long in, long long out) {
  if (d.t > 1 && d.sp) {
    ops.push_back(coll(Pass::backward_input, "tp_ag_grad", CollectiveKind::all_gather, CommDim::tp,
                       static_cast<int>(d.t), d.act * static_cast<double>(d.tokens * d.h),
                       d.x.tp_gather_overlap));
  }
  input_grad(ops, d, dname, in, out, true, true);
  quantize_other_axis(ops, d, Pass::backward_weight, static_cast<double>(d.tokens * in));
  weight_grad(ops, d, wname, in, out, true);
}

/// Backward of a column-parallel linear: with SP the input is re-gathered (async, under the
/// dgrad GEMM); the input gradient is reduce-scattered (SP) or all-reduced (async, under the
/// wgrad GEMM). Eager trainers reduce it in the autograd function that follows the linear
/// (`Aleph-Alpha/scaling: core/nn/linear/utils.py` _CopyToModelParallelRegion.backward and
/// _GatherFromSequenceParallelRegion.backward), after both GEMMs and blocking the next kernel.
/// `linear`: a transformer linear (FP8 under a recipe), not the LM head.
void column_backward(std::vector<Op>& ops, const Dims& d, const ColumnGroup& g, long long in, bool linear) {
  const double bytes = d.act * static_cast<double>(d.tokens * d.h);
  const int t = static_cast<int>(d.t);
  if (d.t > 1 && d.sp) {
    ops.push_back(coll(Pass::backward_input, "tp_ag_input", CollectiveKind::all_gather, CommDim::tp,
                       t, bytes, true));
  }
  for (int i = 0; i < g.count; ++i) input_grad(ops, d, g.linears[i].dgrad, in, g.linears[i].out, linear, false);
  if (g.count > 1) {
    // Autograd adds the input gradients of the linears that read one tensor: one Inductor
    // kernel reading each and writing the sum when compiled, an add per extra linear eager
    // (read two, write one).
    const double elements = static_cast<double>(d.tokens * in);
    const double per = d.x.eager_kernels ? 3.0 * (g.count - 1) : g.count + 1.0;
    ops.push_back(mem(Pass::backward_input, "dgrad_sum", MemoryKernel::residual_add, per * d.act * elements));
  }
  if (d.t > 1) {
    ops.push_back(d.sp ? coll(Pass::backward_input, "tp_rs_dgrad", CollectiveKind::reduce_scatter,
                              CommDim::tp, t, bytes, !d.x.eager)
                       : coll(Pass::backward_input, "tp_ar_dgrad", CollectiveKind::all_reduce,
                              CommDim::tp, t, bytes, !d.x.eager));
  }
  if (linear) quantize_other_axis(ops, d, Pass::backward_weight, static_cast<double>(d.tokens * in));
  for (int i = 0; i < g.count; ++i) weight_grad(ops, d, g.linears[i].wgrad, in, g.linears[i].out, linear);
}

/// Bytes per parameter that the distributed optimizer all-gathers: the training precision, or
/// under `fp8_param_gather` FP8 for the linear weights (Megatron-Core keeps them as FP8 tensors
/// and gathers those) and the training precision for the norms.
double gathered_param_bytes(const Model& m, const Training& tr) {
  const double act = bytes_of(tr.precision);
  if (!execution_traits(tr, Layout{}).fp8_param_gather) return act;
  const double layer = static_cast<double>(params_per_layer(m));
  const double norms = 2.0 * static_cast<double>(m.hidden);
  const double linear = std::max(0.0, layer - norms) / std::max(1.0, layer);
  return linear * quantized_bytes_per_element(tr.fp8.recipe) + (1.0 - linear) * act;
}

}  // namespace detail

using namespace detail;

bool loss_on_vocab_shards(const Training& training, int tp) noexcept {
  Layout layout;
  layout.tp = tp;
  return execution_traits(training, layout).loss_on_vocab_shards;
}

double gathered_layer_param_bytes(const Model& model, const Training& training, int tp) {
  return gathered_param_bytes(model, training) * static_cast<double>(params_per_layer(model)) /
         static_cast<double>(std::max(tp, 1));
}

namespace detail {

void mlp_core_backward(std::vector<Op>& ops, const Dims& d, const MlpCore& c) {
  const long long fc2_in = c.width / d.t;
  row_backward(ops, d, c.names.fc2_dgrad, c.names.fc2_wgrad, fc2_in, d.h);
  ops.push_back(mem(Pass::backward_input, c.names.act_bwd,
                    c.gated ? MemoryKernel::swiglu : MemoryKernel::gelu,
                    c.act_bwd_bytes * d.act * static_cast<double>(d.tokens * fc2_in)));
  column_backward(ops, d, c.fc1, d.h, true);
}

void mlp_block_backward(std::vector<Op>& ops, const Dims& d) {
  const Pass bi = Pass::backward_input;
  ops.push_back(mem(bi, "residual_add_bwd", MemoryKernel::residual_add, residual_bytes(d)));
  if (d.recomputed.has(RecomputeModule::mlp)) mlp_core_forward(ops, d, dense_mlp_core(d), true);
  recompute_norm(ops, d, "mlp_norm");
  mlp_core_backward(ops, d, dense_mlp_core(d));
  ops.push_back(mem(bi, "mlp_norm_bwd", norm_kernel(d), norm_bwd_bytes(d)));
}

void attention_block_backward(std::vector<Op>& ops, const Dims& d, const Training& training) {
  if (d.mla) {
    mla_block_backward(ops, d, training);
    return;
  }
  const long long q_in = d.nq * d.dh / d.t;
  const Pass bi = Pass::backward_input;
  ops.push_back(mem(bi, "residual_add_bwd", MemoryKernel::residual_add, residual_bytes(d)));
  if (d.gpt_oss) ops.push_back(mem(bi, "attn_proj_bias_bwd", MemoryKernel::copy, proj_bias_bwd_bytes(d)));
  row_backward(ops, d, "attn_proj_dgrad", "attn_proj_wgrad", q_in, d.h);
  if (d.bias && (training.attention == AttentionKernel::fused ||
                 training.attention == AttentionKernel::torch)) {
    ops.push_back(mem(bi, "context_permute_bwd", MemoryKernel::copy,
                      2.0 * d.act * static_cast<double>(d.tokens * q_in)));
  }
  if (d.recomputed.has(RecomputeModule::core_attn)) attention_forward(ops, d, training, true);
  attention_backward(ops, d, training);
  if (d.llama) {
    ops.push_back(mem(bi, "rope_bwd", MemoryKernel::rope,
                      rope_bwd_per_elem(d) * static_cast<double>(d.tokens * (d.nq + d.nkv) / d.t * d.dh)));
  }
  recompute_norm(ops, d, "input_norm");
  column_backward(ops, d, qkv_group(d), d.h, true);
  ops.push_back(mem(bi, "input_norm_bwd", norm_kernel(d), norm_bwd_bytes(d)));
}

/// The op list of one layer, dense (`moe` false) or MoE.
std::vector<Op> build_layer_ops(const Model& model, const Training& training, const Layout& layout,
                                bool moe) {
  Dims d = dims_of(model, training, layout);
  if (moe) set_moe_dims(d, model, training, layout);
  std::vector<Op> ops;
  ops.reserve(moe ? 96 : 64);
  // ZeRO-3 / FSDP gathers over the shard group: DP x CP, or one HSDP replica of it.
  const int dpc = layout.shard_dp() * std::max(1, layout.cp);
  const bool zero3 = training.zero_stage >= 3 && dpc > 1;
  if (zero3) {
    ops.push_back(coll(Pass::forward, "zero3_param_ag", CollectiveKind::all_gather, CommDim::dp_cp,
                       dpc, gathered_layer_param_bytes(model, training, static_cast<int>(d.t)), true));
  }
  layer_forward(ops, d, training, false);

  if (layout.recompute == Recompute::full) {
    layer_forward(ops, d, training, true);
  } else if (layout.recompute == Recompute::selective_op) {
    layer_recompute_selective_op(ops, d);
  }
  // FSDP2 blocks kept unsharded after forward need no all-gather before their backward:
  // reshard_after_forward = false, or torchtitan's default under PP (TorchNative).
  if (zero3 && !fsdp_keeps_blocks_unsharded(training, layout)) {
    ops.push_back(coll(Pass::backward_input, "zero3_param_ag", CollectiveKind::all_gather,
                       CommDim::dp_cp, dpc, gathered_layer_param_bytes(model, training, static_cast<int>(d.t)), true));
  }
  // MLP (or MoE) block, then the attention block, in reverse order.
  std::size_t from = ops.size();
  if (d.moe) {
    moe_block_backward(ops, d);
    moe_block_host_side(ops, from, d);
  } else {
    mlp_block_backward(ops, d);
    mark_graphed(ops, from, d, CudaGraphScope::mlp);
  }
  from = ops.size();
  attention_block_backward(ops, d, training);
  mark_graphed(ops, from, d, CudaGraphScope::attn);
  if (d.bias) {
    // Bias gradients: a column sum of each linear's output gradient (QKV and FC1 on this
    // rank's columns, the row-parallel proj and FC2 over h), read once.
    const long long qkv_out = (d.nq + 2 * d.nkv) * d.dh / d.t;
    const long long fc1_out = d.f * (d.gated ? 2 : 1) / d.t;
    ops.push_back(mem(Pass::backward_weight, "bias_grad", MemoryKernel::copy,
                      d.act * static_cast<double>(d.tokens * (qkv_out + fc1_out + 2 * d.h))));
  }
  // A whole captured layer issues nothing from the host and cannot wait for it: a captured
  // dropless layer keeps its token counts on the device.
  if (d.x.graphs.has(CudaGraphScope::layer) || d.x.graphs.has(CudaGraphScope::full_iteration)) {
    for (Op& op : ops) {
      op.graphed = true;
      op.host_sync = false;
    }
  }
  return ops;
}

}  // namespace detail

std::vector<Op> layer_ops(const Model& model, const Training& training, const Layout& layout) {
  return build_layer_ops(model, training, layout, false);
}

std::vector<Op> moe_layer_ops(const Model& model, const Training& training, const Layout& layout) {
  return build_layer_ops(model, training, layout, model.moe.has_value());
}

std::vector<Op> embedding_ops(const Model& model, const Training& training, const Layout& layout) {
  const Dims d = dims_of(model, training, layout);
  std::vector<Op> ops;
  // Vocab-parallel lookup writes [s', b, h] (rows outside the rank's vocabulary slice are
  // zeroed) and reads the gathered rows.
  ops.push_back(mem(Pass::forward, "embedding", MemoryKernel::embedding,
                    2.0 * d.act * static_cast<double>(d.tokens * d.h)));
  tp_row_forward(ops, d, Pass::forward, false, d.x.tp_overlap);
  if (d.t > 1 && d.sp) {
    ops.push_back(coll(Pass::backward_input, "tp_ag_grad", CollectiveKind::all_gather, CommDim::tp,
                       static_cast<int>(d.t), d.act * static_cast<double>(d.tokens * d.h)));
  }
  // Scatter-add of the gradient rows into the fp32 main_grad of the embedding.
  ops.push_back(mem(Pass::backward_weight, "embedding_bwd", MemoryKernel::embedding,
                    (d.act + 2.0 * 4.0) * static_cast<double>(d.tokens * d.h)));
  return ops;
}

std::vector<Op> head_ops(const Model& model, const Training& training, const Layout& layout) {
  const Dims d = dims_of(model, training, layout);
  const long long vocab_rank = padded_vocab(model, static_cast<int>(d.t)) / d.t;
  std::vector<Op> ops;
  ops.push_back(mem(Pass::forward, "final_norm", norm_kernel(d), norm_fwd_bytes(d)));
  tp_column_forward(ops, d, Pass::forward, false);
  ops.push_back(gemm(Pass::forward, "lm_head", d.tokens, vocab_rank, d.h));
  const bool compiled_loss = d.x.compiled_loss;
  if (!loss_on_vocab_shards(training, static_cast<int>(d.t))) {
    // Loss on the gathered full-vocabulary logits on every TP rank
    // (`Aleph-Alpha/scaling: transformer/model/layers/lm_head.py` parallel_output=False,
    // `losses/cross_entropy.py`): all-gather of the bf16 logits, .float() (act + 4),
    // log_softmax (two reads and a write, 12), nll; backward: the nll gradient (4),
    // log_softmax backward (12), cast (4 + act); the gather's backward is a local slice.
    const double full = static_cast<double>(d.tokens) * static_cast<double>(vocab_rank * d.t);
    if (d.t > 1) {
      ops.push_back(coll(Pass::forward, "tp_ag_logits", CollectiveKind::all_gather, CommDim::tp,
                         static_cast<int>(d.t), d.act * full));
    }
    // Compiled (TorchNative::loss_compiled): Inductor reads the bf16 logits once in forward
    // (max, sum of exponentials and target logit in one reduction) and once in backward,
    // writing the bf16 gradient [derived: the upcast, log-softmax and NLL fuse into one kernel
    // per pass].
    ops.push_back(mem(Pass::forward, "cross_entropy", MemoryKernel::cross_entropy,
                      (compiled_loss ? d.act : d.act + 16.0) * full));
    ops.push_back(mem(Pass::backward_input, "cross_entropy_bwd", MemoryKernel::cross_entropy,
                      (compiled_loss ? 2.0 * d.act : d.act + 20.0) * full));
    column_backward(ops, d, single_linear("lm_head", "lm_head_dgrad", "lm_head_wgrad", vocab_rank), d.h, false);
    ops.push_back(mem(Pass::backward_input, "final_norm_bwd", norm_kernel(d), norm_bwd_bytes(d)));
    return ops;
  }
  // Vocab-parallel cross entropy: read the bf16 logits slice, compute in fp32 (max, sum of
  // exponentials, target logit), writing the fp32 softmax kept for backward.
  const double logits = static_cast<double>(d.tokens) * static_cast<double>(vocab_rank);
  ops.push_back(mem(Pass::forward, "cross_entropy", MemoryKernel::cross_entropy,
                    (compiled_loss ? d.act : d.act + 4.0) * logits));
  if (d.t > 1) {
    // Three all-reduces of one fp32 value per token (max, sum-exp, predicted logit):
    // `megatron/core/tensor_parallel/cross_entropy.py`.
    Op ar = coll(Pass::forward, "tp_ar_loss", CollectiveKind::all_reduce, CommDim::tp,
                 static_cast<int>(d.t), 4.0 * static_cast<double>(d.tokens));
    ar.count = 3;
    ops.push_back(ar);
  }
  ops.push_back(mem(Pass::backward_input, "cross_entropy_bwd", MemoryKernel::cross_entropy,
                    (compiled_loss ? 2.0 * d.act : 4.0 + d.act) * logits));
  column_backward(ops, d, single_linear("lm_head", "lm_head_dgrad", "lm_head_wgrad", vocab_rank), d.h, false);
  ops.push_back(mem(Pass::backward_input, "final_norm_bwd", norm_kernel(d), norm_bwd_bytes(d)));
  return ops;
}

double pp_boundary_bytes(const Model& model, const Training& training,
                         const Layout& layout) noexcept {
  const Dims d = dims_of(model, training, layout);
  return d.act * static_cast<double>(d.tokens_sp) * static_cast<double>(d.h);
}

std::vector<Op> dp_gradient_ops(const Model& model, const Training& training, const Layout& layout,
                                int stage) {
  std::vector<Op> ops;
  const int dpc = std::max(1, layout.dp) * std::max(1, layout.cp);
  if (dpc <= 1) return ops;
  const auto stages = stage_params(model, layout, training.seq_len);
  if (stage < 0 || stage >= static_cast<int>(stages.size())) return ops;
  const StageParams& sp = stages[static_cast<std::size_t>(stage)];
  const double grad_bytes = bytes_of(training.grad_dtype);
  const double param_bytes = gathered_param_bytes(model, training);
  const CommDim dim = layout.cp > 1 ? CommDim::dp_cp : CommDim::dp;

  if (training.zero_stage >= 3) {
    // Per-layer gradient reduce-scatter (FSDP / ZeRO-3) over the shard group, plus the
    // embedding / head shards. HSDP then all-reduces each reduced shard over the replicas
    // (FSDP2 `foreach_reduce`: all_reduce on the reduce-scatter output when an all-reduce
    // group exists, `torch/distributed/_composable/fsdp/_fsdp_collectives.py`).
    const int shard = layout.shard_dp() * std::max(1, layout.cp);
    const int replicas = std::max(1, layout.dp_replicate);
    const double layer_params = static_cast<double>(params_per_layer(model)) / std::max(1, layout.tp);
    const double rest = static_cast<double>(sp.params) - layer_params * sp.layers;
    auto push = [&](const char* rs_name, const char* ar_name, double params, int count) {
      if (shard > 1) {
        Op rs = coll(Pass::optimizer, rs_name, CollectiveKind::reduce_scatter, dim, shard,
                     grad_bytes * params, true);
        rs.count = count;
        ops.push_back(rs);
      }
      if (replicas > 1) {
        Op ar = coll(Pass::optimizer, ar_name, CollectiveKind::all_reduce, CommDim::dp_replicate,
                     replicas, grad_bytes * params / shard, true);
        ar.count = count;
        ops.push_back(ar);
      }
    };
    push("zero3_grad_rs", "hsdp_grad_ar", layer_params, std::max(1, sp.layers));
    if (rest > 0) push("zero3_grad_rs_rest", "hsdp_grad_ar_rest", rest, 1);
    return ops;
  }
  if (execution_traits(training, layout).deepspeed) {
    // Aleph Alpha's trainer (`Aleph-Alpha/scaling: src/scaling/core/optimizer/optimizer.py`
    // step, `allreduce.py`): after the last backward, the full gradient is all-reduced over
    // DP in buckets of 500M elements, each bucket cast to fp32 first
    // (`allreduce_tensor_in_float32`), on the compute stream (no overlap); with ZeRO-1 the
    // updated parameters are gathered after the optimizer step (counted as an all-gather in
    // the parameter dtype).
    const double ds_bucket = 500e6;
    const double total = static_cast<double>(sp.params);
    const long long full = static_cast<long long>(total / ds_bucket);
    const double last = total - static_cast<double>(full) * ds_bucket;
    auto push = [&](CollectiveKind kind, const char* name, double elem_bytes) {
      if (full > 0) {
        Op op = coll(Pass::optimizer, name, kind, dim, dpc, elem_bytes * ds_bucket, false);
        op.count = static_cast<int>(full);
        ops.push_back(op);
      }
      if (last > 0.5) ops.push_back(coll(Pass::optimizer, name, kind, dim, dpc, elem_bytes * last, false));
    };
    push(CollectiveKind::all_reduce, "dp_grad_ar_fp32", 4.0);
    if (training.zero_stage >= 1) push(CollectiveKind::all_gather, "dp_param_ag", param_bytes);
    return ops;
  }
  // Megatron bucket size: max(40M, 1M·dp) parameters (distributed_data_parallel_config.py),
  // dp here is the gradient group (DP x CP). Routed-expert gradients live in their own
  // buffer, reduced over the expert data-parallel group (expert_gradient_ops).
  const double bucket = std::max(40e6, 1e6 * dpc);
  const double total = static_cast<double>(sp.params - sp.expert_params);
  const bool one_bucket = !training.overlap_grad_reduce;
  const long long full = one_bucket ? 0 : static_cast<long long>(total / bucket);
  const double last = one_bucket ? total : total - static_cast<double>(full) * bucket;
  const bool dist = training.zero_stage >= 1;
  auto push_buckets = [&](CollectiveKind kind, const char* name, double elem_bytes, Pass pass,
                          bool async) {
    if (full > 0) {
      Op op = coll(pass, name, kind, dim, dpc, elem_bytes * bucket, async);
      op.count = static_cast<int>(full);
      ops.push_back(op);
    }
    if (last > 0.5) ops.push_back(coll(pass, name, kind, dim, dpc, elem_bytes * last, async));
  };
  if (dist) {
    push_buckets(CollectiveKind::reduce_scatter, "dp_grad_rs", grad_bytes, Pass::optimizer,
                 training.overlap_grad_reduce);
    push_buckets(CollectiveKind::all_gather, "dp_param_ag", param_bytes, Pass::optimizer,
                 training.overlap_param_gather);
  } else {
    push_buckets(CollectiveKind::all_reduce, "dp_grad_ar", grad_bytes, Pass::optimizer,
                 training.overlap_grad_reduce);
  }
  return ops;
}

std::vector<Op> expert_gradient_ops(const Model& model, const Training& training, const Layout& layout,
                                    int stage) {
  std::vector<Op> ops;
  const int edp = layout.edp();
  const auto stages = stage_params(model, layout, training.seq_len);
  if (stage < 0 || stage >= static_cast<int>(stages.size())) return ops;
  const double total = static_cast<double>(stages[static_cast<std::size_t>(stage)].expert_params);
  if (edp <= 1 || total <= 0 || !execution_traits(training, layout).megatron || training.zero_stage >= 3) {
    return ops;
  }
  // Megatron-Core DistributedDataParallel keeps expert parameters in separate buffers whose
  // bucket group is the expert data-parallel group (`expert_data_parallel_group`, size
  // tp·cp·dp/(ep·etp)); bucket size as for the dense buffers over that group.
  const double bucket = std::max(40e6, 1e6 * edp);
  const bool one_bucket = !training.overlap_grad_reduce;
  const long long full = one_bucket ? 0 : static_cast<long long>(total / bucket);
  const double last = one_bucket ? total : total - static_cast<double>(full) * bucket;
  const double grad_bytes = bytes_of(training.grad_dtype);
  const double param_bytes = gathered_param_bytes(model, training);
  auto push_buckets = [&](CollectiveKind kind, const char* name, double elem_bytes, bool async) {
    if (full > 0) {
      Op op = coll(Pass::optimizer, name, kind, CommDim::expert_dp, edp, elem_bytes * bucket, async);
      op.count = static_cast<int>(full);
      ops.push_back(op);
    }
    if (last > 0.5) ops.push_back(coll(Pass::optimizer, name, kind, CommDim::expert_dp, edp, elem_bytes * last, async));
  };
  if (training.zero_stage >= 1) {
    push_buckets(CollectiveKind::reduce_scatter, "edp_grad_rs", grad_bytes, training.overlap_grad_reduce);
    push_buckets(CollectiveKind::all_gather, "edp_param_ag", param_bytes, training.overlap_param_gather);
  } else {
    push_buckets(CollectiveKind::all_reduce, "edp_grad_ar", grad_bytes, training.overlap_grad_reduce);
  }
  return ops;
}

std::vector<Op> optimizer_ops(const Model& model, const Training& training, const Layout& layout,
                              int stage) {
  std::vector<Op> ops;
  const auto stages = stage_params(model, layout, training.seq_len);
  if (stage < 0 || stage >= static_cast<int>(stages.size())) return ops;
  double params = static_cast<double>(stages[static_cast<std::size_t>(stage)].params);
  const int dpc = std::max(1, layout.dp) * std::max(1, layout.cp);
  if (execution_traits(training, layout).deepspeed && dpc > 1 && training.zero_stage < 3) {
    // `allreduce.py`: flatten the bf16 gradients (2 act), cast to fp32 (act + 4), divide
    // (4 + 4), copy back after the all-reduce (4 + act), unflatten into the parameters'
    // gradients (2 act): 6 act + 16 bytes per local parameter.
    const double act = bytes_of(training.precision);
    ops.push_back(mem(Pass::optimizer, "grad_flatten_cast", MemoryKernel::copy,
                      (6.0 * act + 16.0) * params));
  }
  if (training.zero_stage >= 1) {
    // Routed-expert states are sharded over the expert data-parallel group.
    const double expert = static_cast<double>(stages[static_cast<std::size_t>(stage)].expert_params);
    params = std::max(0.0, params - expert) / dpc + expert / std::max(1, layout.edp());
  }
  // Gradient norm: read the fp32 (or bf16) gradient shard once.
  ops.push_back(mem(Pass::optimizer, "grad_norm", MemoryKernel::grad_norm,
                    bytes_of(training.grad_dtype) * params));
  // Fused Adam: read fp32 param, grad, m, v; write param, m, v and the bf16 copy (~30 B/param
  // with fp32 moments).
  const double moments = 2.0 * bytes_of(training.adam_moments_dtype);
  ops.push_back(mem(Pass::optimizer, "adam", MemoryKernel::adam,
                    (4.0 + 4.0 + moments + 4.0 + moments + bytes_of(training.precision)) * params));
  return ops;
}

double sum_flops(const std::vector<Op>& ops, bool include_recompute) noexcept {
  double s = 0;
  for (const Op& op : ops) {
    if (op.recompute && !include_recompute) continue;
    s += op.total_flops();
  }
  return s;
}

const char* to_string(OpKind k) noexcept {
  switch (k) {
    case OpKind::gemm: return "gemm";
    case OpKind::attention: return "attention";
    case OpKind::memory_bound: return "memory_bound";
    case OpKind::collective: return "collective";
    case OpKind::p2p: return "p2p";
  }
  return "?";
}

const char* to_string(Pass p) noexcept {
  switch (p) {
    case Pass::forward: return "forward";
    case Pass::backward_input: return "backward_input";
    case Pass::backward_weight: return "backward_weight";
    case Pass::optimizer: return "optimizer";
  }
  return "?";
}

const char* to_string(MemoryKernel k) noexcept {
  switch (k) {
    case MemoryKernel::copy: return "copy";
    case MemoryKernel::rmsnorm: return "rmsnorm";
    case MemoryKernel::layernorm: return "layernorm";
    case MemoryKernel::rope: return "rope";
    case MemoryKernel::swiglu: return "swiglu";
    case MemoryKernel::gelu: return "gelu";
    case MemoryKernel::residual_add: return "residual_add";
    case MemoryKernel::softmax: return "softmax";
    case MemoryKernel::embedding: return "embedding";
    case MemoryKernel::cross_entropy: return "cross_entropy";
    case MemoryKernel::grad_norm: return "grad_norm";
    case MemoryKernel::adam: return "adam";
    case MemoryKernel::quantize: return "quantize";
    case MemoryKernel::amax: return "amax";
  }
  return "?";
}

const char* to_string(CollectiveKind k) noexcept {
  switch (k) {
    case CollectiveKind::all_reduce: return "all_reduce";
    case CollectiveKind::all_gather: return "all_gather";
    case CollectiveKind::reduce_scatter: return "reduce_scatter";
    case CollectiveKind::send_recv: return "send_recv";
    case CollectiveKind::all_to_all: return "all_to_all";
  }
  return "?";
}

const char* to_string(CommDim d) noexcept {
  switch (d) {
    case CommDim::tp: return "tp";
    case CommDim::cp: return "cp";
    case CommDim::pp: return "pp";
    case CommDim::dp: return "dp";
    case CommDim::dp_cp: return "dp_cp";
    case CommDim::dp_replicate: return "dp_replicate";
    case CommDim::ep: return "ep";
    case CommDim::expert_dp: return "expert_dp";
  }
  return "?";
}

}  // namespace tetra::llama
