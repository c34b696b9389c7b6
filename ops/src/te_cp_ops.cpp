// Core attention under Transformer Engine's context parallelism, as Megatron-Core runs it
// (`cp_comm_type`; `transformer_engine/pytorch/attention/dot_product_attention/
// context_parallel.py` at v2.13: AttnFuncWithCPAndKVP2P, also for "a2a+p2p",
// AttnFuncWithCPAndKVAllGather, AttnFuncWithCPAndQKVOA2A). Every rank holds two of the
// sequence's 2·cp chunks (load-balanced causal split, `get_batch_on_this_cp_rank`), s' = s / cp
// tokens in the layout Megatron keeps them (sbhd).
#include <algorithm>

#include "ops_builders.hpp"

namespace tetra::ops::detail {

using parallel::AttentionKernel;
using parallel::CpComm;

namespace {

/// Elements of Q (and of the attention output) and of K (and of V) on this rank.
double q_elements(const Dims& d) {
  return static_cast<double>(d.b * d.sr) * static_cast<double>(d.nq / d.t) *
         static_cast<double>(d.dh);
}
double kv_elements(const Dims& d) {
  return static_cast<double>(d.b * d.sr) * static_cast<double>(std::max(1LL, d.nkv / d.t) * d.dh);
}

// ---- p2p: the K/V ring (AttnFuncWithCPAndKVP2P) ----

/// Bytes one remote ring step's merge moves per element of the tensor it merges into, on average
/// over the CP ranks: the whole tensor (read the sum and the step's block, write the sum: 3 act)
/// for the steps at or below the rank, its second half (1.5 act) above it.
double te_cp_step_merge_per_element(const Dims& d) { return 2.25 * d.act; }

/// TE's merge of the partial outputs in the forward pass: K and V concatenated into the first
/// send buffer (read + write); the first step's output rescaled into `out`
/// (`flash_attn_fwd_out_correction_init`, read + write), each later step's added
/// (`flash_attn_fwd_out_correction` / `_second_half_out_correction`); the log-sum-exp of each
/// later step merged (`flash_attn_fwd_softmax_lse_correction`: two fp32 reads, one write per
/// query row and head).
double te_cp_forward_merge_bytes(const Dims& d) {
  const double remote = static_cast<double>(d.c - 1);
  const double lse_rows = static_cast<double>(d.b * d.sr) * static_cast<double>(d.nq / d.t);
  const double merges = 2.0 * d.act + remote * te_cp_step_merge_per_element(d);
  return 4.0 * d.act * kv_elements(d) + merges * q_elements(d) + remote * 12.0 * lse_rows;
}

/// TE's accumulation of the gradients in the backward pass: the received K and V copied into the
/// send buffer (read + write); each step's dQ, dK and dV copied (the first, 2 act per element)
/// or added (the later ones) into the dQ buffer and the dKV buffer that travels on.
double te_cp_backward_merge_bytes(const Dims& d) {
  const double remote = static_cast<double>(d.c - 1);
  const double merges = 2.0 * d.act + remote * te_cp_step_merge_per_element(d);
  return 4.0 * d.act * kv_elements(d) + merges * (q_elements(d) + 2.0 * kv_elements(d));
}

/// Step 0 causal on the two local chunks, c − 1 steps of half an s'×s' block without mask, the
/// K/V of the previous step sent on while the current one computes (over `ring`: the CP group,
/// or the ring level of hierarchical CP).
void p2p_forward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel, Run run,
                 CommDim ring = CommDim::cp) {
  auto push = [&](Op op) {
    op.recompute = run == Run::recompute;
    ops.push_back(op);
  };
  const double kv_bytes = 2.0 * d.act * kv_elements(d);
  push(attention(Pass::forward, "core_attention", d, kernel, Mask::causal, d.sr, d.sr, 1));
  push(p2p(Pass::forward, "cp_kv", ring, kv_bytes, static_cast<int>(d.c - 1), Wait::async));
  push(attention(Pass::forward, "core_attention_ring", d, kernel, Mask::full, d.sr, d.sr / 2,
                 static_cast<int>(d.c - 1)));
  push(mem(Pass::forward, "cp_out_correction", MemoryKernel::copy, te_cp_forward_merge_bytes(d)));
}

/// Backward ring: KV at step 0, KV + dKV at steps 1..c−2, dKV at step c−1: 2(c−1)·KV in all.
void p2p_backward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel, CommDim ring = CommDim::cp) {
  const Pass bi = Pass::backward_input;
  const double kv_bytes = 2.0 * d.act * kv_elements(d);
  ops.push_back(attention(bi, "core_attention_bwd", d, kernel, Mask::causal, d.sr, d.sr, 1));
  ops.push_back(p2p(bi, "cp_kv_dkv", ring, 2.0 * kv_bytes, static_cast<int>(d.c - 1), Wait::async));
  ops.push_back(attention(bi, "core_attention_ring_bwd", d, kernel, Mask::full, d.sr, d.sr / 2,
                          static_cast<int>(d.c - 1)));
  ops.push_back(mem(bi, "cp_grad_correction", MemoryKernel::copy, te_cp_backward_merge_bytes(d)));
}

// ---- all_gather: K and V gathered whole (AttnFuncWithCPAndKVAllGather) ----

/// K and V of every rank, gathered: cp · s' rows of each (the nccl-tests size of the two
/// all-gathers, and of the two reduce-scatters of their gradients).
double gathered_kv_bytes(const Dims& d) {
  return 2.0 * d.act * static_cast<double>(d.c) * kv_elements(d);
}

/// The attention of the two local query chunks (s'/2 rows each) against the gathered keys up to
/// their own position (chunk r sees r + 1 chunks, chunk 2cp − 1 − r sees 2cp − r, bottom-right
/// causal): priced as the two diagonal s'/2 blocks under the causal mask and one s'/2 query
/// block against the (2cp − 1)·s'/2 keys before them, the same FLOPs as a causal s' × s rank
/// share (c·s'²/2).
void gathered_attention(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel, Pass pass, Run run,
                        const char* diag, const char* rest) {
  const long long half = d.sr / 2;
  Op a = attention(pass, diag, d, kernel, Mask::causal, half, half, 2);
  Op b = attention(pass, rest, d, kernel, Mask::full, half, (2 * d.c - 1) * half, 1);
  a.recompute = b.recompute = run == Run::recompute;
  ops.push_back(a);
  ops.push_back(b);
}

/// Forward: the local K and V made contiguous (read + write, from their views into the QKV
/// projection), gathered (exposed: "The all-gather is not async, and cannot be overlapped",
/// Megatron-Core `cp_comm_type`), reordered into sequence order (`torch.index_select`, read +
/// write of the gathered copies); each query chunk made contiguous and its output copied into
/// `out` (read + write, 2 act per element of Q each).
void all_gather_forward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel, Run run) {
  auto push = [&](Op op) {
    op.recompute = run == Run::recompute;
    ops.push_back(op);
  };
  const double kv = 2.0 * d.act * kv_elements(d);
  push(mem(Pass::forward, "cp_kv_stage", MemoryKernel::copy, 2.0 * kv + 2.0 * gathered_kv_bytes(d)));
  push(coll(Pass::forward, "cp_kv_ag", CollectiveKind::all_gather, CommDim::cp, static_cast<int>(d.c),
            gathered_kv_bytes(d)));
  gathered_attention(ops, d, kernel, Pass::forward, run, "core_attention", "core_attention_gathered");
  push(mem(Pass::forward, "cp_out_copy", MemoryKernel::copy, 4.0 * d.act * q_elements(d)));
}

/// Backward: K and V gathered and reordered again (only the local ones were saved); zeroed
/// gathered-size dK and dV, each step's dK and dV added into their rows (read + write of the
/// sum, read of the step's: c·s' rows over the two steps), the sums reordered back and
/// reduce-scattered (exposed); each step's dQ copied into its half.
void all_gather_backward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel) {
  const Pass bi = Pass::backward_input;
  ops.push_back(mem(bi, "cp_kv_stage", MemoryKernel::copy, 2.0 * gathered_kv_bytes(d)));
  ops.push_back(coll(bi, "cp_kv_ag", CollectiveKind::all_gather, CommDim::cp, static_cast<int>(d.c),
                     gathered_kv_bytes(d)));
  gathered_attention(ops, d, kernel, bi, Run::first, "core_attention_bwd", "core_attention_gathered_bwd");
  const double grads = gathered_kv_bytes(d) * (1.0 + 3.0 + 2.0) + 2.0 * d.act * q_elements(d);
  ops.push_back(mem(bi, "cp_grad_accumulate", MemoryKernel::copy, grads));
  ops.push_back(coll(bi, "cp_dkv_rs", CollectiveKind::reduce_scatter, CommDim::cp, static_cast<int>(d.c),
                     gathered_kv_bytes(d)));
}

// ---- a2a: Ulysses all-to-alls (AttnFuncWithCPAndQKVOA2A) ----

/// Bytes of Q (or the output) plus K and V on this rank.
double qkv_bytes(const Dims& d) { return d.act * (q_elements(d) + 2.0 * kv_elements(d)); }

/// The heads the attention runs on after the all-to-alls: heads / (tp · cp) of each kind (its
/// sequence, the whole one, is the attention op's argument).
Dims head_split(const Dims& d) {
  Dims h = d;
  h.nq = d.nq / d.c;
  h.nkv = std::max(1LL, d.nkv / d.c);
  return h;
}

/// The all-to-alls around an attention that runs on split heads, over `dim` (`group` ranks):
/// Q, K and V split by head and made contiguous (read + write), exchanged
/// (`flash_attn_a2a_communicate`, before_attn: one all-to-all each, waited before the attention
/// needs them), the received chunks put in sequence order (`torch.index_select`, read + write);
/// after the attention the output reordered, exchanged back and made contiguous again. Backward
/// mirrors them: the output gradient in as the output went, dQ, dK and dV back as Q, K and V
/// came.
struct HeadExchange {
  CommDim dim = CommDim::cp;
  int group = 1;
};

void exchange_in(std::vector<Op>& ops, const Dims& d, HeadExchange x, Pass pass, Run run) {
  const bool fwd = pass == Pass::forward;
  const double bytes = fwd ? qkv_bytes(d) : d.act * q_elements(d);
  Op stage = mem(pass, fwd ? "cp_qkv_stage" : "cp_dout_stage", MemoryKernel::copy, 4.0 * bytes);
  Op a2a = coll(pass, fwd ? "cp_qkv_a2a" : "cp_dout_a2a", CollectiveKind::all_to_all, x.dim, x.group, bytes);
  stage.recompute = a2a.recompute = run == Run::recompute;
  ops.push_back(stage);
  ops.push_back(a2a);
}

void exchange_out(std::vector<Op>& ops, const Dims& d, HeadExchange x, Pass pass, Run run) {
  const bool fwd = pass == Pass::forward;
  const double bytes = fwd ? d.act * q_elements(d) : qkv_bytes(d);
  Op stage = mem(pass, fwd ? "cp_out_stage" : "cp_dqkv_stage", MemoryKernel::copy, 4.0 * bytes);
  Op a2a = coll(pass, fwd ? "cp_out_a2a" : "cp_dqkv_a2a", CollectiveKind::all_to_all, x.dim, x.group, bytes);
  stage.recompute = a2a.recompute = run == Run::recompute;
  ops.push_back(stage);
  ops.push_back(a2a);
}

/// Forward: the exchanges over the whole CP group around the causal attention over the whole
/// sequence.
void a2a_forward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel, Run run) {
  const HeadExchange x{CommDim::cp, static_cast<int>(d.c)};
  exchange_in(ops, d, x, Pass::forward, run);
  Op attn = attention(Pass::forward, "core_attention", head_split(d), kernel, Mask::causal, d.s, d.s, 1);
  attn.recompute = run == Run::recompute;
  ops.push_back(attn);
  exchange_out(ops, d, x, Pass::forward, run);
}

void a2a_backward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel) {
  const Pass bi = Pass::backward_input;
  const HeadExchange x{CommDim::cp, static_cast<int>(d.c)};
  exchange_in(ops, d, x, bi, Run::first);
  ops.push_back(attention(bi, "core_attention_bwd", head_split(d), kernel, Mask::causal, d.s, d.s, 1));
  exchange_out(ops, d, x, bi, Run::first);
}

// ---- a2a_p2p: the all-to-alls inside each group of cp_a2a ranks, then the ring over the groups
// (AttnFuncWithCPAndKVP2P with cp_group = [a2a group, p2p group]) ----

/// What the ring sees after the all-to-all level: cp_a2a times the tokens (the chunks of the
/// group's ranks, put in ring order by `get_seq_chunk_ids_for_reordering_before_attn`), the
/// heads split cp_a2a ways, cp / cp_a2a ranks.
Dims ring_level(const Dims& d) {
  Dims r = d;
  r.c = d.c / d.ca;
  r.sr = d.sr * d.ca;
  r.nq = d.nq / d.ca;
  r.nkv = std::max(1LL, d.nkv / d.ca);
  return r;
}

/// The exchanges of a2a inside the all-to-all group around the ring over the groups at the
/// gathered length (`flash_attn_a2a_communicate` before and after AttnFuncWithCPAndKVP2P's ring).
void a2a_p2p_forward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel, Run run) {
  const HeadExchange x{CommDim::cp_a2a, static_cast<int>(d.ca)};
  exchange_in(ops, d, x, Pass::forward, run);
  p2p_forward(ops, ring_level(d), kernel, run, CommDim::cp_ring);
  exchange_out(ops, d, x, Pass::forward, run);
}

void a2a_p2p_backward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel) {
  const HeadExchange x{CommDim::cp_a2a, static_cast<int>(d.ca)};
  exchange_in(ops, d, x, Pass::backward_input, Run::first);
  p2p_backward(ops, ring_level(d), kernel, CommDim::cp_ring);
  exchange_out(ops, d, x, Pass::backward_input, Run::first);
}

}  // namespace

void te_cp_attention_forward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel, Run run) {
  switch (d.cp_comm) {
    case CpComm::p2p: return p2p_forward(ops, d, kernel, run);
    case CpComm::all_gather: return all_gather_forward(ops, d, kernel, run);
    case CpComm::a2a: return a2a_forward(ops, d, kernel, run);
    case CpComm::a2a_p2p: return a2a_p2p_forward(ops, d, kernel, run);
  }
}

void te_cp_attention_backward(std::vector<Op>& ops, const Dims& d, AttentionKernel kernel) {
  switch (d.cp_comm) {
    case CpComm::p2p: return p2p_backward(ops, d, kernel);
    case CpComm::all_gather: return all_gather_backward(ops, d, kernel);
    case CpComm::a2a: return a2a_backward(ops, d, kernel);
    case CpComm::a2a_p2p: return a2a_p2p_backward(ops, d, kernel);
  }
}

}  // namespace tetra::ops::detail
