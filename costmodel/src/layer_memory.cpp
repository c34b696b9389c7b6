// The per-layer terms of the memory model (memory_terms.hpp); sources as in memory.cpp's
// header, whose abbreviation keys these comments use.

#include "memory_terms.hpp"

#include <algorithm>

#include "moe_memory.hpp"
#include "tetra/parallel/params.hpp"

namespace tetra::costmodel::memory_terms {

// ---- Framework habits: what the training code really allocates (parallel/execution.hpp). ----




Geometry geometry(const model::Model& m, const parallel::Training& tr, const parallel::Layout& l) {
  Geometry g;
  const parallel::MemoryHabits hab = parallel::memory_habits(tr);
  g.s = static_cast<double>(tr.seq_len) / std::max(l.cp, 1);
  g.b = std::max(l.mbs, 1);
  g.h = m.hidden;
  g.f = m.ffn_hidden;
  g.a = std::max(m.heads, 1);
  g.kv = static_cast<double>(m.kv_heads > 0 ? m.kv_heads : m.heads) / g.a;
  g.t = std::max(l.tp, 1);
  g.sp = l.sp && l.tp > 1;
  g.nd = g.sp ? g.t : 1.0;
  g.gd = (g.sp && hab.sp_saves_shard) ? g.t : 1.0;
  g.gpt = m.arch == model::Arch::gpt;
  return g;
}

bool unfused_attention(parallel::AttentionKernel k) noexcept {
  return k == parallel::AttentionKernel::fused || k == parallel::AttentionKernel::torch;
}

/// Bytes per element of the per-head s x s tensors saved for backward (K22 Table 2 for gpt;
/// llama [derived from the autograd save pattern]).
/// llama (no dropout): fused scale-mask-softmax keeps one bf16 probability tensor (2); an
/// unfused softmax in fp32 keeps its fp32 output for the softmax backward plus the bf16 copy
/// the P.V matmul saves (4 + 2 = 6). gpt adds attention dropout: mask (1) + output (2), which
/// gives K22's 5 for the fused kernel.
double c_s2_saved(parallel::AttentionKernel k, bool gpt) noexcept {
  if (!unfused_attention(k)) return 0.0;
  const double base = k == parallel::AttentionKernel::fused ? 2.0 : 6.0;
  return base + (gpt ? 3.0 : 0.0);
}

/// Bytes per element of the s x s tensors that exist only while one layer's attention runs
/// [derived from the autograd pattern]: in backward the probability
/// gradient and the score gradient (fused: 2 + 2); unfused fp32: bf16 gradient (2), its fp32
/// copy (4) and the softmax-backward output (4).
double c_s2_transient(parallel::AttentionKernel k) noexcept {
  if (!unfused_attention(k)) return 0.0;
  return k == parallel::AttentionKernel::fused ? 4.0 : 10.0;
}

/// Extra bytes per element per norm that an unfused PyTorch RMSNorm saves beyond the bf16
/// input a fused kernel keeps (H23) [derived from the autograd save pattern of
/// `w * (x * rsqrt(mean(x.float()^2) + eps)).to(bf16)`]: the fp32 copy of the input saved by
/// pow (4), the bf16 input saved by the mul with the fp32 rsqrt (2), and the bf16 normalized
/// tensor saved by the weight mul (2); minus the bf16 input the fused kernel keeps (2) = 6.
/// The per-row rsqrt (4 bytes per row) is negligible.
constexpr double kUnfusedNormExtra = 6.0;

/// Saved bytes of one layer for one micro-batch, no recomputation (F24-code's Llama form of
/// K22's accounting, TP without SP as K22, s^2 terms and unfused RMSNorm as above;
/// gpt: K22 Table 2 with its dropout masks).
double layer_saved_full(const model::Model& m, const parallel::Training& tr,
                        const parallel::Layout& l, bool drop_s2) {
  const Geometry g = geometry(m, tr, l);
  const double sbh = g.s * g.b * g.h;
  // Outside the TP region: the two norm inputs (2 + 2), sharded over t only with SP.
  double bytes = 4.0 * sbh / g.nd;
  // The two column-parallel GEMM inputs (QKV, gate/up or fc1): 2 + 2. Under FP8, TE saves
  // the column-wise quantised copy its wgrad GEMM reads instead (linear.py keeps
  // `columnwise_usage` only): q + q.
  const double q = parallel::quantized_bytes_per_element(tr.fp8.recipe);
  const bool fp8 = detail::saves_fp8_inputs(tr);
  bytes += (fp8 ? 2.0 * q : 4.0) * sbh / g.gd;
  // Inside the TP region: Q (2), K and V (4 k/a), attention output (2); under FP8 the
  // projection also saves its quantised input (q) while attention keeps its bf16 output.
  double inner = 2.0 + 4.0 * g.kv + 2.0 + (fp8 ? q : 0.0);
  if (g.gpt) {
    // GeLU MLP: fc1 output (2 f/h) and GeLU output (2 f/h) (K22); dropout masks after
    // attention and after the MLP, 1 byte each, outside the TP region (K22 Table 2).
    inner += 4.0 * g.f / g.h;
    bytes += 2.0 * sbh / g.nd;
  } else {
    // SwiGLU: up out, gate out, act(gate) (eager; the fused kernel keeps only gate and up),
    // and the product, the FC2 input (F24-code): 4 x 2 f/h eager, 3 x 2 f/h fused; under FP8 the
    // product is saved quantised (q).
    const double swiglu_saved = parallel::memory_habits(tr).fused_swiglu ? 4.0 : 6.0;
    inner += (swiglu_saved + (fp8 ? q : 2.0)) * g.f / g.h;
  }
  bytes += inner * sbh / g.t;
  // FlashAttention's per-row log-sum-exp, fp32 (Dao-AILab/flash-attention saves softmax_lse).
  if (!unfused_attention(tr.attention)) bytes += 4.0 * g.a * g.s * g.b / g.t;
  // Unfused RMSNorm (H23).
  if (!g.gpt && !parallel::memory_habits(tr).fused_norm) bytes += 2.0 * kUnfusedNormExtra * sbh / g.nd;
  // s^2 terms of an unfused attention (K22); selective recompute drops them (K22, MLM).
  if (!drop_s2) bytes += c_s2_saved(tr.attention, g.gpt) * g.a * g.s * g.s * g.b / g.t;
  return bytes;
}

/// The second copy of the attention output that Transformer Engine's FlashAttention backend
/// leaves saved. Before Hopper, TE's DotProductAttention prefers flash-attn over cuDNN
/// (`transformer_engine/pytorch/attention.py` get_attention_backend: only on compute 9.0 does
/// it disable FlashAttention for FusedAttention, v1.7 to v1.11). That backend hands flash-attn
/// (b, s) tensors and returns `output.view(b, s, -1).transpose(0, 1).contiguous()` to
/// Megatron-Core's (s, b) layout: for b > 1 a copy, which the output projection saves as its
/// input while flash-attn's FlashAttnFunc keeps its own `out` for the backward (for b = 1 the
/// transpose is already contiguous and no copy is made). MLA never takes that backend (TE
/// v1.11 disables FlashAttention when head_dim_qk != head_dim_v). A recomputed core attention
/// saves neither copy (selective recompute's core_attn, full recompute). bf16, heads x head
/// width over the TP ranks, per token of the CP chunk.
double te_flash_output_copy(const model::Model& m, const hw::Gpu& gpu, const parallel::Training& tr,
                            const parallel::Layout& l) {
  const bool te_flash_backend = tr.framework == parallel::Framework::megatron &&
                                tr.attention == parallel::AttentionKernel::flash2 && !m.mla &&
                                gpu.compute_capability >= 80 && gpu.compute_capability < 90;
  const bool attention_saved = (l.recompute == parallel::Recompute::none || l.recompute == parallel::Recompute::selective) &&
                               !parallel::recomputes(l, parallel::RecomputeModule::core_attn);
  if (!te_flash_backend || !attention_saved || l.mbs <= 1) return 0.0;
  const Geometry g = geometry(m, tr, l);
  return 2.0 * g.s * g.b * g.a * m.head_dim() / g.t;
}

/// What Megatron-Core's recompute_modules free of a dense layer's saved tensors (the MoE and
/// MLA parts are in moe_memory.cpp). "layernorm" frees the two norm outputs, which the QKV and
/// FC1 linears saved as their inputs; under FP8 Transformer Engine saves its own quantised copy
/// instead, which stays. "mlp" checkpoints the MLP from its input: the SwiGLU (GeLU) tensors and
/// the FC2 input go.
double dense_module_savings(const model::Model& m, const parallel::Training& tr, const parallel::Layout& l) {
  const Geometry g = geometry(m, tr, l);
  const double sbh = g.s * g.b * g.h;
  const bool fp8 = detail::saves_fp8_inputs(tr);
  double bytes = 0.0;
  if (parallel::recomputes(l, parallel::RecomputeModule::layernorm) && !fp8) bytes += 4.0 * sbh / g.gd;
  if (parallel::recomputes(l, parallel::RecomputeModule::mlp)) {
    const double q = parallel::quantized_bytes_per_element(tr.fp8.recipe);
    const double swiglu_saved = g.gpt ? 4.0 : (parallel::memory_habits(tr).fused_swiglu ? 4.0 : 6.0);
    bytes += (swiglu_saved + (fp8 ? q : 2.0)) * g.f / g.h * sbh / g.t;
  }
  return bytes;
}

/// Transformer Engine's context-parallel buffers at the peak of a layer's backward, in units of
/// s' b h / t bytes (`context_parallel.py` at v2.13) [derived]. p2p: the two send / receive
/// buffers, each K,V and dK,dV in the activation dtype (`p2p_comm_buffers`, kv.dtype without
/// FP8 attention): 2 x 8 k/a.
/// all_gather: the gathered K and V and their reordered copies (2 x 2 x 2 cp k/a) beside the
/// gathered-size bf16 dK and dV (2 x 2 cp k/a). a2a: the head-split copies of Q, K and V and
/// their received and reordered copies (3 x 2 (1 + 2 k/a)). a2a+p2p: the larger of the two, as
/// the all-to-alls run before and after the ring, not beside it; the ring's buffers hold the
/// same elements, cp_a2a times the tokens over cp_a2a times fewer heads.
double cp_transient(const Geometry& g, const parallel::Layout& l) {
  const double c = static_cast<double>(l.cp);
  switch (l.cp_comm) {
    case parallel::CpComm::p2p: return 16.0 * g.kv;
    case parallel::CpComm::all_gather: return 12.0 * c * g.kv;
    case parallel::CpComm::a2a: return 6.0 * (1.0 + 2.0 * g.kv);
    case parallel::CpComm::a2a_p2p: return std::max(16.0 * g.kv, 6.0 * (1.0 + 2.0 * g.kv));
  }
  return 16.0 * g.kv;
}

/// Working set of one layer beyond what it saves, at the peak of its backward [derived from
/// the communication pattern of MLM's TP/SP linears and TE's CP ring].
double layer_transient(const model::Model& m, const parallel::Training& tr, const parallel::Layout& l) {
  const Geometry g = geometry(m, tr, l);
  const double sbh = g.s * g.b * g.h;
  // MLP backward: gradient of the fc1 output (2f gated, f otherwise) and of the activation
  // output (f), bf16, sharded over t.
  const double f_grads = g.gpt ? 2.0 * g.f : 3.0 * g.f;
  double bytes = 2.0 * g.s * g.b * f_grads / g.t;
  // Gradient of the residual stream and of the layer input (2 + 2).
  bytes += 4.0 * sbh / g.nd;
  // SP: the all-gathered GEMM input, 2 s' b h (not divided by t), in forward and backward.
  if (g.sp) bytes += 2.0 * sbh;
  // s^2 gradients of an unfused attention.
  bytes += c_s2_transient(tr.attention) * g.a * g.s * g.s * g.b / g.t;
  // Unfused RMSNorm forward: fp32 x^2 and fp32 x * rsqrt temporaries (4 + 4).
  if (!g.gpt && !parallel::memory_habits(tr).fused_norm) bytes += 8.0 * sbh / g.nd;
  if (l.cp > 1) bytes += cp_transient(g, l) * sbh / g.t;
  return bytes;
}



StateBytes state_bytes(const parallel::Training& tr) {
  StateBytes s;
  s.w = parallel::bytes_of(tr.precision);
  s.g = parallel::bytes_of(tr.grad_dtype);
  s.o = parallel::memory_habits(tr).optimizer_bytes;
  return s;
}

int micro_batch_count(const parallel::Layout& l, const parallel::Training& tr) {
  return std::max(parallel::micro_batches(l, tr), 1);
}

/// ZeRO-2 (FSDP's SHARD_GRAD_OP, Llama 3 §3.3.2): share of a stage's gradients held unsharded
/// at once, besides the reduced shard. Without a pipeline every micro-batch's gradients are
/// reduce-scattered as its backward produces them (FSDP, DeepSpeed stage 2): none. Under
/// pipelining a model chunk accumulates them unsharded over its micro-batches and
/// reduce-scatters them after its last backward, per virtual stage (PyTorch pipelining
/// `_PipelineStageBase.backward_maybe_with_nosync`, `last_backward`). When the step's
/// micro-batches make one round of pp under the interleaved schedule, each chunk runs its
/// backwards back to back (Megatron-Core `schedules.py`, `microbatch_group_size_per_vp_stage`
/// = pp), so only the chunk in backward and the one being reduce-scattered hold theirs;
/// otherwise every chunk holds its gradients from its first backward to the step's end.
double unsharded_gradient_share(const parallel::Layout& l, int micro_batches) {
  if (l.pp <= 1) return 0.0;
  const int v = std::max(l.vp, 1);
  if (v > 1 && l.schedule == parallel::Schedule::interleaved && micro_batches <= std::max(l.pp, 1))
    return std::min(2, v) / static_cast<double>(v);
  return 1.0;
}

/// Share of a stage's saved layer activations that stays on the GPU under activation offloading
/// (Layout::offload_layers). Transformer Engine's offload handler
/// (`transformer_engine/pytorch/cpu_offload.py`, `AsyncDoubleBufferGroupOffloadHandler`) copies
/// the saved tensors of the first N layers of each model chunk to the host on a side stream
/// while the next layer runs, and reloads layer i-1's while layer i runs backward: the last
/// L - N layers stay, and one offloaded layer is on the device at a time besides them (its
/// copy in flight). The peak is at the start of backward, before any reload.
double resident_layer_share(const parallel::Layout& l, int stage_layers) {
  const double chunk = static_cast<double>(stage_layers) / std::max(l.vp, 1);
  const double offloaded = std::min(static_cast<double>(l.offload_layers), chunk - 1.0);
  return offloaded >= 1.0 ? (chunk - offloaded + 1.0) / chunk : 1.0;
}

/// Share of the per-micro-batch blocks (activations and transients) that the caching allocator
/// holds beyond what is allocated. The mechanism is `record_stream`: c10d's NCCL process group
/// marks every collective's input and output as used on its NCCL stream unless
/// TORCH_NCCL_AVOID_RECORD_STREAMS=1 (`torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp`,
/// `avoidRecordStreams_`, default false), and the allocator then cannot hand such a block to the
/// compute stream until the collective's event has completed (`c10/cuda/CUDACachingAllocator.cpp`
/// `insert_events` / `process_events`): while the compute stream runs ahead, it takes fresh
/// blocks, and the ones it could not reuse stay reserved. That touches the per-micro-batch
/// blocks only where activations pass through NCCL: TP / SP and CP collectives, pipeline
/// sends, expert all-to-alls; and in a DeepSpeed-style trainer, which flattens the gradients
/// into fresh tensors for every step's all-reduce (Aleph-Alpha/scaling `allreduce.py`, the
/// `grad_flatten_cast` of the optimizer ops). Megatron-Core DDP and FSDP communicate gradients
/// and weights from long-lived or rate-limited buffers, never the activations. Under
/// TORCH_NCCL_AVOID_RECORD_STREAMS=1 the tensors stay alive until the collective ends instead
/// and the allocator reuses their blocks at once. Where neither applies, the blocks the
/// allocator has cached beyond what is allocated are whole free segments, which it releases
/// and retries with at the device's limit (`release_cached_blocks`): they show in
/// torch.cuda.max_memory_reserved (StageMemory::torch_reserved_bytes) but cost no capacity.
double fragmentation_share(const parallel::Training& tr, const parallel::Layout& l,
                           const MemoryOptions& o) noexcept {
  const bool activations_on_nccl = l.tp > 1 || l.cp > 1 || l.pp > 1 || l.ep > 1;
  const bool flattened_grads_on_nccl = parallel::memory_habits(tr).deepspeed && l.dp > 1;
  const bool records = (activations_on_nccl || flattened_grads_on_nccl) && !tr.avoid_record_streams;
  return records ? o.fragmentation : 0.0;
}

}  // namespace tetra::costmodel::memory_terms
