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

namespace tetra::ops {

using model::Arch;
using model::Model;
using parallel::AttentionKernel;
using parallel::CudaGraphScope;
using parallel::Layout;
using parallel::MemoryHabits;
using parallel::Recompute;
using parallel::RecomputeModule;
using parallel::Training;
using parallel::bytes_of;
using parallel::execution_traits;
using parallel::fsdp_keeps_blocks_unsharded;
using parallel::memory_habits;
using parallel::padded_vocab;
using parallel::params_per_layer;
using parallel::quantized_bytes_per_element;
using parallel::recomputed_modules;
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
  d.qk_norm = m.qk_norm;
  d.eager_norm = d.x.unfused_rmsnorm && d.llama;
  d.dropout = !d.llama && d.x.megatron;
  d.bias = !d.llama;
  d.recomputed = recomputed_modules(l);
  d.cp_comm = l.cp_comm;
  d.ca = l.cp_comm == parallel::CpComm::a2a_p2p ? std::max(1, l.cp_a2a) : 1;
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

void recompute_norm(std::vector<Op>& ops, const Dims& d, const char* name) {
  if (!d.recomputed.has(RecomputeModule::layernorm)) return;
  Op op = norm_forward(d, name);
  op.recompute = true;
  ops.push_back(op);
}

/// Core attention of the forward pass: plain, or under context parallelism PyTorch's
/// (torch_cp_ops.cpp) or Transformer Engine's (te_cp_ops.cpp).
void attention_forward(std::vector<Op>& ops, const Dims& d, const Training& tr, Run run) {
  const bool recompute = run == Run::recompute;
  const AttentionKernel kernel = tr.attention;
  const bool unfused = kernel == AttentionKernel::fused || kernel == AttentionKernel::torch;
  auto push = [&](Op op) {
    op.recompute = recompute;
    ops.push_back(op);
  };
  if (d.c <= 1) {
    Op op = attention(Pass::forward, "core_attention", d, kernel, Mask::causal, d.sr, d.sr, 1);
    // Aleph Alpha's trainer reads the packed documents' lengths on the host before each
    // attention forward (`Aleph-Alpha/scaling` at 737f855, src/scaling/core/nn/attention/
    // attention.py: FlashAttention's max_seqlen through `get_max_seq_length`'s `.item()`, line
    // 73; the dense mask of the other kernels through `torch.where`, line 81): the host waits
    // for the GPU once per layer forward, again when recomputation re-runs it.
    if (d.x.deepspeed) op.host_wait = HostWait::round_trip;
    push(op);
  } else if (d.x.torch_cp) {
    torch_cp_attention_forward(ops, d, kernel, run);
  } else {
    te_cp_attention_forward(ops, d, kernel, run);
  }
  if (unfused) {
    // Unfused attention materialises the s_q × s_kv scores. Fused (Megatron
    // scaled_upper_triang_masked_softmax): read + write at the activation dtype. Torch:
    // masked_fill with a 1-byte mask (2 act + 1), .float() (act + 4), softmax (4 + 4),
    // .to(act) (4 + act): 4 act + 17 bytes per score.
    const double scores = static_cast<double>(d.b) * static_cast<double>(d.nq / d.t) *
                          static_cast<double>(d.sr) * static_cast<double>(d.s);
    const double per = kernel == AttentionKernel::torch ? 4.0 * d.act + 17.0 : 2.0 * d.act;
    // Torch: each of the four steps is its own kernel.
    push(issued_as(kernel == AttentionKernel::torch ? 4 : 1,
                   mem(Pass::forward, "softmax", MemoryKernel::softmax, per * scores)));
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
    ops.push_back(issued_as(kernel == AttentionKernel::torch ? 4 : 1,
                            mem(Pass::backward_input, "softmax_bwd", MemoryKernel::softmax,
                                per * scores)));
  }
  if (d.c <= 1) {
    ops.push_back(attention(Pass::backward_input, "core_attention_bwd", d, kernel, Mask::causal, d.sr,
                            d.sr, 1));
    return;
  }
  if (d.x.torch_cp) {
    torch_cp_attention_backward(ops, d, kernel);
    return;
  }
  te_cp_attention_backward(ops, d, kernel);
}

ColumnGroup single_linear(const char* fwd, const char* dgrad, const char* wgrad, long long out) {
  ColumnGroup g;
  g.linears[0] = ColumnLinear{fwd, dgrad, wgrad, out};
  g.count = 1;
  return g;
}

namespace {

/// Megatron-Core builds `linear_qkv` and a dense `linear_fc1` as Transformer Engine's
/// LayerNormLinear (TELayerNormColumnParallelLinear): the norm writes the linear's input.
CastInput te_norm_input(const Dims& d) {
  return d.x.megatron ? CastInput::te_norm_output : CastInput::any;
}

}  // namespace

/// Q, K and V of the attention block on this rank.
ColumnGroup qkv_group(const Dims& d) {
  const long long q = d.nq * d.dh / d.t;
  const long long kv = d.nkv * d.dh / d.t;
  if (!d.x.separate_linears) {
    ColumnGroup qkv = single_linear("qkv", "qkv_dgrad", "qkv_wgrad", q + 2 * kv);
    qkv.input = te_norm_input(d);
    return qkv;
  }
  ColumnGroup g;
  g.linears = {ColumnLinear{"wq", "wq_dgrad", "wq_wgrad", q}, ColumnLinear{"wk", "wk_dgrad", "wk_wgrad", kv},
               ColumnLinear{"wv", "wv_dgrad", "wv_wgrad", kv}};
  g.count = 3;
  return g;
}

void column_forward(std::vector<Op>& ops, const Dims& d, const ColumnGroup& g, Run run) {
  const bool recompute = run == Run::recompute;
  for (int i = 0; i < g.count; ++i) quantize_weight(ops, d, d.h, g.linears[i].out, run);
  quantize(ops, d, Pass::forward, static_cast<double>(d.tokens * d.h), run, CastFeeds::sp_gather,
           g.input);
  tp_column_forward(ops, d, Pass::forward, run);
  for (int i = 0; i < g.count; ++i) {
    Op op = linear_gemm(d, Pass::forward, g.linears[i].fwd, d.tokens, g.linears[i].out, d.h);
    op.recompute = recompute;
    ops.push_back(op);
  }
}

namespace {

/// The per-head norms of Q and K (Dims::qk_norm). Megatron-Core applies `q_layernorm` and
/// `k_layernorm` (Transformer Engine's RMSNorm) to the query and key it split from the fused QKV
/// output (`transformer/attention.py` get_query_key_value_tensors): the query is already a copy
/// (its reshape merges strided dimensions), the key a strided view that TE's RMSNorm makes
/// contiguous first (`pytorch/ops/basic/rmsnorm.py` op_forward: `input_.contiguous()`). Forward:
/// read + write per element, the key's copy read + write more (two kernels); backward: read x and
/// dy, write dx. Inside the TP region: every token of the CP chunk, the rank's heads.
std::array<Op, 2> qk_norm_ops(const Dims& d, Pass pass) {
  const double q = static_cast<double>(d.tokens * d.nq / d.t * d.dh);
  const double k = static_cast<double>(d.tokens * d.nkv / d.t * d.dh);
  const MemoryKernel kernel = norm_kernel(d);
  if (pass == Pass::forward) {
    Op k_norm = mem(pass, "k_norm", kernel, 4.0 * d.act * k);
    k_norm.host_kernels = 2;
    return {mem(pass, "q_norm", kernel, 2.0 * d.act * q), k_norm};
  }
  return {mem(pass, "k_norm_bwd", kernel, 3.0 * d.act * k), mem(pass, "q_norm_bwd", kernel, 3.0 * d.act * q)};
}

}  // namespace

void attention_block_forward(std::vector<Op>& ops, const Dims& d, const Training& tr, Run run) {
  const bool recompute = run == Run::recompute;
  if (d.mla) {
    mla_block_forward(ops, d, tr, run);
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

  push(norm_forward(d, "input_norm"));
  column_forward(ops, d, qkv, run);
  if (d.bias) {
    // The QKV linear keeps its bias (`megatron/model/transformer.py` ParallelAttention: no
    // skip_bias_add): F.linear -> addmm writes the broadcast bias into the output and the GEMM
    // reads it back (beta = 1): 2 act per output element. The other linears skip the bias
    // into the fused bias-GeLU / bias-dropout-add kernels.
    push(mem(fw, "qkv_bias", MemoryKernel::copy, 2.0 * d.act * static_cast<double>(d.tokens * qkv_out)));
  }
  if (d.qk_norm) {
    for (Op& op : qk_norm_ops(d, fw)) push(op);
  }
  if (d.llama) {
    // RoPE on q and k: read + write (nq + nkv)/t heads of dh per token
    push(rope_forward(d, static_cast<double>(d.tokens * (d.nq + d.nkv) / d.t * d.dh)));
  }
  attention_forward(ops, d, tr, run);
  if (d.bias && (tr.attention == AttentionKernel::fused || tr.attention == AttentionKernel::torch)) {
    // Unfused core attention returns [b·np, s, hn]: permute(2, 0, 1, 3).contiguous() copies it
    // to [s, b, h/t] (read + write).
    push(mem(fw, "context_permute", MemoryKernel::copy, 2.0 * d.act * static_cast<double>(d.tokens * q_in)));
  }
  quantize_weight(ops, d, q_in, d.h, run);
  quantize(ops, d, fw, static_cast<double>(d.tokens * q_in), run);
  tp_row_forward(ops, d, fw, run, RowCollective::under_gemm);
  push(linear_gemm(d, fw, "attn_proj", d.tokens, d.h, q_in));
  tp_row_forward(ops, d, fw, run, RowCollective::after_gemm);
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
    c.fc1.input = te_norm_input(d);
  }
  if (d.gated) {
    // SwiGLU: read gate and up (2·T·F/t), write T·F/t; eager silu(gate) (2 act) then
    // · up (3 act): 5 act per element. Backward: read dy and both inputs (3·T·F/t), write
    // both input gradients (2·T·F/t); eager: the mul's two gradients (3 act each) and silu
    // backward (3 act): 9 act per element.
    c.act_fwd_bytes = d.x.eager_kernels ? 5.0 : 3.0;
    c.act_bwd_bytes = d.x.eager_kernels ? 9.0 : 5.0;
    c.act_fwd_kernels = d.x.eager_kernels ? 2 : 1;
    c.act_bwd_kernels = d.x.eager_kernels ? 3 : 1;
  } else {
    c.act_fwd_bytes = 2.0;
    c.act_bwd_bytes = 3.0;
  }
  return c;
}

void mlp_core_forward(std::vector<Op>& ops, const Dims& d, const MlpCore& c, Run run) {
  const bool recompute = run == Run::recompute;
  const Pass fw = Pass::forward;
  auto push = [&](Op op) {
    op.recompute = recompute;
    ops.push_back(op);
  };
  const long long fc2_in = c.width / d.t;
  column_forward(ops, d, c.fc1, run);
  push(issued_as(c.act_fwd_kernels,
                 mem(fw, c.names.act, c.gated ? MemoryKernel::swiglu : MemoryKernel::gelu,
                     c.act_fwd_bytes * d.act * static_cast<double>(d.tokens * fc2_in))));
  quantize_weight(ops, d, fc2_in, d.h, run);
  quantize(ops, d, fw, static_cast<double>(d.tokens * fc2_in), run);
  tp_row_forward(ops, d, fw, run, RowCollective::under_gemm);
  push(linear_gemm(d, fw, c.names.fc2, d.tokens, d.h, fc2_in));
  tp_row_forward(ops, d, fw, run, RowCollective::after_gemm);
}

void mlp_block_forward(std::vector<Op>& ops, const Dims& d, Run run) {
  const bool recompute = run == Run::recompute;
  const Pass fw = Pass::forward;
  auto push = [&](Op op) {
    op.recompute = recompute;
    ops.push_back(op);
  };
  push(norm_forward(d, "mlp_norm"));
  mlp_core_forward(ops, d, dense_mlp_core(d), run);
  push(mem(fw, "residual_add", MemoryKernel::residual_add, residual_bytes(d)));
}

void mark_graphed(std::vector<Op>& ops, std::size_t from, const Dims& d, CudaGraphScope scope) {
  if (!d.x.graphs.has(scope)) return;
  for (std::size_t i = from; i < ops.size(); ++i) ops[i].graphed = true;
}

/// The forward of one layer (used for the forward pass and, marked, for full recompute): the
/// attention block, then the dense MLP block or, on a MoE layer, the MoE block (moe_ops.cpp).
void layer_forward(std::vector<Op>& ops, const Dims& d, const Training& tr, Run run) {
  std::size_t from = ops.size();
  attention_block_forward(ops, d, tr, run);
  mark_graphed(ops, from, d, CudaGraphScope::attn);
  from = ops.size();
  if (d.moe) {
    moe_block_forward(ops, d, run);
    moe_block_host_side(ops, from, d);
  } else {
    mlp_block_forward(ops, d, run);
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
  push(norm_forward(d, "input_norm"));
  quantize(ops, d, fw, static_cast<double>(d.tokens * d.h), Run::recompute, CastFeeds::sp_gather);
  tp_column_forward(ops, d, fw, Run::recompute);
  push(linear_gemm(d, fw, "wk", d.tokens, k_out, d.h));
  if (d.llama) {
    push(rope_forward(d, static_cast<double>(d.tokens * (d.nq + d.nkv) / d.t * d.dh)));
  }
  quantize(ops, d, fw, static_cast<double>(d.tokens * q_in), Run::recompute);
  push(linear_gemm(d, fw, "wo", d.tokens, d.h, q_in));
  push(mem(fw, "residual_add", MemoryKernel::residual_add, residual_bytes(d)));
  push(norm_forward(d, "mlp_norm"));
  quantize(ops, d, fw, static_cast<double>(d.tokens * d.h), Run::recompute, CastFeeds::sp_gather);
  tp_column_forward(ops, d, fw, Run::recompute);
  if (d.gated) {
    push(linear_gemm(d, fw, "w3", d.tokens, fc2_in, d.h));
    const MlpCore core = dense_mlp_core(d);
    push(issued_as(core.act_fwd_kernels,
                   mem(fw, "swiglu", MemoryKernel::swiglu,
                       core.act_fwd_bytes * d.act * static_cast<double>(d.tokens * fc2_in))));
  } else {
    push(mem(fw, "gelu", MemoryKernel::gelu, 2.0 * d.act * static_cast<double>(d.tokens * fc2_in)));
  }
  push(mem(fw, "residual_add", MemoryKernel::residual_add, residual_bytes(d)));
}

/// Weight-gradient GEMM of an `in` x `out` weight, then its eager accumulation.
void weight_grad(std::vector<Op>& ops, const Dims& d, const char* wname, long long in, long long out,
                 Operands operands) {
  const bool linear = operands == Operands::recipe;
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

/// The dgrad GEMM of a linear; a transformer linear (Operands::recipe) first casts its output
/// gradient under FP8.
void input_grad(std::vector<Op>& ops, const Dims& d, const char* dname, long long in, long long out,
                Operands operands, CastFeeds feeds) {
  const bool linear = operands == Operands::recipe;
  Op g = gemm(Pass::backward_input, dname, d.tokens, in, out);
  if (linear) {
    quantize_other_axis(ops, d, Pass::backward_input, static_cast<double>(in) * static_cast<double>(out));
    quantize(ops, d, Pass::backward_input, static_cast<double>(d.tokens * out), Run::first, feeds);
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
                       async_if(d.x.tp_gather_overlap)));
  }
  input_grad(ops, d, dname, in, out, Operands::recipe, CastFeeds::sp_gather);
  quantize_other_axis(ops, d, Pass::backward_weight, static_cast<double>(d.tokens * in));
  weight_grad(ops, d, wname, in, out, Operands::recipe);
}

/// Backward of a column-parallel linear: with SP the input is re-gathered (async, under the
/// dgrad GEMM); the input gradient is reduce-scattered (SP) or all-reduced (async, under the
/// wgrad GEMM). Eager trainers reduce it in the autograd function that follows the linear
/// (`Aleph-Alpha/scaling: core/nn/linear/utils.py` _CopyToModelParallelRegion.backward and
/// _GatherFromSequenceParallelRegion.backward), after both GEMMs and blocking the next kernel.
/// Operands::recipe: a transformer linear (FP8 under a recipe), not the LM head.
void column_backward(std::vector<Op>& ops, const Dims& d, const ColumnGroup& g, long long in, Operands operands) {
  const bool linear = operands == Operands::recipe;
  const double bytes = d.act * static_cast<double>(d.tokens * d.h);
  const int t = static_cast<int>(d.t);
  if (d.t > 1 && d.sp) {
    ops.push_back(coll(Pass::backward_input, "tp_ag_input", CollectiveKind::all_gather, CommDim::tp,
                       t, bytes, Wait::async));
  }
  for (int i = 0; i < g.count; ++i) {
    input_grad(ops, d, g.linears[i].dgrad, in, g.linears[i].out, operands, CastFeeds::local);
  }
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
                              CommDim::tp, t, bytes, async_if(!d.x.eager))
                       : coll(Pass::backward_input, "tp_ar_dgrad", CollectiveKind::all_reduce,
                              CommDim::tp, t, bytes, async_if(!d.x.eager)));
  }
  if (linear) quantize_other_axis(ops, d, Pass::backward_weight, static_cast<double>(d.tokens * in));
  for (int i = 0; i < g.count; ++i) weight_grad(ops, d, g.linears[i].wgrad, in, g.linears[i].out, operands);
}

/// Bytes per parameter that the distributed optimizer all-gathers: the training precision, or
/// under `fp8_param_gather` FP8 for the linear weights (Megatron-Core keeps them as FP8 tensors
/// and gathers those) and the training precision for the norms. MXFP8 weights are gathered in
/// the gradient buffer, in its dtype, and cast to MXFP8 after the gather
/// (`megatron/core/distributed/param_and_grad_buffer.py` `_post_param_sync` under
/// `reuse_grad_buf_for_mxfp8_param_ag`, which Megatron-Bridge's `bf16_with_mxfp8_mixed` sets
/// with `fp8_param_gather`, `src/megatron/bridge/training/mixed_precision.py`).
double gathered_param_bytes(const Model& m, const Training& tr) {
  const double act = bytes_of(tr.precision);
  if (!(tr.fp8.param_gather && memory_habits(tr).fp8_linears)) return act;  // ExecutionTraits::fp8_param_gather
  const double layer = static_cast<double>(params_per_layer(m));
  const double norms = 2.0 * static_cast<double>(m.hidden);
  const double linear = std::max(0.0, layer - norms) / std::max(1.0, layer);
  const bool through_grad_buffer = tr.fp8.recipe == parallel::Fp8Recipe::mxfp8 &&
                                   tr.framework == parallel::Framework::megatron &&
                                   tr.zero_stage < 3;
  const double linear_bytes =
      through_grad_buffer ? bytes_of(tr.grad_dtype) : quantized_bytes_per_element(tr.fp8.recipe);
  return linear * linear_bytes + (1.0 - linear) * act;
}

}  // namespace detail

using namespace detail;

bool loss_on_vocab_shards(const Training& training, int tp) noexcept {
  // As ExecutionTraits::loss_on_vocab_shards, from the layout-free habits: the memory model
  // asks for every estimate.
  const MemoryHabits h = memory_habits(training);
  return h.megatron || (h.fsdp && tp > 1);
}

double gathered_layer_param_bytes(const Model& model, const Training& training, int tp) {
  return gathered_param_bytes(model, training) * static_cast<double>(params_per_layer(model)) /
         static_cast<double>(std::max(tp, 1));
}

namespace detail {

void mlp_core_backward(std::vector<Op>& ops, const Dims& d, const MlpCore& c) {
  const long long fc2_in = c.width / d.t;
  row_backward(ops, d, c.names.fc2_dgrad, c.names.fc2_wgrad, fc2_in, d.h);
  ops.push_back(issued_as(c.act_bwd_kernels,
                          mem(Pass::backward_input, c.names.act_bwd,
                              c.gated ? MemoryKernel::swiglu : MemoryKernel::gelu,
                              c.act_bwd_bytes * d.act * static_cast<double>(d.tokens * fc2_in))));
  column_backward(ops, d, c.fc1, d.h, Operands::recipe);
}

void mlp_block_backward(std::vector<Op>& ops, const Dims& d) {
  const Pass bi = Pass::backward_input;
  ops.push_back(mem(bi, "residual_add_bwd", MemoryKernel::residual_add, residual_bytes(d)));
  if (d.recomputed.has(RecomputeModule::mlp)) mlp_core_forward(ops, d, dense_mlp_core(d), Run::recompute);
  recompute_norm(ops, d, "mlp_norm");
  mlp_core_backward(ops, d, dense_mlp_core(d));
  ops.push_back(norm_backward(d, "mlp_norm_bwd"));
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
  if (d.recomputed.has(RecomputeModule::core_attn)) attention_forward(ops, d, training, Run::recompute);
  attention_backward(ops, d, training);
  if (d.llama) {
    ops.push_back(rope_backward(d, static_cast<double>(d.tokens * (d.nq + d.nkv) / d.t * d.dh)));
  }
  if (d.qk_norm) {
    for (const Op& op : qk_norm_ops(d, bi)) ops.push_back(op);
  }
  recompute_norm(ops, d, "input_norm");
  column_backward(ops, d, qkv_group(d), d.h, Operands::recipe);
  ops.push_back(norm_backward(d, "input_norm_bwd"));
}

/// The kind of layer build_layer_ops lowers.
enum class LayerKind : bool { dense, moe };

/// The op list of one layer, dense or MoE.
std::vector<Op> build_layer_ops(const Model& model, const Training& training, const Layout& layout,
                                LayerKind kind) {
  const bool moe = kind == LayerKind::moe;
  Dims d = dims_of(model, training, layout);
  if (moe) set_moe_dims(d, model, training, layout);
  std::vector<Op> ops;
  ops.reserve(moe ? 96 : 64);
  // ZeRO-3 / FSDP gathers over the shard group: DP x CP, or one HSDP replica of it.
  const int dpc = layout.shard_dp() * std::max(1, layout.cp);
  const bool zero3 = training.zero_stage >= 3 && dpc > 1;
  if (zero3) {
    ops.push_back(coll(Pass::forward, "zero3_param_ag", CollectiveKind::all_gather, CommDim::dp_cp,
                       dpc, gathered_layer_param_bytes(model, training, static_cast<int>(d.t)), Wait::async));
  }
  layer_forward(ops, d, training, Run::first);

  if (layout.recompute == Recompute::full) {
    layer_forward(ops, d, training, Run::recompute);
  } else if (layout.recompute == Recompute::selective_op) {
    layer_recompute_selective_op(ops, d);
  }
  // FSDP2 blocks kept unsharded after forward need no all-gather before their backward:
  // reshard_after_forward = false, or torchtitan's default under PP (TorchNative).
  if (zero3 && !fsdp_keeps_blocks_unsharded(training, layout)) {
    ops.push_back(coll(Pass::backward_input, "zero3_param_ag", CollectiveKind::all_gather,
                       CommDim::dp_cp, dpc, gathered_layer_param_bytes(model, training, static_cast<int>(d.t)),
                       Wait::async));
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
      op.host_wait = HostWait::none;
    }
  }
  return ops;
}

}  // namespace detail

std::vector<Op> layer_ops(const Model& model, const Training& training, const Layout& layout) {
  return build_layer_ops(model, training, layout, LayerKind::dense);
}

std::vector<Op> moe_layer_ops(const Model& model, const Training& training, const Layout& layout) {
  return build_layer_ops(model, training, layout, model.moe ? LayerKind::moe : LayerKind::dense);
}

std::vector<Op> embedding_ops(const Model& model, const Training& training, const Layout& layout) {
  const Dims d = dims_of(model, training, layout);
  std::vector<Op> ops;
  // Vocab-parallel lookup writes [s', b, h] (rows outside the rank's vocabulary slice are
  // zeroed) and reads the gathered rows.
  ops.push_back(mem(Pass::forward, "embedding", MemoryKernel::embedding,
                    2.0 * d.act * static_cast<double>(d.tokens * d.h)));
  // One call: the embedding's collective runs where the traits put it (no GEMM to hide under).
  tp_row_forward(ops, d, Pass::forward, Run::first,
                 d.x.tp_overlap ? RowCollective::under_gemm : RowCollective::after_gemm);
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
  ops.push_back(norm_forward(d, "final_norm"));
  tp_column_forward(ops, d, Pass::forward, Run::first);
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
    column_backward(ops, d, single_linear("lm_head", "lm_head_dgrad", "lm_head_wgrad", vocab_rank), d.h,
                    Operands::training_dtype);
    ops.push_back(norm_backward(d, "final_norm_bwd"));
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
  column_backward(ops, d, single_linear("lm_head", "lm_head_dgrad", "lm_head_wgrad", vocab_rank), d.h,
                    Operands::training_dtype);
  ops.push_back(norm_backward(d, "final_norm_bwd"));
  return ops;
}

}  // namespace tetra::ops
