// Core attention under PyTorch's context parallelism as torchtitan runs it
// (`torch/distributed/tensor/experimental/_attention.py` in torch 2.6, the algorithm of the
// Dec 2024 build torchtitan 9dec370 benchmarked; `torchtitan/utils.py`
// create_context_parallel_ctx). Defaults: K and V all-gathered (`_RotateMethod.ALL_GATHER`),
// round-robin load balancing, partial outputs merged in fp32 (`_SDPAMerger`,
// convert_to_f32 = True), dK and dV accumulated in fp32 and passed to the next rank after
// every backward step (`_templated_ring_attention_backward`, a hard-coded all-to-all).
// torchtitan repeats the GQA heads before SDPA (`models/llama/model.py` repeat_kv), so K and V
// travel with every query head.
#include <algorithm>

#include "ops_builders.hpp"

namespace tetra::ops::detail {

using parallel::AttentionKernel;
namespace {

/// Elements of one of Q, K, V or the output on this rank: b x heads/t x s' x d (the GQA heads
/// repeated to the query heads).
double head_elements(const Dims& d) {
  return static_cast<double>(d.b) * static_cast<double>(d.nq / d.t) * static_cast<double>(d.sr) *
         static_cast<double>(d.dh);
}

/// Bytes one rank contributes to the K/V exchange: K and V at the activation dtype.
double kv_bytes(const Dims& d) { return 2.0 * d.act * head_elements(d); }

/// K and V made contiguous from their transposed views and concatenated into the send buffer
/// (read and write each); eager also runs the concatenation again in every later step
/// (`torch.cat` before each `exchange_buffers`, which the all-gather rotater ignores).
double staging_bytes(const Dims& d, Pass pass) {
  const double once = 4.0 * kv_bytes(d);
  const double wasted = d.x.eager_kernels ? 2.0 * kv_bytes(d) * static_cast<double>(std::max(0LL, d.c - 2)) : 0.0;
  return once + (pass == Pass::forward ? wasted : 0.0);
}

/// Collectives under torch.compile: the traced functional collective waits right after it is
/// issued (`torch/distributed/_functional_collectives.py` _maybe_wrap_tensor) and Inductor's
/// comm/compute reordering is off by default (`torch/_inductor/config.py`
/// reorder_for_compute_comm_overlap = False), so they block the compute stream; eager, the
/// AsyncCollectiveTensor is waited at first use [derived].
Wait overlapped(const Dims& d) { return async_if(d.x.eager_kernels); }

}  // namespace

void torch_cp_attention_forward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel, Run run) {
  const bool recompute = run == Run::recompute;
  auto push = [&](Op op) {
    op.recompute = recompute;
    ops.push_back(op);
  };
  const double elements = head_elements(d);
  const int steps = static_cast<int>(d.c);
  push(mem(Pass::forward, "cp_kv_stage", MemoryKernel::copy, staging_bytes(d, Pass::forward)));
  // One all-gather of every rank's K and V (nccl-tests' size: the gathered buffer); eager, it
  // overlaps the local causal step and is waited before the first remote one.
  push(coll(Pass::forward, "cp_kv_ag", CollectiveKind::all_gather, CommDim::cp, steps,
            kv_bytes(d) * static_cast<double>(steps), overlapped(d)));
  // P calls of the same work: the local causal pair, then a q x kv/2 or q/2 x kv block without
  // mask per remote rank (`_is_causal_behavior` under load balancing).
  push(attention(Pass::forward, "core_attention", d, kernel, Mask::causal, d.sr, d.sr, 1));
  push(attention(Pass::forward, "core_attention_ring", d, kernel, Mask::full, d.sr, d.sr / 2, steps - 1));
  // fp32 merges (`_SDPAMerger._merge_one`): the first output is cast up and the last cast
  // back (4 + 2 bytes each); every later step updates out and lse with sigmoid / logsigmoid.
  // Compiled: one kernel reading the fp32 out and the bf16 block out and writing out (10 bytes
  // per element). Eager: the cast of the block (6), the subtraction, sigmoid product and
  // update of the fp32 out (12 each), the cat of a half-block update (8): 39 on average.
  const double per_merge = d.x.eager_kernels ? 39.0 : 10.0;
  push(mem(Pass::forward, "cp_merge", MemoryKernel::copy,
           (12.0 + per_merge * static_cast<double>(steps - 1)) * elements));
}

void torch_cp_attention_backward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel) {
  const Pass bi = Pass::backward_input;
  const double elements = head_elements(d);
  const int steps = static_cast<int>(d.c);
  ops.push_back(mem(bi, "cp_kv_stage", MemoryKernel::copy, staging_bytes(d, bi)));
  ops.push_back(coll(bi, "cp_kv_ag", CollectiveKind::all_gather, CommDim::cp, steps,
                     kv_bytes(d) * static_cast<double>(steps), overlapped(d)));
  ops.push_back(attention(bi, "core_attention_bwd", d, kernel, Mask::causal, d.sr, d.sr, 1));
  ops.push_back(attention(bi, "core_attention_ring_bwd", d, kernel, Mask::full, d.sr, d.sr / 2, steps - 1));
  // Every step adds its dK, dV into the fp32 buffer received from the previous rank and sends
  // it on, and adds dQ into its fp32 accumulator. Compiled: one kernel per tensor reading the
  // fp32 sum and the bf16 step gradient and writing the fp32 sum (10 bytes per element of dQ,
  // dK and dV each, 30). Eager: the adds (10 each), the fp32 cat of dK and dV for the send
  // (8 each) and the partial-update cats (8): 54. The final casts to bf16: 6 each, 18.
  const double per_step = d.x.eager_kernels ? 54.0 : 30.0;
  ops.push_back(mem(bi, "cp_grad_accumulate", MemoryKernel::copy,
                    (18.0 + per_step * static_cast<double>(steps)) * elements));
  // P sends of the fp32 dK and dV to the next rank; eager, each runs under the next step's
  // backward and the last one is waited after the loop.
  ops.push_back(p2p(bi, "cp_dkv", CommDim::cp, 2.0 * 4.0 * elements, steps, overlapped(d)));
}

}  // namespace tetra::ops::detail
