// Op list of one layer on one rank (ops/include/tetra/ops/ops.hpp): shapes from Megatron's
// column/row-parallel linears (`megatron/core/tensor_parallel/layers.py`), collectives
// (Megatron-LM `layers.py` / `mappings.py`, TransformerEngine `context_parallel.py`,
// Megatron-LM `schedules.py` and `param_and_grad_buffer.py`), and the step FLOPs checked
// against Megatron's formula (`megatron/training/training.py` num_floating_point_operations).
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <algorithm>
#include <string_view>

#include "tetra/parallel/flops.hpp"
#include "tetra/ops/ops.hpp"
#include "tetra/parallel/params.hpp"
#include "tetra/model/presets.hpp"

using tetra::test::approx;
using namespace tetra::model;
using namespace tetra::parallel;
using namespace tetra::ops;

namespace {

Model preset(const char* name) {
  auto m = find_model_preset(name);
  REQUIRE(m);
  return *m;
}

const Op* find(const std::vector<Op>& ops, std::string_view name, Pass pass, bool recompute = false) {
  for (const Op& op : ops) {
    if (name == op.name && op.pass == pass && op.recompute == recompute) return &op;
  }
  return nullptr;
}

// A torchtitan run: PyTorch-native (FSDP2) training, compiled unless a test says otherwise.
Training torchtitan_training(int seq_len, bool compile = true) {
  Training tr;
  tr.seq_len = seq_len;
  tr.framework = Framework::fsdp;
  tr.torch.compile = compile;
  return tr;
}

/// One layer of Llama 3.1 8B at seq 32768, tp 2 (sp), cp 4 under Transformer Engine's `comm`
/// (a2a+p2p with an all-to-all level of `cp_a2a` ranks): s' = 8192 tokens on a rank, 32/2 = 16
/// query heads and 8/2 = 4 KV heads of 128.
std::vector<Op> te_cp_layer(CpComm comm, int cp_a2a = 1) {
  Training tr;
  tr.seq_len = 32768;
  Layout l;
  l.tp = 2;
  l.cp = 4;
  l.sp = true;
  l.cp_comm = comm;
  l.cp_a2a = cp_a2a;
  return layer_ops(preset("llama3.1-8b"), tr, l);
}

int count(const std::vector<Op>& ops, CollectiveKind kind, Pass pass, bool recompute = false) {
  int n = 0;
  for (const Op& op : ops) {
    if (op.kind == OpKind::collective && op.coll == kind && op.pass == pass && op.recompute == recompute) {
      n += op.count;
    }
  }
  return n;
}

/// FLOPs of the op list over one step, summed over every rank: each of the tp·cp·dp ranks of a
/// stage runs `micro_batches` x (its layers x layer FLOPs + head FLOPs on the last stage).
double step_flops_from_ops(const Model& m, const Training& tr, const Layout& l, bool r060) {
  const auto layer = layer_ops(m, tr, l);
  const auto head = head_ops(m, tr, l);
  auto sum = [&](const std::vector<Op>& ops) {
    double s = 0;
    for (const Op& op : ops) {
      if (op.recompute) continue;
      // r0.6.0 counts the full s x s attention matrix: twice the causal-halved count (also
      // for the CP ring's half blocks, which make up the causal share of the matrix).
      const double f = op.total_flops();
      s += (r060 && op.kind == OpKind::attention) ? 2.0 * f : f;
    }
    return s;
  };
  const auto stages = stage_layers(m, l);
  const double ranks_per_stage = static_cast<double>(l.tp) * l.cp * l.dp;
  const double mb = micro_batches(l, tr);
  double total = 0;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    double per_mb = stages[i] * sum(layer);
    if (i + 1 == stages.size()) per_mb += sum(head);
    total += ranks_per_stage * mb * per_mb;
  }
  return total;
}

}  // namespace

TEST_SUITE("llama") {
  TEST_CASE("Step FLOPs of the op list equal Megatron's formula (num_floating_point_operations)") {
    struct Case {
      const char* model;
      Layout layout;
      int seq;
      int gbs;
    };
    auto layout = [](int tp, int cp, int pp, int dp, int mbs, bool sp, Recompute rc) {
      Layout l;
      l.tp = tp;
      l.cp = cp;
      l.pp = pp;
      l.dp = dp;
      l.mbs = mbs;
      l.sp = sp;
      l.recompute = rc;
      return l;
    };
    const Case cases[] = {
        {"llama3.1-8b", layout(1, 1, 1, 8, 1, false, Recompute::none), 8192, 64},
        {"llama3.1-8b", layout(2, 2, 2, 2, 2, true, Recompute::selective), 8192, 32},
        {"llama3.1-70b", layout(8, 1, 4, 4, 1, true, Recompute::none), 4096, 128},
        {"llama3.1-70b", layout(8, 4, 2, 1, 1, true, Recompute::full), 32768, 8},
        {"llama2-7b", layout(4, 1, 2, 2, 4, false, Recompute::none), 4096, 64},
        {"llama3.1-405b", layout(8, 2, 8, 2, 1, true, Recompute::none), 8192, 32},
        {"gpt3-175b", layout(8, 1, 8, 2, 1, true, Recompute::selective), 2048, 64},
    };
    for (const Case& c : cases) {
      CAPTURE(c.model);
      CAPTURE(c.layout.tp);
      CAPTURE(c.layout.cp);
      const Model m = preset(c.model);
      Training tr;
      tr.seq_len = c.seq;
      tr.global_batch = c.gbs;
      // Megatron multiplies by the padded vocabulary (`_vocab_size_with_padding`).
      const long long v = padded_vocab(m, c.layout.tp);
      CHECK(step_flops_from_ops(m, tr, c.layout, false) ==
            approx(megatron_step_flops(m, c.seq, c.gbs, v)).epsilon(1e-9));
      CHECK(step_flops_from_ops(m, tr, c.layout, true) ==
            approx(megatron_r060_step_flops(m, c.seq, c.gbs, v)).epsilon(1e-9));
    }
  }

  TEST_CASE("Llama-3.1-70B, TP 8 + SP: GEMM shapes (Megatron layers.py)") {
    const Model m = preset("llama3.1-70b");  // h 8192, F 28672, 64 heads, 8 kv heads, d 128
    Training tr;
    tr.seq_len = 8192;
    Layout l;
    l.tp = 8;
    l.sp = true;
    const auto ops = layer_ops(m, tr, l);
    // T = s·b = 8192 tokens after the SP all-gather.
    const Op* qkv = find(ops, "qkv", Pass::forward);
    REQUIRE(qkv);
    CHECK(qkv->m == 8192);
    CHECK(qkv->n == (64 + 2 * 8) * 128 / 8);  // 1280
    CHECK(qkv->k == 8192);
    CHECK(qkv->flops == approx(2.0 * 8192 * 1280 * 8192));
    const Op* fc1 = find(ops, "fc1", Pass::forward);
    REQUIRE(fc1);
    CHECK(fc1->n == 2 * 28672 / 8);  // gated: 7168
    const Op* fc2_dgrad = find(ops, "fc2_dgrad", Pass::backward_input);
    REQUIRE(fc2_dgrad);
    CHECK(fc2_dgrad->m == 8192);
    CHECK(fc2_dgrad->n == 28672 / 8);
    CHECK(fc2_dgrad->k == 8192);
    const Op* fc2_wgrad = find(ops, "fc2_wgrad", Pass::backward_weight);
    REQUIRE(fc2_wgrad);
    CHECK(fc2_wgrad->m == 8192);       // out = h
    CHECK(fc2_wgrad->n == 28672 / 8);  // in = F/t
    CHECK(fc2_wgrad->k == 8192);       // T
    const Op* attn = find(ops, "core_attention", Pass::forward);
    REQUIRE(attn);
    CHECK(attn->attn.heads == 8);
    CHECK(attn->attn.kv_heads == 1);
    CHECK(attn->attn.seq_q == 8192);
    // 4·b·s²·heads·d / 2 = 4 * 8192^2 * 8 * 128 / 2
    CHECK(attn->flops == approx(4.0 * 8192.0 * 8192.0 * 8 * 128 / 2));
    // Norms and residual adds run on the SP shard: RMSNorm reads + writes 2·(s/t)·h bf16.
    const Op* norm = find(ops, "input_norm", Pass::forward);
    REQUIRE(norm);
    CHECK(norm->bytes == approx(2.0 * 2.0 * 1024 * 8192));
  }

  TEST_CASE("TP collectives with and without SP (Megatron layers.py, mappings.py)") {
    const Model m = preset("llama3.1-8b");
    Training tr;
    tr.seq_len = 4096;
    Layout l;
    l.tp = 4;
    l.mbs = 2;
    SUBCASE("with SP: fwd 2 AG + 2 RS; bwd 4 AG + 2 RS") {
      l.sp = true;
      const auto ops = layer_ops(m, tr, l);
      CHECK(count(ops, CollectiveKind::all_gather, Pass::forward) == 2);
      CHECK(count(ops, CollectiveKind::reduce_scatter, Pass::forward) == 2);
      CHECK(count(ops, CollectiveKind::all_gather, Pass::backward_input) == 4);
      CHECK(count(ops, CollectiveKind::reduce_scatter, Pass::backward_input) == 2);
      CHECK(count(ops, CollectiveKind::all_reduce, Pass::forward) == 0);
      // S = 2·s·b·h bytes (the full gathered buffer).
      const Op* ag = find(ops, "tp_ag", Pass::forward);
      REQUIRE(ag);
      CHECK(ag->bytes == approx(2.0 * 4096 * 2 * 4096));
      CHECK(ag->group == 4);
      CHECK_FALSE(ag->async);
      // Column dgrad reduce-scatter overlaps the wgrad GEMM that follows it.
      const Op* rs = find(ops, "tp_rs_dgrad", Pass::backward_input);
      REQUIRE(rs);
      CHECK(rs->async);
      const auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& o) { return &o == rs; });
      REQUIRE(it + 1 != ops.end());
      CHECK(std::string_view((it + 1)->name).find("wgrad") != std::string_view::npos);
    }
    SUBCASE("without SP: 2 AR forward, 2 AR backward") {
      l.sp = false;
      const auto ops = layer_ops(m, tr, l);
      CHECK(count(ops, CollectiveKind::all_reduce, Pass::forward) == 2);
      CHECK(count(ops, CollectiveKind::all_reduce, Pass::backward_input) == 2);
      CHECK(count(ops, CollectiveKind::all_gather, Pass::forward) == 0);
      // Megatron overlaps the dgrad all-reduce with the wgrad GEMM.
      const Op* ar = find(ops, "tp_ar_dgrad", Pass::backward_input);
      REQUIRE(ar);
      CHECK(ar->async);
    }
    SUBCASE("eager trainer: the dgrad reduction blocks (Aleph-Alpha/scaling linear/utils.py)") {
      tr.framework = Framework::deepspeed;
      for (const bool sp : {false, true}) {
        l.sp = sp;
        const auto ops = layer_ops(m, tr, l);
        const Op* red = find(ops, sp ? "tp_rs_dgrad" : "tp_ar_dgrad", Pass::backward_input);
        REQUIRE(red);
        CHECK_FALSE(red->async);
      }
    }
    SUBCASE("full recompute repeats the forward collectives") {
      l.sp = true;
      l.recompute = Recompute::full;
      const auto ops = layer_ops(m, tr, l);
      CHECK(count(ops, CollectiveKind::all_gather, Pass::forward, true) == 2);
      CHECK(count(ops, CollectiveKind::reduce_scatter, Pass::forward, true) == 2);
      CHECK(sum_flops(ops, true) == approx(sum_flops(ops) * 4.0 / 3.0).epsilon(1e-12));
    }
    SUBCASE("selective recompute re-runs the core attention forward only") {
      l.sp = true;
      l.recompute = Recompute::selective;
      const auto ops = layer_ops(m, tr, l);
      const Op* re = find(ops, "core_attention", Pass::forward, true);
      REQUIRE(re);
      const Op* fw = find(ops, "core_attention", Pass::forward);
      REQUIRE(fw);
      CHECK(sum_flops(ops, true) - sum_flops(ops) == approx(fw->flops));
    }
  }

  TEST_CASE("CP ring: c − 1 KV exchanges of 2·b·s'·(n_kv/t)·d·2 bytes and the merges (TE AttnFuncWithCPAndKVP2P)") {
    const Model m = preset("llama3.1-70b");
    Training tr;
    tr.seq_len = 32768;
    Layout l;
    l.tp = 8;
    l.cp = 4;
    l.sp = true;
    const auto ops = layer_ops(m, tr, l);
    const Op* kv = find(ops, "cp_kv", Pass::forward);
    REQUIRE(kv);
    CHECK(kv->count == 3);
    CHECK(kv->async);
    // s' = 8192, n_kv/t = 1: 2 (K and V) * 8192 * 1 * 128 * 2 bytes = 4 MiB
    CHECK(kv->bytes == approx(2.0 * 8192 * 128 * 2));
    const Op* bwd = find(ops, "cp_kv_dkv", Pass::backward_input);
    REQUIRE(bwd);
    CHECK(bwd->bytes * bwd->count == approx(2.0 * kv->bytes * kv->count));
    // Causal work per rank = total / c: step 0 causal s'², then c − 1 half blocks.
    const double total = 4.0 * 32768.0 * 32768.0 * 8 * 128 / 2;
    double per_rank = 0;
    for (const Op& op : ops) {
      if (op.kind == OpKind::attention && op.pass == Pass::forward) per_rank += op.total_flops();
    }
    CHECK(per_rank == approx(total / 4));
    // The merges (context_parallel.py): 64/8 = 8 query heads and 8/8 = 1 KV head of 128 on a
    // rank; Q / output elements q = 8192 * 8 * 128 = 8,388,608, K (or V) k = 8192 * 128.
    const double q = 8388608.0;
    const double k = 1048576.0;
    // Forward: K and V into the send buffer (4 x 2 B x k), the first output rescaled into out
    // (2 x 2 B x q), 3 remote steps of 2.25 x 2 B x q on average over the ranks (whole output
    // at or below the rank, second half above), and 3 log-sum-exp merges of 12 B per query row
    // and head (8192 x 8).
    const Op* fwd = find(ops, "cp_out_correction", Pass::forward);
    REQUIRE(fwd);
    CHECK(fwd->kind == OpKind::memory_bound);
    CHECK(fwd->bytes == approx(8.0 * k + (4.0 + 3 * 4.5) * q + 3 * 12.0 * 8192 * 8));
    // Backward: the received KV into the send buffer (8 B x k), then dQ, dK and dV copied at the
    // first step and added at the 3 later ones: (4 + 3 x 4.5) x (q + 2k).
    const Op* grads = find(ops, "cp_grad_correction", Pass::backward_input);
    REQUIRE(grads);
    CHECK(grads->bytes == approx(8.0 * k + (4.0 + 3 * 4.5) * (q + 2 * k)));
    // No ring, no merge.
    l.cp = 1;
    CHECK(find(layer_ops(m, tr, l), "cp_out_correction", Pass::forward) == nullptr);
  }

  TEST_CASE("cp_comm_type all_gather: K and V gathered and their gradients reduce-scattered, both exposed (TE AttnFuncWithCPAndKVAllGather)") {
    const auto ops = te_cp_layer(CpComm::all_gather);
    CHECK(find(ops, "cp_kv", Pass::forward) == nullptr);  // no ring
    const double q = 8192.0 * 16 * 128;  // 16,777,216 elements of Q on a rank
    const double k = 8192.0 * 4 * 128;   // 4,194,304 of K (and of V)
    // The gathered K and V of the 4 ranks, bf16: 2 x 4 x k x 2 B = 64 MiB, blocking.
    const Op* ag = find(ops, "cp_kv_ag", Pass::forward);
    REQUIRE(ag);
    CHECK(ag->coll == CollectiveKind::all_gather);
    CHECK(ag->group == 4);
    CHECK_FALSE(ag->async);
    CHECK(ag->bytes == approx(2.0 * 4 * k * 2));
    CHECK(ag->bytes == approx(64.0 * 1048576));
    // Forward copies: the local K and V made contiguous (4 B per element of each) and the
    // gathered ones reordered (2 x 64 MiB); each query half staged and its output copied
    // (4 x 2 B x q).
    const Op* stage = find(ops, "cp_kv_stage", Pass::forward);
    REQUIRE(stage);
    CHECK(stage->bytes == approx(2.0 * (2.0 * 2 * k) + 2.0 * 64 * 1048576));
    const Op* out = find(ops, "cp_out_copy", Pass::forward);
    REQUIRE(out);
    CHECK(out->bytes == approx(8.0 * q));
    // Work: chunks r and 7 − r of s'/2 = 4096 queries see 8 + 1 = 9 chunks of keys in all;
    // the two diagonal blocks causal, the rest (7 chunks) full: the rank's causal share,
    // 4 x 32768² x 16 x 128 / 2 / 4.
    double fwd = 0;
    for (const Op& op : ops) {
      if (op.kind == OpKind::attention && op.pass == Pass::forward) fwd += op.total_flops();
    }
    CHECK(fwd == approx(4.0 * 32768.0 * 32768.0 * 16 * 128 / 2 / 4));
    const Op* rest = find(ops, "core_attention_gathered", Pass::forward);
    REQUIRE(rest);
    CHECK(rest->attn.seq_q == 4096);
    CHECK(rest->attn.seq_kv == 7 * 4096);
    CHECK_FALSE(rest->attn.causal);
    // Backward: gathered again, gradients reduce-scattered (the gathered size, blocking); the
    // accumulation zeroes, adds into and reorders the gathered-size dK and dV (1 + 3 + 2 times
    // 64 MiB) and copies dQ into its halves (2 x 2 B x q).
    CHECK(find(ops, "cp_kv_ag", Pass::backward_input) != nullptr);
    const Op* rs = find(ops, "cp_dkv_rs", Pass::backward_input);
    REQUIRE(rs);
    CHECK(rs->coll == CollectiveKind::reduce_scatter);
    CHECK_FALSE(rs->async);
    CHECK(rs->bytes == approx(64.0 * 1048576));
    const Op* acc = find(ops, "cp_grad_accumulate", Pass::backward_input);
    REQUIRE(acc);
    CHECK(acc->bytes == approx(6.0 * 64 * 1048576 + 4.0 * q));
  }

  TEST_CASE("cp_comm_type a2a: Ulysses all-to-alls around a full-sequence attention on heads / (tp x cp) (TE AttnFuncWithCPAndQKVOA2A)") {
    const auto ops = te_cp_layer(CpComm::a2a);
    const double q = 8192.0 * 16 * 128;
    const double k = 8192.0 * 4 * 128;
    // Q, K and V exchanged (the rank's buffers, bf16), blocking; then the output.
    const Op* in = find(ops, "cp_qkv_a2a", Pass::forward);
    REQUIRE(in);
    CHECK(in->coll == CollectiveKind::all_to_all);
    CHECK(in->group == 4);
    CHECK_FALSE(in->async);
    CHECK(in->bytes == approx(2.0 * (q + 2 * k)));
    const Op* out = find(ops, "cp_out_a2a", Pass::forward);
    REQUIRE(out);
    CHECK(out->bytes == approx(2.0 * q));
    // The attention: the whole 32768-token sequence, 16/4 = 4 query heads and 4/4 = 1 KV head,
    // causal: the same FLOPs as the ring's share.
    const Op* attn = find(ops, "core_attention", Pass::forward);
    REQUIRE(attn);
    CHECK(attn->attn.seq_q == 32768);
    CHECK(attn->attn.seq_kv == 32768);
    CHECK(attn->attn.heads == 4);
    CHECK(attn->attn.kv_heads == 1);
    CHECK(attn->attn.causal);
    CHECK(attn->total_flops() == approx(4.0 * 32768.0 * 32768.0 * 16 * 128 / 2 / 4));
    // Copies: each tensor split by head and reordered after the exchange (4 B per element).
    const Op* stage = find(ops, "cp_qkv_stage", Pass::forward);
    REQUIRE(stage);
    CHECK(stage->bytes == approx(4.0 * 2.0 * (q + 2 * k)));
    // Backward mirrors it: the output gradient in, dQ, dK and dV back.
    const Op* dout = find(ops, "cp_dout_a2a", Pass::backward_input);
    const Op* dqkv = find(ops, "cp_dqkv_a2a", Pass::backward_input);
    REQUIRE(dout);
    REQUIRE(dqkv);
    CHECK(dout->bytes == approx(2.0 * q));
    CHECK(dqkv->bytes == approx(2.0 * (q + 2 * k)));
    // Nothing of the ring.
    CHECK(find(ops, "cp_kv", Pass::forward) == nullptr);
    CHECK(find(ops, "cp_out_correction", Pass::forward) == nullptr);
  }

  TEST_CASE("cp_comm_type a2a+p2p: all-to-alls inside groups of cp_a2a ranks, the ring over the groups (TE AttnFuncWithCPAndKVP2P with cp_group = [a2a, p2p])") {
    // Llama 3.1 8B at seq 32768, tp 2 (sp), cp 4 = 2 (all-to-all) x 2 (ring): s' = 8192 tokens
    // and 16 query / 4 KV heads of 128 on a rank before the all-to-all, 16384 tokens and 8 / 2
    // heads after it.
    const auto ops = te_cp_layer(CpComm::a2a_p2p, 2);
    const double q = 8192.0 * 16 * 128;
    const double k = 8192.0 * 4 * 128;
    // The all-to-all level: Q, K and V (bf16) over the 2 ranks of the group, blocking, before
    // the ring; the output after it.
    const Op* in = find(ops, "cp_qkv_a2a", Pass::forward);
    REQUIRE(in);
    CHECK(in->coll == CollectiveKind::all_to_all);
    CHECK(in->dim == CommDim::cp_a2a);
    CHECK(in->group == 2);
    CHECK_FALSE(in->async);
    CHECK(in->bytes == approx(2.0 * (q + 2 * k)));
    const Op* out = find(ops, "cp_out_a2a", Pass::forward);
    REQUIRE(out);
    CHECK(out->dim == CommDim::cp_a2a);
    CHECK(out->bytes == approx(2.0 * q));
    // The ring over cp / cp_a2a = 2 groups: one K/V exchange of 2 x 16384 x 2 x 128 x 2 bytes,
    // the same bytes as the rank held before the all-to-all (2 x 2 B x k), under the attention.
    const Op* kv = find(ops, "cp_kv", Pass::forward);
    REQUIRE(kv);
    CHECK(kv->kind == OpKind::p2p);
    CHECK(kv->dim == CommDim::cp_ring);
    CHECK(kv->count == 1);
    CHECK(kv->async);
    CHECK(kv->bytes == approx(4.0 * k));
    // Step 0 causal over the gathered 16384 tokens on 8 heads, then one half block.
    const Op* local = find(ops, "core_attention", Pass::forward);
    REQUIRE(local);
    CHECK(local->attn.seq_q == 16384);
    CHECK(local->attn.seq_kv == 16384);
    CHECK(local->attn.heads == 8);
    CHECK(local->attn.kv_heads == 2);
    CHECK(local->attn.causal);
    const Op* ring = find(ops, "core_attention_ring", Pass::forward);
    REQUIRE(ring);
    CHECK(ring->count == 1);
    CHECK(ring->attn.seq_q == 16384);
    CHECK(ring->attn.seq_kv == 8192);
    // The rank's share of the causal attention, as under the plain ring: 4 x 32768^2 x 16
    // heads (of the TP rank) x 128 / 2 over the cp = 4 ranks.
    double per_rank = 0;
    for (const Op& op : ops) {
      if (op.kind == OpKind::attention && op.pass == Pass::forward) per_rank += op.total_flops();
    }
    CHECK(per_rank == approx(4.0 * 32768.0 * 32768.0 * 16 * 128 / 2 / 4));
    // Backward mirrors it: the output gradient in, the ring's K/V and dK/dV, dQ, dK, dV back.
    const Op* dout = find(ops, "cp_dout_a2a", Pass::backward_input);
    const Op* dkv = find(ops, "cp_kv_dkv", Pass::backward_input);
    const Op* dqkv = find(ops, "cp_dqkv_a2a", Pass::backward_input);
    REQUIRE(dout);
    REQUIRE(dkv);
    REQUIRE(dqkv);
    CHECK(dout->bytes == approx(2.0 * q));
    CHECK(dkv->dim == CommDim::cp_ring);
    CHECK(dkv->bytes * dkv->count == approx(2.0 * kv->bytes));
    CHECK(dqkv->bytes == approx(2.0 * (q + 2 * k)));
  }

  TEST_CASE("PP boundary and DP gradient buckets (Megatron schedules.py, param_and_grad_buffer.py)") {
    const Model m = preset("llama3.1-8b");
    Training tr;
    tr.seq_len = 8192;
    Layout l;
    l.tp = 2;
    l.pp = 2;
    l.dp = 8;
    l.sp = true;
    // [s/t, b, h] bf16: 4096 * 4096 * 2
    CHECK(pp_boundary_bytes(m, tr, l) == approx(4096.0 * 4096 * 2));
    const auto stages = stage_params(m, l, tr.seq_len);
    const double p0 = static_cast<double>(stages[0].params);
    SUBCASE("distributed optimizer: RS of fp32 grads + AG of bf16 params in 40M buckets") {
      const auto ops = dp_gradient_ops(m, tr, l, 0);
      double rs = 0, ag = 0;
      int buckets = 0;
      for (const Op& op : ops) {
        CHECK(op.group == 8);
        if (op.coll == CollectiveKind::reduce_scatter) {
          rs += op.bytes * op.count;
          buckets += op.count;
        }
        if (op.coll == CollectiveKind::all_gather) ag += op.bytes * op.count;
      }
      CHECK(rs == approx(4.0 * p0));
      CHECK(ag == approx(2.0 * p0));
      // bucket = max(40e6, 1e6·8) = 40e6 parameters
      CHECK(buckets == static_cast<int>((p0 + 40e6 - 1) / 40e6));
    }
    SUBCASE("a stage of 10^17 parameters: at most 100,000 buckets, every byte still reduced") {
      Model huge = m;
      huge.hidden = 10000000;
      huge.ffn_hidden = 10000000;
      const double big = static_cast<double>(stage_params(huge, l, tr.seq_len)[0].params);
      REQUIRE(big / 40e6 > 100000.0);
      const auto ops = dp_gradient_ops(huge, tr, l, 0);
      double rs = 0;
      long long buckets = 0;
      for (const Op& op : ops) {
        if (op.coll != CollectiveKind::reduce_scatter) continue;
        rs += op.bytes * op.count;
        buckets += op.count;
      }
      CHECK(buckets <= 100001);
      CHECK(rs == approx(4.0 * big));
    }
    SUBCASE("fp8_param_gather: FP8 linear weights, MXFP8 ones through the bf16 gradient buffer") {
      // Llama-3.1-8B layer: 218,103,808 parameters, 8,192 of them the two norms (h = 4096).
      // Current scaling gathers the linears in FP8 (1 byte) and the norms in bf16; MXFP8 gathers
      // the linears in the gradient buffer's dtype and casts after the gather (Megatron-Core
      // param_and_grad_buffer.py _post_param_sync, reuse_grad_buf_for_mxfp8_param_ag).
      const double layer = 218103808.0 + 8192.0, norms = 8192.0;
      tr.fp8 = {Fp8Recipe::current, true};
      tr.grad_dtype = Precision::bf16;
      const double cs = (layer - norms) / layer * 1.0 + norms / layer * 2.0;
      CHECK(gathered_layer_param_bytes(m, tr, 1) == approx(cs * layer));
      tr.fp8.recipe = Fp8Recipe::mxfp8;
      CHECK(gathered_layer_param_bytes(m, tr, 1) == approx(2.0 * layer));
      tr.grad_dtype = Precision::fp32;
      const double fp32_buffer = (layer - norms) / layer * 4.0 + norms / layer * 2.0;
      CHECK(gathered_layer_param_bytes(m, tr, 2) == approx(fp32_buffer * layer / 2.0));
      // Megatron-FSDP (zero_stage 3) gathers the MXFP8 shards themselves.
      tr.zero_stage = 3;
      CHECK(gathered_layer_param_bytes(m, tr, 1) ==
            approx(((layer - norms) * (1.0 + 1.0 / 32.0) + norms * 2.0)));
    }
    SUBCASE("no distributed optimizer: all-reduce, bf16 when grad_dtype = bf16") {
      tr.zero_stage = 0;
      tr.grad_dtype = Precision::bf16;
      const auto ops = dp_gradient_ops(m, tr, l, 1);
      double ar = 0;
      for (const Op& op : ops) {
        CHECK(op.coll == CollectiveKind::all_reduce);
        ar += op.bytes * op.count;
      }
      CHECK(ar == approx(2.0 * static_cast<double>(stages[1].params)));
    }
    SUBCASE("optimizer: ~30 bytes per local parameter shard") {
      const auto ops = optimizer_ops(m, tr, l, 0);
      REQUIRE(ops.size() == 2);
      CHECK(ops[1].bytes == approx(30.0 * p0 / 8));
    }
  }
}

TEST_SUITE("llama") {
  TEST_CASE("Embedding and LM head ops (first / last stage)") {
    const Model m = preset("llama3.1-8b");
    Training tr;
    tr.seq_len = 4096;
    Layout l;
    l.tp = 8;
    l.sp = true;
    const auto head = head_ops(m, tr, l);
    const Op* lm = find(head, "lm_head", Pass::forward);
    REQUIRE(lm);
    // padded vocab 128256 -> 129024 at t = 8 (`_vocab_size_with_padding`): 16128 columns per rank.
    CHECK(lm->n == 129024 / 8);
    CHECK(lm->m == 4096);
    CHECK(lm->k == 4096);
    CHECK(find(head, "lm_head_wgrad", Pass::backward_weight) != nullptr);
    CHECK(count(head, CollectiveKind::all_reduce, Pass::forward) == 3);  // max, sum-exp, target
    const auto emb = embedding_ops(m, tr, l);
    // Vocab-parallel embedding with SP: reduce-scatter of [s, b, h] in forward.
    CHECK(count(emb, CollectiveKind::reduce_scatter, Pass::forward) == 1);
    CHECK(sum_flops(emb) == 0);
  }

  TEST_CASE("ZeRO-3 gathers each layer's parameters in forward and backward") {
    const Model m = preset("llama3.1-8b");
    Training tr;
    tr.seq_len = 4096;
    tr.zero_stage = 3;
    Layout l;
    l.dp = 8;
    const auto ops = layer_ops(m, tr, l);
    const Op* ag = find(ops, "zero3_param_ag", Pass::forward);
    REQUIRE(ag);
    CHECK(ag->dim == CommDim::dp_cp);
    CHECK(ag->group == 8);
    // bf16 parameters of one layer: 2 * 218,112,000 bytes
    CHECK(ag->bytes == approx(2.0 * 218112000));
    CHECK(find(ops, "zero3_param_ag", Pass::backward_input) != nullptr);
    const auto grads = dp_gradient_ops(m, tr, l, 0);
    REQUIRE_FALSE(grads.empty());
    CHECK(grads[0].coll == CollectiveKind::reduce_scatter);
    CHECK(grads[0].count == 32);
  }
}

TEST_SUITE("llama") {
  // Framework kernel sets (ops.cpp): eager PyTorch modules for framework = deepspeed / fsdp
  // (`huggingface/transformers: models/llama/modeling_llama.py`, `Aleph-Alpha/scaling`), the
  // Megatron fused kernels otherwise. Llama-3.1-8B, s = 2048, b = 1, t = 1:
  // T·h = 2048·4096 = 8,388,608; (nq + nkv)·d·T = 40·128·2048 = 10,485,760;
  // T·F = 2048·14336 = 29,360,128; scores b·nq·s² = 32·2048² = 134,217,728.
  TEST_CASE("Eager kernels: RMSNorm fp32 chain, rotary, SwiGLU, torch softmax (deepspeed)") {
    const Model m = preset("llama3.1-8b");
    Training tr;
    tr.seq_len = 2048;
    Layout l;
    SUBCASE("megatron: fused kernels") {
      const auto ops = layer_ops(m, tr, l);
      CHECK(find(ops, "input_norm", Pass::forward)->bytes == approx(4.0 * 8388608));
      CHECK(find(ops, "rope", Pass::forward)->bytes == approx(4.0 * 10485760));
      CHECK(find(ops, "swiglu", Pass::forward)->bytes == approx(6.0 * 29360128));
      // One fused kernel each for the host to issue.
      for (const char* name : {"input_norm", "rope", "swiglu"}) {
        CHECK(find(ops, name, Pass::forward)->host_kernels == 1);
      }
      for (const char* name : {"input_norm_bwd", "rope_bwd", "swiglu_bwd"}) {
        CHECK(find(ops, name, Pass::backward_input)->host_kernels == 1);
      }
    }
    SUBCASE("deepspeed, fused_rmsnorm = false, attention = torch") {
      tr.framework = Framework::deepspeed;
      tr.fused_rmsnorm = false;
      tr.attention = AttentionKernel::torch;
      const auto ops = layer_ops(m, tr, l);
      // RMSNorm: 4·2 + 28 = 36 B forward, 8·2 + 76 = 92 B backward per element
      CHECK(find(ops, "input_norm", Pass::forward)->bytes == approx(36.0 * 8388608));
      CHECK(find(ops, "input_norm_bwd", Pass::backward_input)->bytes == approx(92.0 * 8388608));
      // rotary: 10·2 = 20 B per q/k element forward, 15·2 = 30 B backward
      CHECK(find(ops, "rope", Pass::forward)->bytes == approx(20.0 * 10485760));
      CHECK(find(ops, "rope_bwd", Pass::backward_input)->bytes == approx(30.0 * 10485760));
      // SwiGLU: 5·2 = 10 B forward, 9·2 = 18 B backward
      CHECK(find(ops, "swiglu", Pass::forward)->bytes == approx(10.0 * 29360128));
      CHECK(find(ops, "swiglu_bwd", Pass::backward_input)->bytes == approx(18.0 * 29360128));
      // torch softmax: 4·2 + 17 = 25 B forward, 4·2 + 21 = 29 B backward per score
      CHECK(find(ops, "softmax", Pass::forward)->bytes == approx(25.0 * 134217728));
      CHECK(find(ops, "softmax_bwd", Pass::backward_input)->bytes == approx(29.0 * 134217728));
      CHECK(find(ops, "attention_dropout", Pass::forward) == nullptr);  // llama: no dropout
      // Every eager step is a kernel the host issues (the chains above, with the tiny [T, 1]
      // steps of the norm: + eps and rsqrt forward; rsqrt's gradient -0.5·grad·result.pow(3)).
      CHECK(find(ops, "input_norm", Pass::forward)->host_kernels == 8);
      CHECK(find(ops, "mlp_norm", Pass::forward)->host_kernels == 8);
      CHECK(find(ops, "input_norm_bwd", Pass::backward_input)->host_kernels == 16);
      CHECK(find(ops, "rope", Pass::forward)->host_kernels == 10);        // 5 for q, 5 for k
      CHECK(find(ops, "rope_bwd", Pass::backward_input)->host_kernels == 18);  // 9 each
      CHECK(find(ops, "swiglu", Pass::forward)->host_kernels == 2);       // silu, product
      CHECK(find(ops, "swiglu_bwd", Pass::backward_input)->host_kernels == 3);
      CHECK(find(ops, "softmax", Pass::forward)->host_kernels == 4);
      CHECK(find(ops, "softmax_bwd", Pass::backward_input)->host_kernels == 4);
      // torch.compile fuses the chains (eager_kernels off): one kernel each again.
      Training compiled = tr;
      compiled.framework = Framework::fsdp;
      compiled.torch.compile = true;
      CHECK(find(layer_ops(m, compiled, l), "rope", Pass::forward)->host_kernels == 1);
      // The FLOPs do not change with the kernel set.
      Training mt = tr;
      mt.framework = Framework::megatron;
      CHECK(sum_flops(ops) == approx(sum_flops(layer_ops(m, mt, l))));
    }
    SUBCASE("deepspeed head: gathered full-vocabulary loss, no vocab-parallel all-reduces") {
      tr.framework = Framework::deepspeed;
      l.tp = 2;
      const auto head = head_ops(m, tr, l);
      CHECK(count(head, CollectiveKind::all_reduce, Pass::forward) == 0);
      const Op* ag = find(head, "tp_ag_logits", Pass::forward);
      REQUIRE(ag);
      // padded vocabulary at t = 2: 128256 (a multiple of 256); bf16 logits 2·2048·128256
      CHECK(ag->bytes == approx(2.0 * 2048 * 128256));
      // fp32 loss: (2 + 16) B forward, (2 + 20) B backward per token and vocabulary entry
      CHECK(find(head, "cross_entropy", Pass::forward)->bytes == approx(18.0 * 2048 * 128256));
      CHECK(find(head, "cross_entropy_bwd", Pass::backward_input)->bytes ==
            approx(22.0 * 2048 * 128256));
    }
  }

  // Aleph Alpha's trainer (`Aleph-Alpha/scaling` at 737f855, src/scaling/core/nn/attention/
  // attention.py): FlashAttention's max_seqlen is read with `.item()` before every attention
  // forward (`get_max_seq_length`, line 73), the dense mask of the torch and fused kernels
  // starts with a `torch.where` (line 81): one host wait per attention forward, none in
  // backward; full recomputation re-runs the forward and waits again.
  TEST_CASE("Aleph Alpha's attention forward waits for the host (deepspeed)") {
    const Model m = preset("llama3.1-8b");
    Training tr;
    tr.seq_len = 2048;
    Layout l;
    auto syncs = [](const std::vector<Op>& ops) {
      std::vector<const Op*> out;
      for (const Op& op : ops) {
        if (op.host_wait != HostWait::none) out.push_back(&op);
      }
      return out;
    };
    CHECK(syncs(layer_ops(m, tr, l)).empty());  // Megatron-Core: no wait in a dense layer
    tr.framework = Framework::fsdp;
    CHECK(syncs(layer_ops(m, tr, l)).empty());
    tr.framework = Framework::deepspeed;
    for (AttentionKernel k : {AttentionKernel::flash2, AttentionKernel::torch, AttentionKernel::fused}) {
      tr.attention = k;
      const auto ops = layer_ops(m, tr, l);
      const auto waits = syncs(ops);
      REQUIRE(waits.size() == 1);
      CHECK(waits[0]->kind == OpKind::attention);
      CHECK(waits[0]->pass == Pass::forward);
      CHECK_FALSE(waits[0]->recompute);
      CHECK(waits[0]->host_wait == HostWait::round_trip);  // no dispatcher after it
    }
    tr.attention = AttentionKernel::flash2;
    l.recompute = Recompute::full;
    const auto recomputed = layer_ops(m, tr, l);
    const auto waits = syncs(recomputed);
    REQUIRE(waits.size() == 2);
    CHECK(waits[0]->recompute != waits[1]->recompute);
  }

  // Autograd's AccumulateGrad (`pytorch/pytorch: torch/csrc/autograd/functions/
  // accumulate_grad.h`): from the second micro-batch on, `grad += new_grad` after each
  // weight-gradient GEMM, 3 gradient-dtype accesses per weight element. With m = 8 micro-batches
  // in bf16 the step average is 3·2·7/8 = 5.25 B per element. Llama-3.1-8B, t = 1: QKV weight
  // 4096 x (32 + 2·8)·128 = 25,165,824 elements -> 132,120,576 B; FC2 14336 x 4096 =
  // 58,720,256 elements -> 308,281,344 B.
  TEST_CASE("Eager gradient accumulation after each weight-gradient GEMM (deepspeed)") {
    const Model m = preset("llama3.1-8b");
    Training tr;
    tr.seq_len = 2048;
    tr.global_batch = 8;
    tr.grad_dtype = Precision::bf16;
    Layout l;
    auto accumulations = [](const std::vector<Op>& ops) {
      std::vector<double> bytes;
      for (const Op& op : ops) {
        if (op.name == std::string_view("grad_accumulate")) bytes.push_back(op.bytes);
      }
      return bytes;
    };
    SUBCASE("megatron: the wgrad GEMM accumulates into main_grad, no separate kernel") {
      CHECK(accumulations(layer_ops(m, tr, l)).empty());
    }
    SUBCASE("deepspeed, 8 micro-batches") {
      tr.framework = Framework::deepspeed;
      const auto bytes = accumulations(layer_ops(m, tr, l));
      REQUIRE(bytes.size() == 4);  // fc2, fc1, attention proj, qkv (backward order)
      CHECK(bytes[0] == approx(308281344.0));
      CHECK(bytes[3] == approx(132120576.0));
    }
    SUBCASE("deepspeed, one micro-batch: nothing to accumulate") {
      tr.framework = Framework::deepspeed;
      tr.global_batch = 1;
      CHECK(accumulations(layer_ops(m, tr, l)).empty());
    }
  }

  TEST_CASE("Megatron GPT: attention dropout over the scores, mask byte in bias-dropout-add") {
    // GPT 1.7B of Narayanan et al. 2021 Table 1: h 2304, 24 heads, s 2048, b 16, t 1;
    // dropout 0.1 (Megatron-LM arguments.py defaults). scores = 16·24·2048² = 1,610,612,736.
    Model m;
    m.arch = Arch::gpt;
    m.layers = 24;
    m.hidden = 2304;
    m.ffn_hidden = 9216;
    m.heads = 24;
    m.kv_heads = 24;
    m.vocab = 51200;
    Training tr;
    tr.seq_len = 2048;
    tr.precision = Precision::fp16;
    tr.attention = AttentionKernel::fused;
    Layout l;
    l.mbs = 16;
    const auto ops = layer_ops(m, tr, l);
    // read + write fp16 (2 + 2) and the 1-byte mask: 5 B per score, both passes
    CHECK(find(ops, "attention_dropout", Pass::forward)->bytes == approx(5.0 * 1610612736.0));
    CHECK(find(ops, "attention_dropout_bwd", Pass::backward_input)->bytes ==
          approx(5.0 * 1610612736.0));
    // bias-dropout-add: 3·2 + 1 = 7 B per element of T·h = 32768·2304
    CHECK(find(ops, "residual_add", Pass::forward)->bytes == approx(7.0 * 32768 * 2304));
  }

  TEST_CASE("DeepSpeed-style DP: fp32 all-reduce after backward, parameter gather after the step") {
    // Aleph-Alpha/scaling optimizer.py + allreduce.py: 500M-element buckets cast to fp32.
    const Model m = preset("llama3.1-8b");
    Training tr;
    tr.seq_len = 2048;
    tr.framework = Framework::deepspeed;
    tr.grad_dtype = Precision::bf16;
    tr.zero_stage = 1;
    Layout l;
    l.dp = 8;
    const double p0 = static_cast<double>(stage_params(m, l, tr.seq_len)[0].params);
    const auto ops = dp_gradient_ops(m, tr, l, 0);
    double ar = 0, ag = 0;
    int buckets = 0;
    for (const Op& op : ops) {
      CHECK_FALSE(op.async);
      if (op.coll == CollectiveKind::all_reduce) {
        ar += op.bytes * op.count;
        buckets += op.count;
      }
      if (op.coll == CollectiveKind::all_gather) ag += op.bytes * op.count;
    }
    CHECK(ar == approx(4.0 * p0));
    CHECK(ag == approx(2.0 * p0));
    CHECK(buckets == static_cast<int>((p0 + 500e6 - 1) / 500e6));  // 8.03 G params: 17 buckets
    const auto opt = optimizer_ops(m, tr, l, 0);
    REQUIRE(opt.size() == 3);
    // flatten + cast + divide + copy back + unflatten: 6·2 + 16 = 28 B per local parameter
    CHECK(std::string_view(opt[0].name) == "grad_flatten_cast");
    CHECK(opt[0].bytes == approx(28.0 * p0));
  }
}

TEST_SUITE("llama") {
  TEST_CASE("selective_op recomputes wk, wo and w3 of each block (torchtitan per-op SAC)") {
    // torchtitan/parallelisms/parallelize_llama.py @9dec370: every second aten.mm of a block is
    // recomputed; the block calls wq, wk, wv, wo, w1, w3, w2, so wk, wo and w3 run again.
    const Model m = preset("llama3.1-8b");
    Training tr;
    tr.seq_len = 8192;
    tr.global_batch = 16;
    tr.framework = Framework::fsdp;
    Layout l;
    l.mbs = 2;
    l.dp = 8;
    l.recompute = Recompute::selective_op;
    const auto ops = layer_ops(m, tr, l);
    double gemm_flops = 0;
    int gemms = 0;
    for (const Op& op : ops) {
      if (!op.recompute) continue;
      CHECK(op.kind != OpKind::attention);  // SDPA's outputs are saved
      if (op.kind == OpKind::gemm) {
        gemm_flops += op.total_flops();
        ++gemms;
      }
    }
    CHECK(gemms == 3);
    // 2 x (2 x 8192 tokens) x 4096 x (1024 + 4096 + 14336) = 2,611,340,115,968 FLOPs.
    CHECK(gemm_flops == approx(2611340115968.0));
    // Both norms, RoPE and SwiGLU run again.
    CHECK(find(ops, "input_norm", Pass::forward, true) != nullptr);
    CHECK(find(ops, "mlp_norm", Pass::forward, true) != nullptr);
    CHECK(find(ops, "rope", Pass::forward, true) != nullptr);
    CHECK(find(ops, "swiglu", Pass::forward, true) != nullptr);
    // Under TP with SP the all-gathers before the recomputed column linears run again; the
    // reduce-scatters are in the save list and do not.
    l.tp = 2;
    l.sp = true;
    l.dp = 4;
    const auto tp_ops = layer_ops(m, tr, l);
    CHECK(count(tp_ops, CollectiveKind::all_gather, Pass::forward, true) == 2);
    CHECK(count(tp_ops, CollectiveKind::reduce_scatter, Pass::forward, true) == 0);
    CHECK(parse_recompute("selective_op") == Recompute::selective_op);
    CHECK(std::string(to_string(Recompute::selective_op)) == "selective_op");
  }

  TEST_CASE("torchtitan's loss parallel under TP and the compiled loss (head ops)") {
    // Loss parallel (torchtitan apply_tp @820504e: the output keeps Shard(-1) logits): no
    // gather of the logits; the loss reads the vocabulary shard. Llama-3.1-8B, s = 4096, b = 1,
    // t = 2: T = 4096 tokens, V/t = 64,128; T V/t = 262,668,288 elements.
    const Model m = preset("llama3.1-8b");
    Training tr;
    tr.seq_len = 4096;
    tr.framework = Framework::fsdp;
    tr.zero_stage = 3;
    Layout l;
    l.tp = 2;
    l.dp = 4;
    auto head = head_ops(m, tr, l);
    CHECK(find(head, "tp_ag_logits", Pass::forward) == nullptr);
    const Op* ce = find(head, "cross_entropy", Pass::forward);
    REQUIRE(ce);
    CHECK(ce->bytes == approx(6.0 * 262668288.0));  // bf16 read, fp32 softmax written
    // Compiled: one read of the bf16 shard in forward; backward reads it and writes the bf16
    // gradient.
    tr.torch.compile = true;
    head = head_ops(m, tr, l);
    CHECK(find(head, "cross_entropy", Pass::forward)->bytes == approx(2.0 * 262668288.0));
    CHECK(find(head, "cross_entropy_bwd", Pass::backward_input)->bytes == approx(4.0 * 262668288.0));
  }

  TEST_CASE("HSDP: gathers and reduce-scatters over one replica, all-reduce of the shards across replicas") {
    // FSDP2 foreach_reduce (torch/distributed/_composable/fsdp/_fsdp_collectives.py): the
    // reduce-scatter output is all-reduced over the replicate group. Llama-3.1-8B, 16 DP ranks
    // as 2 replicas x 8 shards, fp32 gradients: one block 218,112,000 parameters.
    const Model m = preset("llama3.1-8b");
    Training tr;
    tr.seq_len = 4096;
    tr.zero_stage = 3;
    tr.framework = Framework::fsdp;
    Layout l;
    l.dp = 16;
    l.dp_replicate = 2;
    const auto layer = layer_ops(m, tr, l);
    const Op* ag = find(layer, "zero3_param_ag", Pass::forward);
    REQUIRE(ag);
    CHECK(ag->group == 8);
    const auto grads = dp_gradient_ops(m, tr, l, 0);
    const Op* rs = find(grads, "zero3_grad_rs", Pass::optimizer);
    const Op* ar = find(grads, "hsdp_grad_ar", Pass::optimizer);
    REQUIRE(rs);
    REQUIRE(ar);
    CHECK(rs->group == 8);
    CHECK(rs->bytes == approx(4.0 * 218112000));  // 872,448,000
    CHECK(rs->count == 32);
    CHECK(ar->dim == CommDim::dp_replicate);
    CHECK(ar->group == 2);
    CHECK(ar->bytes == approx(4.0 * 218112000 / 8));  // 109,056,000: one shard
    CHECK(ar->count == 32);
    // Embedding and head: 2 * 128,256 * 4096 + 4096 = 1,050,677,248 parameters.
    const Op* ar_rest = find(grads, "hsdp_grad_ar_rest", Pass::optimizer);
    REQUIRE(ar_rest);
    CHECK(ar_rest->bytes == approx(4.0 * 1050677248.0 / 8));
  }

  TEST_CASE("selective_layer: one block in ac_freq recomputed in full") {
    Layout l;
    l.recompute = Recompute::selective_layer;
    l.ac_freq = 4;
    const auto kinds = block_kinds(l);
    REQUIRE(kinds.size() == 2);
    CHECK(kinds[0].recompute == Recompute::none);
    CHECK(kinds[0].share == approx(0.75));
    CHECK(kinds[1].recompute == Recompute::full);
    CHECK(kinds[1].share == approx(0.25));
    l.recompute = Recompute::selective_op;
    REQUIRE(block_kinds(l).size() == 1);
    CHECK(block_kinds(l)[0].share == 1.0);
    CHECK(parse_recompute("selective_layer") == Recompute::selective_layer);
  }
}

TEST_SUITE("llama") {
  TEST_CASE("torchtitan's separate wq, wk, wv and w1, w3: one GEMM each, their input gradients summed") {
    // torchtitan/models/llama/model.py @9dec370: Attention.wq / wk / wv and FeedForward.w1 /
    // w3 are separate nn.Linear modules reading one input. Llama-3.1-8B, s = 8192, b = 1:
    // T = 8192 tokens, h = 4096, 32 heads and 8 KV heads of 128.
    const Model m = preset("llama3.1-8b");
    Training tr = torchtitan_training(8192);
    Layout l;
    l.dp = 8;
    const auto ops = layer_ops(m, tr, l);
    REQUIRE(find(ops, "wq", Pass::forward));
    CHECK(find(ops, "wq", Pass::forward)->n == 4096);
    CHECK(find(ops, "wk", Pass::forward)->n == 1024);
    CHECK(find(ops, "wv", Pass::forward)->n == 1024);
    CHECK(find(ops, "w1", Pass::forward)->n == 14336);
    CHECK(find(ops, "w3", Pass::forward)->n == 14336);
    CHECK(find(ops, "qkv", Pass::forward) == nullptr);
    // Compiled, one kernel reads the three (two) input gradients and writes their sum:
    // (3 + 1) x 2 B x 8192 x 4096 = 268,435,456 B and (2 + 1) x 2 x 33,554,432 = 201,326,592.
    auto dgrad_sums = [](const std::vector<Op>& list) {
      std::vector<double> out;
      for (const Op& op : list) {
        if (std::string_view(op.name) == "dgrad_sum") out.push_back(op.bytes);
      }
      return out;
    };
    std::vector<double> sums = dgrad_sums(ops);
    REQUIRE(sums.size() == 2);
    CHECK(sums[0] == approx(201326592.0));  // w1 + w3 (the MLP's backward runs first)
    CHECK(sums[1] == approx(268435456.0));  // wq + wk + wv
    // Eager, autograd adds one gradient at a time (read two, write one): 2 adds and 1 add.
    tr.torch.compile = false;
    sums = dgrad_sums(layer_ops(m, tr, l));
    REQUIRE(sums.size() == 2);
    CHECK(sums[0] == approx(3.0 * 2.0 * 33554432.0));
    CHECK(sums[1] == approx(6.0 * 2.0 * 33554432.0));
    // Megatron fuses them: one qkv and one fc1 GEMM, no sum.
    tr.framework = Framework::megatron;
    const auto fused = layer_ops(m, tr, l);
    CHECK(find(fused, "qkv", Pass::forward)->n == 6144);
    CHECK(find(fused, "fc1", Pass::forward)->n == 28672);
  }
}

TEST_SUITE("llama") {
  TEST_CASE("PyTorch context parallelism: all-gathered K/V, one SDPA per rank, fp32 merges and dK/dV") {
    // torch/distributed/tensor/experimental/_attention.py (torch 2.6): all-gather rotater,
    // load balancing, _SDPAMerger in fp32, fp32 dK/dV sent on after every backward step.
    // Llama-3.1-8B at CP 4, s = 131,072, b = 1: s' = 32,768; torchtitan repeats the 8 KV heads
    // to 32 before SDPA, so Q, K, V and the output each hold 32 x 32,768 x 128 = 134,217,728
    // elements on a rank.
    const Model m = preset("llama3.1-8b");
    Training tr = torchtitan_training(131072);
    Layout l;
    l.cp = 4;
    l.dp = 2;
    const auto ops = layer_ops(m, tr, l);
    const double e = 134217728.0;
    const Op* ag = find(ops, "cp_kv_ag", Pass::forward);
    REQUIRE(ag);
    CHECK(ag->coll == CollectiveKind::all_gather);
    CHECK(ag->group == 4);
    CHECK(ag->bytes == approx(4.0 * 2.0 * 2.0 * e));  // 4 ranks x K and V x bf16
    CHECK_FALSE(ag->async);  // compiled: waited right after it is issued
    const Op* ring = find(ops, "core_attention_ring", Pass::forward);
    REQUIRE(ring);
    CHECK(ring->count == 3);
    CHECK_FALSE(ring->attn.causal);
    CHECK(ring->attn.seq_kv == 16384);
    // Merges, compiled: up- and down-cast once (12 B) and 3 updates of 10 B: 42 x e.
    CHECK(find(ops, "cp_merge", Pass::forward)->bytes == approx(42.0 * e));
    // K and V made contiguous and concatenated: read + write twice, 4 x 2 x 2 B x e.
    CHECK(find(ops, "cp_kv_stage", Pass::forward)->bytes == approx(16.0 * e));
    // Backward: 4 sends of the fp32 dK and dV (8 B x e each) and 4 fp32 accumulations of dQ,
    // dK, dV (30 B) plus the casts back (18 B): 138 x e.
    const Op* dkv = find(ops, "cp_dkv", Pass::backward_input);
    REQUIRE(dkv);
    CHECK(dkv->bytes == approx(8.0 * e));
    CHECK(dkv->count == 4);
    CHECK(find(ops, "cp_grad_accumulate", Pass::backward_input)->bytes == approx(138.0 * e));
    // Eager, the all-gather runs under the local causal step.
    tr.torch.compile = false;
    CHECK(find(layer_ops(m, tr, l), "cp_kv_ag", Pass::forward)->async);
  }
}

TEST_SUITE("llama") {
  TEST_CASE("ops: per-head Q and K norms (Qwen3 qk_norm), forward and backward") {
    // Megatron-Core applies q_layernorm / k_layernorm (Transformer Engine's RMSNorm) to the
    // query and key it splits from the fused QKV output (transformer/attention.py
    // get_query_key_value_tensors); TE makes the strided key contiguous first
    // (pytorch/ops/basic/rmsnorm.py: `input_.contiguous()`). The attention of Qwen3-30B-A3B
    // without its experts: hidden 2048, 32 heads, 4 KV heads of 128; seq 4096, mbs 1, bf16.
    Layout l;
    l.dp = 8;
    Training tr;
    tr.seq_len = 4096;
    tr.global_batch = 8;
    Model m = *find_model_preset("llama3.1-8b");
    m.hidden = 2048;
    m.heads = 32;
    m.kv_heads = 4;
    m.head_dim_override = 128;
    m.qk_norm = true;
    const auto ops = layer_ops(m, tr, l);
    // Q: 4096 x 32 x 128 = 16,777,216 elements; K: 4096 x 4 x 128 = 2,097,152.
    const Op* q = find(ops, "q_norm", Pass::forward);
    const Op* k = find(ops, "k_norm", Pass::forward);
    REQUIRE(q);
    REQUIRE(k);
    CHECK(q->mem == MemoryKernel::rmsnorm);
    CHECK(q->bytes == approx(2.0 * 2.0 * 16'777'216.0));  // read + write bf16: 67,108,864
    CHECK(k->bytes == approx(4.0 * 2.0 * 2'097'152.0));   // copy, then the norm: 16,777,216
    CHECK(k->host_kernels == 2);
    // Backward: read x and dy, write dx.
    CHECK(find(ops, "q_norm_bwd", Pass::backward_input)->bytes == approx(3.0 * 2.0 * 16'777'216.0));
    CHECK(find(ops, "k_norm_bwd", Pass::backward_input)->bytes == approx(3.0 * 2.0 * 2'097'152.0));
    // They sit between the QKV GEMM and RoPE.
    const auto at = [&](const char* name) {
      return std::find_if(ops.begin(), ops.end(), [&](const Op& op) { return std::string_view(op.name) == name; });
    };
    CHECK(at("qkv") < at("q_norm"));
    CHECK(at("k_norm") < at("rope"));
    // TP 2 halves the heads of a rank; full recomputation runs them again before backward.
    l.tp = 2;
    l.dp = 4;
    l.sp = true;
    l.recompute = Recompute::full;
    const auto tp2 = layer_ops(m, tr, l);
    CHECK(find(tp2, "q_norm", Pass::forward)->bytes == approx(2.0 * 2.0 * 8'388'608.0));
    CHECK(find(tp2, "q_norm", Pass::forward, true));
    // A model without them has none.
    m.qk_norm = false;
    CHECK_FALSE(find(layer_ops(m, tr, Layout{}), "q_norm", Pass::forward));
  }
}
