// Per-stage memory model (costmodel/src/memory.cpp). Every expected value is computed by hand
// in the comment next to it. Source keys: F24 = Fujii et al., arXiv 2411.06465; F24-code = its
// estimator, okoge-kaz/Megatron-LM tools/memory_estimate/ (test vectors in
// tests_memory_consumption_estimator.py); K22 = Korthikanti et al., arXiv 2205.05198, Table 2;
// N21 = Narayanan et al., arXiv 2104.04473; ZB = Qi et al., arXiv 2401.10241; H23 = Hagemann
// et al., arXiv 2311.05610; MLM = NVIDIA/Megatron-LM; TE = NVIDIA/TransformerEngine
// context_parallel.py; ZeRO = Rajbhandari et al., arXiv 1910.02054.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <cmath>

#include "costmodel/fujii_reference.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/parallel/params.hpp"
#include "tetra/model/presets.hpp"

using tetra::test::approx;
using namespace tetra;
using costmodel::estimate_memory;
using costmodel::MemoryOptions;
using costmodel::MemoryReport;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

model::Model preset_model(const char* name) {
  auto m = model::find_model_preset(name);
  REQUIRE(m);
  return *m;
}

hw::Cluster cluster(const char* name) {
  auto c = hw::find_cluster_preset(name);
  REQUIRE(c);
  return *c;
}

/// F24 test-vector setting (F24-code tests_memory_consumption_estimator.py): Llama-3.1-8B,
/// s = 8192, bf16, fp32 gradients, distributed
/// optimizer over DP x CP, FlashAttention, SP on, 1F1B.
struct Vector {
  int tp, cp, pp, mbs, world;
  double states_gib, activations_gib;
};

parallel::Layout vector_layout(const Vector& v) {
  parallel::Layout l;
  l.tp = v.tp;
  l.cp = v.cp;
  l.pp = v.pp;
  l.mbs = v.mbs;
  l.dp = v.world / (v.tp * v.cp * v.pp);
  l.sp = v.tp > 1;
  return l;
}

parallel::Training vector_training(const Vector& v, const parallel::Layout& l) {
  parallel::Training t;
  t.seq_len = 8192;
  t.global_batch = 64 * v.mbs * l.dp;  // plenty of micro-batches; F24 never discounts by m
  t.grad_dtype = parallel::Precision::fp32;
  t.zero_stage = 1;
  t.attention = parallel::AttentionKernel::flash2;
  return t;
}

// okoge-kaz/Megatron-LM: tools/memory_estimate/tests_memory_consumption_estimator.py.
const Vector kVectors[] = {
    {2, 1, 1, 1, 4, 44.87260437011719, 22.64453125},
    {1, 2, 1, 1, 4, 67.30887222290039, 22.64453125},
    {2, 1, 2, 1, 128, 11.919273376464844, 20.75},
    {2, 2, 1, 2, 128, 23.137436628341675, 22.64453125},
};

double states(const costmodel::StageMemory& s) {
  return s.params_bytes + s.grads_bytes + s.optimizer_bytes;
}

/// Llama-3.1-8B cut to two blocks, for FSDP2 terms small enough to check by hand.
model::Model two_block_8b() {
  model::Model m = preset_model("llama3.1-8b");
  m.layers = 2;
  return m;
}

/// torchtitan's training of the FSDP2 tests: seq 8192, 8 sequences, FSDP2 (zero_stage 3).
parallel::Training fsdp2_training() {
  parallel::Training t;
  t.seq_len = 8192;
  t.global_batch = 8;
  t.zero_stage = 3;
  t.framework = parallel::Framework::fsdp;
  return t;
}

parallel::Layout simple_layout(int tp, int pp, int dp, int mbs) {
  parallel::Layout l;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  l.mbs = mbs;
  return l;
}

}  // namespace

TEST_SUITE("costmodel") {
  TEST_CASE("memory: F24 test vectors reproduced exactly by the F24-code reference") {
    const model::Model m = preset_model("llama3.1-8b");
    for (const Vector& v : kVectors) {
      CAPTURE(v.tp);
      CAPTURE(v.cp);
      CAPTURE(v.pp);
      CAPTURE(v.mbs);
      const parallel::Layout l = vector_layout(v);
      const costmodel::StageMemory s0 = test::fujii_first_stage(m, vector_training(v, l), l);
      // e.g. (2,1,1,1): Phi = ((6,979,588,096 - 4096) + 525,336,576)/2 + 525,336,576/2 + 4096
      //   = 4,015,132,672; bytes/param 2 + 4 + 12/2 = 12 -> 48,181,592,064 B = 44.8726 GiB.
      CHECK(states(s0) / kGiB == approx(v.states_gib).epsilon(1e-12));
      // (2,1,1,1): 32 * 8192*4096*41/2 + 8*8192*4096/2 + 4*8192*(4096+128256)/2
      //   = 22,011,707,392 + 134,217,728 + 2,168,455,168 B = 22.64453125 GiB.
      CHECK(s0.activations_bytes / kGiB == approx(v.activations_gib).epsilon(1e-12));
      CHECK(s0.buffers_bytes == 0.0);
      CHECK(s0.reserved_bytes == s0.allocated_bytes);
    }
  }

  TEST_CASE("memory: physics mode within 0.5% of F24 on model states, activation deltas "
            "explained term by term") {
    const model::Model m = preset_model("llama3.1-8b");
    const hw::Cluster c = cluster("dgx-h100");
    for (const Vector& v : kVectors) {
      CAPTURE(v.tp);
      CAPTURE(v.cp);
      CAPTURE(v.pp);
      const parallel::Layout l = vector_layout(v);
      const parallel::Training t = vector_training(v, l);
      const auto phys = estimate_memory(m, c, t, l).stages.front();
      const auto ref = test::fujii_first_stage(m, t, l);
      // Explicit per-stage form (norm weights replicated over TP) vs the final-code variant:
      // e.g. 44.87407 vs 44.87260 GiB for (2,1,1,1), 0.003 %.
      CHECK(std::abs(states(phys) / states(ref) - 1.0) < 0.005);

      // Activations. Physics mode differs from F24-code by exactly:
      const double s = 8192.0 / v.cp, b = v.mbs, h = 4096, a = 32, t_ = v.tp, V = 128256;
      const double p = v.pp;
      // (1) FlashAttention's fp32 log-sum-exp per row and head, 4 a s' b / t per layer, kept
      //     for the 32 layers of p in-flight micro-batches of L/p layers (flash-attention's
      //     softmax_lse);
      double delta = 32.0 * 4.0 * a * s * b / t_;
      // (2) the embedding input: int64 token ids 8 s' b per in-flight micro-batch (p of them)
      //     instead of F24-code's 8 s' b h p / t (upstream MLM theoretical_memory_usage.py
      //     counts 8 s b p, no factor h);
      delta += p * 8.0 * s * b - 8.0 * s * b * h * p / t_;
      // (3) p = 1 head: fp32 softmax of the local vocabulary 4 s' b V / t plus the LM-head
      //     input shard 2 s' b h / t held, instead of 4 s' b (h + V) / t; the bf16 logits
      //     transient 2 s' b V / t is counted in buffers (MLM cross_entropy.py).
      if (v.pp == 1) delta += 4.0 * s * b * V / t_ + 2.0 * s * b * h / t_ - 4.0 * s * b * (h + V) / t_;
      // (4) Megatron-Core's fused SwiGLU keeps gate and up but not silu(gate)
      //     (`megatron/core/fusions/fused_bias_swiglu.py` saves its input only): 2 s' b f / t
      //     fewer per layer, f = 14336.
      delta -= 32.0 * 2.0 * s * b * 14336.0 / t_;
      CHECK(phys.activations_bytes - ref.activations_bytes == approx(delta));
      // Physics mode adds what F24-code leaves to its 80 % rule: buffers and fragmentation.
      CHECK(phys.buffers_bytes > 0.0);
      CHECK(phys.reserved_bytes > phys.allocated_bytes);
    }
  }

  TEST_CASE("memory: Llama-3.1-8B per-layer activation, coefficient 41 eager, 34 with "
            "Megatron-Core's fused SwiGLU (F24-code)") {
    const model::Model m = preset_model("llama3.1-8b");
    parallel::Training t;
    t.seq_len = 8192;
    t.framework = parallel::Framework::fsdp;
    const parallel::Layout l = simple_layout(1, 1, 1, 1);
    // Eager SwiGLU: s b h (12 + 4*8/32 + 8*14336/4096) = 8192*4096*41 = 1,375,731,712 B =
    // 1.28125 GiB, plus the fp32 log-sum-exp 4*32*8192 = 1,048,576 B that F24-code omits.
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(1375731712.0 + 1048576.0));
    CHECK((costmodel::activation_bytes_per_layer(m, t, l) - 1048576.0) / kGiB ==
          approx(1.28125));
    // Megatron-Core (`megatron/core/fusions/fused_bias_swiglu.py`): silu(gate) is not kept,
    // 41 - 2*3.5 = 34: 8192*4096*34 = 1,140,850,688 B = 1.0625 GiB.
    t.framework = parallel::Framework::megatron;
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(1140850688.0 + 1048576.0));
  }

  TEST_CASE("memory: FP8 saves the linears' inputs quantised and caches FP8 weights "
            "(TE linear.py, is_first_microbatch)") {
    const model::Model m = preset_model("llama3.1-8b");
    const hw::Cluster c = cluster("dgx-h100");
    parallel::Training t;
    t.seq_len = 8192;
    t.global_batch = 8;
    parallel::Layout l = simple_layout(1, 1, 1, 1);
    const double sbh = 8192.0 * 4096.0, lse = 4.0 * 32 * 8192;
    // bf16: 34 s b h (coefficient test). FP8: norm inputs 4, QKV / FC1 inputs 1 + 1, Q 2,
    // K V 4 k/a = 1, attention output 2 plus its FP8 copy 1, gate/up 4 f/h and the FC2 input
    // 1 f/h: 4 + 2 + 6 + 5 * 3.5 = 29.5.
    t.fp8.recipe = parallel::Fp8Recipe::delayed;
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(29.5 * sbh + lse));
    // Weight cache: the linears of a layer, 4096*6144 + 4096^2 + 3*4096*14336 = 218,103,808
    // parameters, 32 layers = 6,979,321,856, row-wise + column-wise FP8 = 2 bytes each.
    const auto fp8 = estimate_memory(m, c, t, l).stages.front();
    CHECK(fp8.fp8_cache_bytes == approx(2.0 * 6979321856.0));
    // fp8_param_gather: the row-wise copy is the parameter; the bf16 linears go.
    t.fp8.param_gather = true;
    const auto gathered = estimate_memory(m, c, t, l).stages.front();
    CHECK(gathered.fp8_cache_bytes == approx(6979321856.0));
    CHECK(fp8.params_bytes - gathered.params_bytes == approx(6979321856.0));
    // MXFP8 adds a scale byte per 32 elements.
    t.fp8 = {parallel::Fp8Recipe::mxfp8, false};
    CHECK(estimate_memory(m, c, t, l).stages.front().fp8_cache_bytes ==
          approx(2.0 * (1.0 + 1.0 / 32.0) * 6979321856.0));
    // On B200 the FP8 GEMMs take any layout (TE nvte_is_non_tn_fp8_gemm_supported): a
    // per-tensor-scaled weight keeps one copy, 1 byte each, and none beside an FP8 parameter;
    // MXFP8 keeps its column-wise copy.
    const hw::Cluster b200 = cluster("dgx-b200");
    t.fp8 = {parallel::Fp8Recipe::delayed, false};
    CHECK(estimate_memory(m, b200, t, l).stages.front().fp8_cache_bytes == approx(6979321856.0));
    t.fp8.param_gather = true;
    CHECK(estimate_memory(m, b200, t, l).stages.front().fp8_cache_bytes == 0.0);
    t.fp8 = {parallel::Fp8Recipe::mxfp8, false};
    CHECK(estimate_memory(m, b200, t, l).stages.front().fp8_cache_bytes ==
          approx(2.0 * (1.0 + 1.0 / 32.0) * 6979321856.0));
  }

  TEST_CASE("memory: full recompute stores 0.0625 GiB per layer (K22 Table 2)") {
    const model::Model m = preset_model("llama3.1-8b");
    parallel::Training t;
    t.seq_len = 8192;
    parallel::Layout l = simple_layout(1, 1, 1, 1);
    l.recompute = parallel::Recompute::full;
    // 2 s b h = 2*8192*4096 = 67,108,864 B = 0.0625 GiB.
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) / kGiB == approx(0.0625));
    // With SP at t = 4 the stored input is the sequence shard: 0.0625/4 GiB.
    l.tp = 4;
    l.sp = true;
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) / kGiB == approx(0.015625));
  }

  TEST_CASE("memory: TP without SP keeps the norm and GEMM inputs whole (K22)") {
    const model::Model m = preset_model("llama3.1-8b");
    parallel::Training t;
    t.seq_len = 8192;
    parallel::Layout l = simple_layout(2, 1, 1, 1);
    // s b h [8 + (4 + 4*0.25 + 6*3.5)/2] = 8192*4096*21 = 704,643,072 B, + LSE 4*32*8192/2
    // (fused SwiGLU: 6 f/h, see the coefficient test).
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(704643072.0 + 524288.0));
    l.sp = true;
    // SP (Megatron keeps the shard): s b h * 34 / 2 = 570,425,344 B, + LSE.
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(570425344.0 + 524288.0));
  }

  TEST_CASE("memory: s^2 terms of unfused attention, dropped by selective recompute (K22)") {
    const model::Model m = preset_model("llama3.1-8b");
    parallel::Training t;
    t.seq_len = 8192;
    const parallel::Layout l = simple_layout(1, 1, 1, 1);
    const double flash = costmodel::activation_bytes_per_layer(m, t, l) - 1048576.0;  // no LSE
    t.attention = parallel::AttentionKernel::torch;
    // torch (fp32 softmax): 6 a s^2 b = 6*32*8192^2 = 12,884,901,888 B = 12 GiB.
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) - flash == approx(12.0 * kGiB));
    t.attention = parallel::AttentionKernel::fused;
    // fused scale-mask-softmax: 2 a s^2 b = 4 GiB.
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) - flash == approx(4.0 * kGiB));
    parallel::Layout sel = l;
    sel.recompute = parallel::Recompute::selective;
    CHECK(costmodel::activation_bytes_per_layer(m, t, sel) == approx(flash));
    // gpt with attention dropout: K22's 5 a s^2 b for the fused kernel.
    model::Model g = m;
    g.arch = model::Arch::gpt;
    g.kv_heads = g.heads;
    g.ffn_hidden = 4 * g.hidden;
    const double gpt_fused = costmodel::activation_bytes_per_layer(g, t, l);
    // K22 Table 2 without SP/TP: 34 s b h + 5 a s^2 b = 34*8192*4096 + 5*32*8192^2.
    CHECK(gpt_fused == approx(34.0 * 8192 * 4096 + 5.0 * 32 * 8192.0 * 8192));
  }

  TEST_CASE("memory: unfused RMSNorm adds 6 bytes per element per norm (H23)") {
    const model::Model m = preset_model("llama3.1-8b");
    parallel::Training t;
    t.seq_len = 8192;
    const parallel::Layout l = simple_layout(1, 1, 1, 1);
    const double fused = costmodel::activation_bytes_per_layer(m, t, l);
    t.fused_rmsnorm = false;
    // fp32 input copy (4) + bf16 input (2) + bf16 normalized (2) - bf16 input of the fused
    // kernel (2) = 6 per element, two norms: 12 s b h = 12*8192*4096 = 402,653,184 B.
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) - fused == approx(402653184.0));
  }

  TEST_CASE("memory: CP divides the sequence (F24-code, TE)") {
    const model::Model m = preset_model("llama3.1-8b");
    parallel::Training t;
    t.seq_len = 8192;
    parallel::Layout l = simple_layout(1, 1, 1, 1);
    const double one = costmodel::activation_bytes_per_layer(m, t, l);
    l.cp = 4;
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(one / 4.0));
  }

  TEST_CASE("memory: in-flight micro-batches per schedule (N21, MLM schedules.py, ZB)") {
    parallel::Layout l = simple_layout(1, 4, 1, 1);
    // 1F1B: min(p - r, m).
    CHECK(costmodel::inflight_micro_batches(l, 8, 0) == 4.0);
    CHECK(costmodel::inflight_micro_batches(l, 8, 3) == 1.0);
    CHECK(costmodel::inflight_micro_batches(l, 2, 0) == 2.0);
    l.schedule = parallel::Schedule::gpipe;
    CHECK(costmodel::inflight_micro_batches(l, 8, 3) == 8.0);
    l.schedule = parallel::Schedule::zb_h1;
    CHECK(costmodel::inflight_micro_batches(l, 8, 1) == 3.0);
    // Interleaved, v = 2, G = p = 4: stage 0 min(16, 2*3 + 1*4 + 1) = 11 chunks = 5.5 stage
    // micro-batches = p (1 + (p-1)/(p v)) = 4 * 1.375.
    l.schedule = parallel::Schedule::interleaved;
    l.vp = 2;
    CHECK(costmodel::inflight_micro_batches(l, 8, 0) == approx(5.5));
    // The last rank: 2*0 + 4 + 1 = 5 chunks = 2.5.
    CHECK(costmodel::inflight_micro_batches(l, 8, 3) == approx(2.5));
  }

  TEST_CASE("memory: every stage is reported, first holds the embedding, last the head") {
    const model::Model m = preset_model("llama3.1-70b");
    const hw::Cluster c = cluster("dgx-h100");
    parallel::Training t;
    t.seq_len = 8192;
    t.global_batch = 128;
    const parallel::Layout l = simple_layout(8, 4, 2, 1);
    const MemoryReport r = estimate_memory(m, c, t, l);
    REQUIRE(r.stages.size() == 4);
    for (int i = 0; i < 4; ++i) CHECK(r.stages[static_cast<std::size_t>(i)].stage == i);
    CHECK(r.stages[0].embedding_bytes > 0.0);
    CHECK(r.stages[1].embedding_bytes == 0.0);
    CHECK(r.stages[3].logits_bytes > 0.0);
    CHECK(r.stages[2].logits_bytes == 0.0);
    // 1F1B: stage 0 holds 4 micro-batches of 20 layers, stage 3 one.
    CHECK(r.stages[0].inflight == 4.0);
    CHECK(r.stages[3].inflight == 1.0);
    double peak = 0;
    for (const auto& s : r.stages) {
      CHECK(s.reserved_bytes >= s.allocated_bytes);
      CHECK(s.allocated_bytes == approx(s.params_bytes + s.grads_bytes +
                                                 s.optimizer_bytes + s.activations_bytes +
                                                 s.buffers_bytes));
      // static part + (1 + f) activations rebuilds reserved.
      CHECK(costmodel::reserved_with_activations(s, s.activations_bytes) ==
            approx(s.reserved_bytes));
      peak = std::max(peak, s.reserved_bytes);
    }
    CHECK(r.peak_bytes == peak);
    CHECK(r.fits == (r.peak_bytes <= r.capacity_bytes));
    CHECK(r.usable_bytes == approx(r.capacity_bytes));  // memory_fraction 1 by default
  }

  TEST_CASE("memory: monotone in micro-batch size, falling with ZeRO stage") {
    const model::Model m = preset_model("llama3.1-8b");
    const hw::Cluster c = cluster("dgx-h100");
    parallel::Training t;
    t.seq_len = 4096;
    t.global_batch = 256;
    double prev = 0;
    for (int mbs : {1, 2, 4, 8}) {
      const auto r = estimate_memory(m, c, t, simple_layout(2, 2, 2, mbs));
      CHECK(r.peak_bytes > prev);
      prev = r.peak_bytes;
    }
    const parallel::Layout l = simple_layout(1, 1, 8, 1);
    double last = 1e30;
    for (int z : {0, 1, 2, 3}) {
      t.zero_stage = z;
      const auto s = estimate_memory(m, c, t, l).stages.front();
      CHECK(s.params_bytes + s.grads_bytes + s.optimizer_bytes < last);
      last = s.params_bytes + s.grads_bytes + s.optimizer_bytes;
    }
  }

  TEST_CASE("memory: bytes per parameter by precision and ZeRO stage (F24-code, MLM, ZeRO)") {
    const model::Model m = preset_model("llama3.1-8b");
    const hw::Cluster c = cluster("dgx-h100");
    parallel::Training t;
    t.seq_len = 4096;
    t.global_batch = 64;
    const parallel::Layout l = simple_layout(1, 1, 8, 1);
    const double phi = static_cast<double>(parallel::stage_params(m, l, t.seq_len)[0].params);
    auto per_param = [&](const parallel::Training& tr) {
      const auto s = estimate_memory(m, c, tr, l).stages.front();
      return (s.params_bytes + s.grads_bytes + s.optimizer_bytes) / phi;
    };
    t.zero_stage = 0;
    CHECK(per_param(t) == approx(18.0));          // 2 + 4 + 12
    t.zero_stage = 1;
    CHECK(per_param(t) == approx(6.0 + 12.0 / 8));  // 2 + 4 + 12/d
    t.zero_stage = 2;
    CHECK(per_param(t) == approx(2.0 + 16.0 / 8));  // 2 + (4 + 12)/d
    t.grad_dtype = parallel::Precision::bf16;
    t.zero_stage = 1;
    CHECK(per_param(t) == approx(4.0 + 12.0 / 8));
    t.precision = parallel::Precision::fp16;
    t.grad_dtype = parallel::Precision::fp16;
    t.zero_stage = 0;
    CHECK(per_param(t) == approx(20.0));           // MLM dist_optimizer doc
    t.zero_stage = 1;
    CHECK(per_param(t) == approx(4.0 + 16.0 / 8));
    t.precision = parallel::Precision::fp32;
    t.grad_dtype = parallel::Precision::fp32;
    t.zero_stage = 0;
    CHECK(per_param(t) == approx(16.0));
    t.zero_stage = 1;
    CHECK(per_param(t) == approx(8.0 + 8.0 / 8));
  }

  TEST_CASE("memory: Megatron vs gathered-logits loss on the last stage (MLM cross_entropy.py)") {
    const model::Model m = preset_model("llama3.1-8b");
    const hw::Cluster c = cluster("dgx-h100");
    parallel::Training t;
    t.seq_len = 4096;
    t.global_batch = 64;
    const parallel::Layout l = simple_layout(2, 2, 2, 1);
    const double s = 4096, V = 128256;
    const auto meg = estimate_memory(m, c, t, l).stages.back();
    // fp32 softmax of the local shard 4 s b V / t + LM-head input 2 s b h (no SP: not / t).
    CHECK(meg.logits_bytes == approx(4.0 * s * V / 2 + 2.0 * s * 4096));
    t.framework = parallel::Framework::deepspeed;
    const auto ds = estimate_memory(m, c, t, l).stages.back();
    // bf16 gathered logits (2) + fp32 log-softmax (4) over the full vocabulary.
    CHECK(ds.logits_bytes == approx(6.0 * s * V));
    // torchtitan (framework fsdp) runs the loss on vocabulary shards whenever there is TP
    // (loss parallel, apply_tp in parallelize_llama.py): the sharded form, as Megatron.
    t.framework = parallel::Framework::fsdp;
    const auto tt = estimate_memory(m, c, t, l).stages.back();
    CHECK(tt.logits_bytes == approx(4.0 * s * V / 2 + 2.0 * s * 4096));
    // Without TP it is F.cross_entropy on the full logits, and torchtitan's train step drops
    // the bf16 logits before backward (`del pred`, train.py @9dec370): the fp32 log-softmax.
    const auto tt1 = estimate_memory(m, c, t, simple_layout(1, 2, 4, 1)).stages.back();
    CHECK(tt1.logits_bytes == approx(4.0 * s * V));
  }

  TEST_CASE("memory: PyTorch's loss_parallel backward is out of place, Megatron's in place") {
    // torch/distributed/tensor/parallel/loss.py `_nll_loss_and_log_softmax_backward` returns
    // `(grad_input + exp(x)) * grad_output` in fp32 beside the saved log-softmax x and the
    // zero-filled grad_input: 12 bytes per element of the vocabulary shard on top of the 4
    // held. Megatron-Core's cross_entropy.py writes the gradient into its saved softmax: the
    // bf16 logit gradient (2) only. A vocabulary of 2^20 makes the loss the largest working
    // set: s = 4096, b = 1, t = 8: N = 4096 x 1,048,576 / 8 = 536,870,912 elements.
    model::Model m = preset_model("llama3.1-8b");
    m.vocab = 1 << 20;
    const hw::Cluster c = cluster("dgx-h100");
    parallel::Training t;
    t.seq_len = 4096;
    t.global_batch = 8;
    parallel::Layout l = simple_layout(8, 1, 8, 1);
    l.sp = true;
    l.recompute = parallel::Recompute::full;
    const double n = 536870912.0;
    const auto meg = estimate_memory(m, c, t, l).stages.back();
    CHECK(meg.transient_bytes < 4.0 * n);
    t.framework = parallel::Framework::fsdp;
    t.zero_stage = 3;
    const auto tt = estimate_memory(m, c, t, l).stages.back();
    // 12 N = 6,442,450,944 B (6.0 GiB).
    CHECK(tt.transient_bytes == approx(6442450944.0));
    // A compiled loss keeps the bf16 logits and Inductor's fused backward writes bf16: 2 N.
    t.torch.compile = true;
    t.torch.compile_loss = true;
    const auto compiled = estimate_memory(m, c, t, l).stages.back();
    CHECK(compiled.transient_bytes < 0.5 * tt.transient_bytes);
  }

  TEST_CASE("memory: simulator in-flight override and buffers") {
    const model::Model m = preset_model("llama3.1-8b");
    const hw::Cluster c = cluster("dgx-h100");
    parallel::Training t;
    t.seq_len = 4096;
    t.global_batch = 64;
    const parallel::Layout l = simple_layout(1, 2, 4, 1);
    MemoryOptions opt;
    opt.inflight = {1.0, 1.0};
    const auto r = estimate_memory(m, c, t, l, opt);
    CHECK(r.stages[0].inflight == 1.0);
    const double a = costmodel::activation_bytes_per_layer(m, t, l);
    CHECK(r.stages[0].layer_activations_bytes == approx(16.0 * a));
    // Communicators PP, DP and the world, which the distributed optimizer reduces the gradient
    // norm over: 3 x 16 channels x 2 peers x (4 MiB + 4,915,200 + 524,288 B).
    CHECK(r.stages[0].communication_bytes ==
          approx(3.0 * 16 * 2 * (4.0 * 1048576 + 4915200 + 524288)));
    // NCCL_BUFFSIZE=16 MiB (NVIDIA/nccl docs/userguide/source/env.rst) grows the SIMPLE buffer
    // of each connection: 3 x 16 x 2 x (16 MiB + 4,915,200 + 524,288 B).
    parallel::Training big = t;
    big.nccl_buffsize = 16.0 * 1048576;
    CHECK(estimate_memory(m, c, big, l, opt).stages[0].communication_bytes ==
          approx(3.0 * 16 * 2 * (16.0 * 1048576 + 4915200 + 524288)));
    // Without the distributed optimizer the norm is reduced over the model-parallel group
    // (MegatronOptimizer.get_grad_stats_parallel_group), tp x pp = 2 ranks, a communicator apart
    // from the PP group of the same ranks: again 3.
    parallel::Training plain = t;
    plain.zero_stage = 0;
    CHECK(estimate_memory(m, c, plain, l, opt).stages[0].communication_bytes ==
          approx(3.0 * 16 * 2 * (4.0 * 1048576 + 4915200 + 524288)));
    // One GPU: no group has a second rank.
    CHECK(estimate_memory(m, c, plain, simple_layout(1, 1, 1, 1), opt).stages[0].communication_bytes == 0.0);
    // CUDA context 0.5 GiB + Hopper cuBLAS workspace 32 MiB.
    CHECK(r.stages[0].runtime_bytes == approx(0.5 * kGiB + 32.0 * 1048576));
  }

  TEST_CASE("memory: the CP communicators: the DP x CP group, and TE's ring pairs above cp = 2") {
    // TE AttnFuncWithCPAndKVP2P batches its send and receive only at cp = 2; above, each ring
    // step is a plain isend / irecv, which c10d runs on a two-rank communicator per peer pair
    // (ProcessGroupNCCL.cpp pointToPoint, getKeySendRecv): one to the next CP rank, one to the
    // previous. One communicator: 16 channels x 2 peers x (4 MiB + 4,915,200 + 524,288 B)
    // = 308,281,344 B.
    const model::Model m = preset_model("llama3.1-8b");
    const hw::Cluster c = cluster("dgx-a100-40gb");
    parallel::Training t;
    t.seq_len = 8192;
    t.global_batch = 64;
    const double one = 16.0 * 2 * (4.0 * 1048576 + 4915200 + 524288);
    CHECK(one == approx(308281344.0));
    parallel::Layout l = simple_layout(2, 1, 1, 1);
    l.sp = true;
    l.cp = 4;
    // TP, CP, the DP x CP group the gradients are reduced over (the CP ranks alone at dp = 1,
    // a group of its own: Megatron-Core get_data_parallel_group(with_context_parallel=True)),
    // the two ring pairs and the world (the distributed optimizer's gradient norm); no DP
    // group at dp = 1.
    CHECK(estimate_memory(m, c, t, l).stages[0].communication_bytes == approx(6.0 * one));
    // cp = 2: one batched send / receive on the CP group itself: TP, CP, DP x CP, the world.
    l.cp = 2;
    CHECK(estimate_memory(m, c, t, l).stages[0].communication_bytes == approx(4.0 * one));
    // dp = 2 adds the DP group (the loss is averaged over it).
    l.dp = 2;
    CHECK(estimate_memory(m, c, t, l).stages[0].communication_bytes == approx(5.0 * one));
    // PyTorch's context parallelism all-gathers K and V on the CP group: no pairs; FSDP shards
    // over dp_shard x cp: CP and DP x CP.
    parallel::Training fsdp = t;
    fsdp.framework = parallel::Framework::fsdp;
    parallel::Layout lf = simple_layout(1, 1, 1, 1);
    lf.cp = 4;
    CHECK(estimate_memory(m, c, fsdp, lf).stages[0].communication_bytes == approx(2.0 * one));
    // TE's all_gather and a2a run collectives on the CP group's own communicator: no pairs.
    l.cp = 4;
    l.dp = 1;
    for (const parallel::CpComm comm : {parallel::CpComm::all_gather, parallel::CpComm::a2a}) {
      l.cp_comm = comm;
      CHECK(estimate_memory(m, c, t, l).stages[0].communication_bytes == approx(4.0 * one));
    }
    // a2a+p2p: the all-to-all group's and the ring group's communicators beside the CP group's,
    // the ring's batched sends on its own where it has two ranks; a longer ring sends on the
    // pairs' two-rank communicators instead (cp 8 = 2 x 4: 4 + 1 + 2).
    l.cp_comm = parallel::CpComm::a2a_p2p;
    l.cp_a2a = 2;
    CHECK(estimate_memory(m, c, t, l).stages[0].communication_bytes == approx(6.0 * one));
    l.cp = 8;
    CHECK(estimate_memory(m, c, t, l).stages[0].communication_bytes == approx(7.0 * one));
  }

  TEST_CASE("memory: TE's context-parallel buffers in a layer's working set, per cp_comm_type") {
    // Llama 3.1 8B at tp 2, cp 4, seq 8192: s' b h / t = 2048 x 4096 / 2 bytes per unit; 8 of
    // 32 heads carry K and V (k/a = 1/4). p2p: two bf16 buffers of K,V and dK,dV (2 x 8 k/a):
    // 4 units. all_gather: the gathered K,V and their reordered copies (8 cp k/a) beside the
    // gathered-size dK,dV (4 cp k/a): 12. a2a: Q, K and V split by head, received and
    // reordered (3 x 2 (1 + 2 k/a)): 9. a2a+p2p: the larger of the two levels' (the ring's
    // buffers hold as many elements after the all-to-all): 9.
    const model::Model m = preset_model("llama3.1-8b");
    const hw::Cluster c = cluster("dgx-h100");
    parallel::Training t;
    t.seq_len = 8192;
    t.global_batch = 64;
    // Stage 0 of two: no logits, so the layer's working set is the step's largest.
    parallel::Layout l = simple_layout(2, 2, 1, 1);
    l.sp = true;
    l.cp = 4;
    const double unit = 2048.0 * 4096 / 2;
    const double ring = estimate_memory(m, c, t, l).stages[0].transient_bytes;
    l.cp_comm = parallel::CpComm::all_gather;
    CHECK(estimate_memory(m, c, t, l).stages[0].transient_bytes - ring == approx((12.0 - 4.0) * unit));
    l.cp_comm = parallel::CpComm::a2a;
    CHECK(estimate_memory(m, c, t, l).stages[0].transient_bytes - ring == approx((9.0 - 4.0) * unit));
    l.cp_comm = parallel::CpComm::a2a_p2p;
    l.cp_a2a = 2;
    CHECK(estimate_memory(m, c, t, l).stages[0].transient_bytes - ring == approx((9.0 - 4.0) * unit));
  }

}

TEST_SUITE("costmodel") {
  TEST_CASE("memory: torchtitan per-op selective checkpointing keeps the saved matmul outputs") {
    // torchtitan/parallelisms/parallelize_llama.py @9dec370 `_save_list`: block input, wq, wv,
    // w1 and w2 outputs, SDPA output and log-sum-exp (ops::layer_ops for the order).
    const model::Model m = preset_model("llama3.1-8b");
    parallel::Training t;
    t.seq_len = 8192;
    parallel::Layout l = simple_layout(1, 1, 1, 2);
    l.recompute = parallel::Recompute::selective_op;
    // s b = 16384, h = 4096, f = 14336, 32 heads, k/a = 0.25:
    // s b h (2 + 2 + 0.5 + 2 + 2) + 2 s b f + 4 * 32 * s b
    // = 67,108,864 * 8.5 + 469,762,048 + 2,097,152 = 1,042,284,544 B.
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(1042284544.0));
    // TP 2 with SP: input shard s b h, (2 + 0.5 + 2)/2 s b h, s b f, w2's full-width partial
    // sum 2 s b h, the two reduce-scatter shards 2 s b h, log-sum-exp halved:
    // 67,108,864 * (1 + 2.25 + 2 + 2) + 234,881,024 + 1,048,576 = 722,468,864 B.
    l.tp = 2;
    l.sp = true;
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(722468864.0));
  }
}

TEST_SUITE("costmodel") {
  TEST_CASE("memory: FSDP2 states of a two-block Llama-3.1-8B at world size 8, by reshard_after_forward") {
    // pytorch/pytorch torch/distributed/_composable/fsdp (_fsdp_param.py: fp32 shards,
    // _fsdp_state.py: the root is not resharded after forward) and torchtitan apply_fsdp
    // (@9dec370: the last block keeps its parameters). One block: 4096^2 (wq) + 2 * 4096 * 1024
    // (wk, wv) + 4096^2 (wo) + 3 * 4096 * 14336 + 2 * 4096 (norms) = 218,112,000 parameters;
    // root: 2 * 128,256 * 4096 + 4096 = 1,050,677,248; stage: 1,486,901,248.
    const model::Model m = two_block_8b();
    const hw::Cluster c = cluster("dgx-h100");
    const parallel::Training t = fsdp2_training();
    const parallel::Layout l = simple_layout(1, 1, 8, 1);
    auto params_at = [&](int reshard) {
      parallel::Training tr = t;
      tr.torch.reshard_after_forward = reshard;
      return estimate_memory(m, c, tr, l).stages[0];
    };
    // Shards: fp32 parameters 4 * 1,486,901,248 / 8 = 743,450,624, fp32 gradients the same,
    // Adam moments 8 * 1,486,901,248 / 8. Root unsharded in bf16: 2,101,354,496.
    const auto full = params_at(parallel::TorchNative::kReshardFull);
    CHECK(full.params_bytes == approx(743450624.0 + 2101354496.0));
    CHECK(full.grads_bytes == approx(743450624.0));
    CHECK(full.optimizer_bytes == approx(1486901248.0));
    // false: both blocks stay gathered, + 2 * 436,224,000.
    CHECK(params_at(1).params_bytes == approx(743450624.0 + 2101354496.0 + 872448000.0));
    // torchtitan's default: the last block only.
    CHECK(params_at(parallel::TorchNative::kReshardDefault).params_bytes ==
          approx(743450624.0 + 2101354496.0 + 436224000.0));
    // reshard over groups of 4: each block leaves a quarter, 2 * 436,224,000 / 4.
    CHECK(params_at(4).params_bytes == approx(743450624.0 + 2101354496.0 + 218112000.0));
    // The caching allocator's view leaves out the CUDA context and the NCCL buffers of the one
    // DP communicator: 0.5 GiB + 16 x 2 x 9,633,792 B.
    CHECK(full.outside_allocator_bytes == approx(0.5 * kGiB + 16.0 * 2 * 9633792.0));
  }

  TEST_CASE("memory: torch.compile drops the output torchtitan's per-op policy saves but no backward reads") {
    // Under compile the partitioner keeps what the backward reads: w2's output (2 s b h) goes.
    const model::Model m = preset_model("llama3.1-8b");
    parallel::Training t;
    t.seq_len = 8192;
    t.framework = parallel::Framework::fsdp;
    parallel::Layout l = simple_layout(1, 1, 1, 2);
    l.recompute = parallel::Recompute::selective_op;
    const double eager = costmodel::activation_bytes_per_layer(m, t, l);
    t.torch.compile = true;
    // s b h = 16384 * 4096 = 67,108,864 elements; 2 bytes each.
    CHECK(eager - costmodel::activation_bytes_per_layer(m, t, l) == approx(134217728.0));
  }

  TEST_CASE("memory: torchtitan's per-layer checkpointing keeps every ac_freq-th block's input only") {
    // torchtitan parallelize_llama.py @820504e: ptd_checkpoint_wrapper wraps the blocks with
    // _count % ac_freq == 0; the others save everything. Llama-3.1-8B, s = 8192, b = 2, no TP:
    // a checkpointed block keeps its input, 2 s b h = 2 * 16384 * 4096 = 134,217,728 B.
    const model::Model m = preset_model("llama3.1-8b");
    parallel::Training t;
    t.seq_len = 8192;
    t.framework = parallel::Framework::fsdp;
    parallel::Layout l = simple_layout(1, 1, 1, 2);
    l.recompute = parallel::Recompute::full;
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(134217728.0));
    l.recompute = parallel::Recompute::none;
    const double whole = costmodel::activation_bytes_per_layer(m, t, l);
    l.recompute = parallel::Recompute::selective_layer;
    l.ac_freq = 2;  // one block in two checkpointed
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(0.5 * whole + 0.5 * 134217728.0));
    l.ac_freq = 4;
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(0.75 * whole + 0.25 * 134217728.0));
    l.ac_freq = 1;  // every block: full recompute
    CHECK(costmodel::activation_bytes_per_layer(m, t, l) == approx(134217728.0));
  }

  TEST_CASE("memory: a compiled loss keeps the bf16 logits instead of the fp32 log-softmax") {
    // torchtitan compiles the loss under --training.compile (components/loss.py @820504e,
    // train.py @4d88a8a44; commented out @9dec370). Llama-3.1-8B, s b = 4096, V = 128,256,
    // no TP: eager holds the fp32 log-softmax 4 s b V = 2,101,346,304 B; compiled the bf16
    // logits 2 s b V = 1,050,673,152 B.
    const model::Model m = preset_model("llama3.1-8b");
    const hw::Cluster c = cluster("dgx-h100");
    parallel::Training t;
    t.seq_len = 4096;
    t.global_batch = 64;
    t.framework = parallel::Framework::fsdp;
    t.zero_stage = 3;
    const parallel::Layout l = simple_layout(1, 2, 4, 1);
    CHECK(estimate_memory(m, c, t, l).stages.back().logits_bytes == approx(2101346304.0));
    t.torch.compile = true;
    CHECK(estimate_memory(m, c, t, l).stages.back().logits_bytes == approx(1050673152.0));
    t.torch.compile_loss = false;  // torchtitan @9dec370
    CHECK(estimate_memory(m, c, t, l).stages.back().logits_bytes == approx(2101346304.0));
  }

  TEST_CASE("memory: FSDP2 under pipelining accumulates unsharded fp32 gradients until the last backward") {
    // torch/distributed/pipelining/stage.py backward_maybe_with_nosync: FSDP modules run every
    // micro-batch's backward with set_requires_gradient_sync(False); FSDPParam
    // to_accumulated_grad_if_needed keeps the unsharded gradient in the reduce dtype (fp32).
    // Two-block Llama-3.1-8B over pp = 2: stage 0 holds the embedding, 128,256 * 4096 =
    // 525,336,576, and one block, 218,112,000: 743,448,576 parameters, 4 B each.
    const model::Model m = two_block_8b();
    const hw::Cluster c = cluster("dgx-h100");
    const parallel::Training t = fsdp2_training();
    const auto s0 = estimate_memory(m, c, t, simple_layout(1, 2, 4, 1)).stages[0];
    CHECK(s0.grads_bytes == approx(4.0 * 743448576.0));
    // Without PP the gradients are fp32 shards over the 8 ranks: 4 * 1,486,901,248 / 8.
    CHECK(estimate_memory(m, c, t, simple_layout(1, 1, 8, 1)).stages[0].grads_bytes ==
          approx(743450624.0));
  }

  /// Llama 3's 405B grid on 16,384 H100 (arXiv 2407.21783 Table 4, §3.3.2): TP 8, PP 16 with
  /// 7 / 8 ... 8 / 7 layers, VP 8, DP 128, sequence 8192, 16 micro-batches of one sequence.
  /// A model on a cluster with its training and layout.
  struct Setting {
    model::Model m;
    hw::Cluster c;
    parallel::Training t;
    parallel::Layout l;
  };

  Setting llama3_grid() {
    Setting g{preset_model("llama3.1-405b"), cluster("dgx-h100"), {}, {}};
    g.t.seq_len = 8192;
    g.t.global_batch = 2048;
    g.t.grad_dtype = parallel::Precision::fp32;
    g.l.tp = 8;
    g.l.pp = 16;
    g.l.vp = 8;
    g.l.dp = 128;
    g.l.sp = true;
    g.l.schedule = parallel::Schedule::interleaved;
    g.l.first_stage_layers = 7;
    g.l.last_stage_layers = 7;
    return g;
  }

  TEST_CASE("memory: ZeRO-2 under an interleaved round holds two chunks' gradients unsharded") {
    // Stage 1 holds 8 layers: per layer the linears q, o (h^2 each), k, v (h * 8 * 128 each)
    // and w1, w3, w2 (3 h F), h = 16,384, F = 53,248, over TP 8, plus two norms of h:
    // phi = 8 * (2,281,701,376 + 2,617,245,696) / 8 + 8 * 2 * 16,384 = 3,187,933,184.
    // fp32 gradients: the shard 4 phi / 128 and, as 16 micro-batches = PP make one round, the
    // chunk in backward and the one reduce-scattering: 4 phi * 2 / 8 -> 3.0618 GiB in all.
    Setting g = llama3_grid();
    const double phi = 3187933184.0;
    g.t.zero_stage = 1;
    CHECK(estimate_memory(g.m, g.c, g.t, g.l).stages[1].grads_bytes == approx(4.0 * phi));
    g.t.zero_stage = 2;
    const auto s1 = estimate_memory(g.m, g.c, g.t, g.l).stages[1];
    CHECK(s1.grads_bytes == approx(4.0 * phi / 128 + 4.0 * phi * 2 / 8));
    CHECK(s1.grads_bytes / kGiB == approx(3.0618).epsilon(1e-4));
    // Two rounds (32 micro-batches): every chunk's backwards recur, all hold their gradients.
    g.t.global_batch = 4096;
    CHECK(estimate_memory(g.m, g.c, g.t, g.l).stages[1].grads_bytes ==
          approx(4.0 * phi / 128 + 4.0 * phi));
    // 1F1B: one chunk per stage, accumulated from its first backward to the last.
    g.t.global_batch = 2048;
    g.l.vp = 1;
    g.l.schedule = parallel::Schedule::one_f_one_b;
    CHECK(estimate_memory(g.m, g.c, g.t, g.l).stages[1].grads_bytes ==
          approx(4.0 * phi / 128 + 4.0 * phi));
  }

  TEST_CASE("memory: with expandable segments fragmentation costs cache, not capacity") {
    // c10/cuda/CUDACachingAllocator.cpp release_blocks: at the limit the default allocator frees
    // only segments with no live block, an expandable one unmaps every free page. Reserved is
    // allocated + 0.31 (activations + transients) while it fits and stops at the device.
    Setting g = llama3_grid();
    g.t.zero_stage = 2;
    const auto plain = estimate_memory(g.m, g.c, g.t, g.l);
    const auto& p1 = plain.stages[1];
    CHECK(p1.reserved_bytes ==
          approx(p1.allocated_bytes + 0.31 * (p1.activations_bytes + p1.transient_bytes)));
    CHECK_FALSE(plain.fits);
    g.t.expandable_segments = true;
    const auto exp = estimate_memory(g.m, g.c, g.t, g.l);
    const auto& e1 = exp.stages[1];
    CHECK(e1.allocated_bytes == approx(p1.allocated_bytes));
    CHECK(e1.allocated_bytes < g.c.gpu.memory_bytes);
    CHECK(e1.reserved_bytes == g.c.gpu.memory_bytes);
    CHECK(e1.fragmentation_bytes == approx(g.c.gpu.memory_bytes - e1.allocated_bytes));
    CHECK(exp.fits);
    CHECK(exp.peak_stage == 1);  // stages 1-7 reach the device; 1 is the fullest allocated
    // Over time (the trace's counter) the same rule: capped at the peak, free below it.
    CHECK(costmodel::reserved_with_activations(e1, e1.activations_bytes) == g.c.gpu.memory_bytes);
    CHECK(costmodel::reserved_with_activations(p1, p1.activations_bytes) == approx(p1.reserved_bytes));
    CHECK(costmodel::reserved_with_activations(e1, 0.0) ==
          approx(costmodel::reserved_with_activations(p1, 0.0)));
    // Where the cache fits under the device, the setting changes nothing.
    g.l.recompute = parallel::Recompute::full;
    const auto full = estimate_memory(g.m, g.c, g.t, g.l).stages[1];
    CHECK(full.fragmentation_bytes ==
          approx(0.31 * (full.activations_bytes + full.transient_bytes)));
  }

  /// Llama-3.1-8B on 8 GPUs at seq 8192, data parallel only: the setting of the memory knobs
  /// below.
  Setting data_parallel_8b() {
    Setting g{preset_model("llama3.1-8b"), cluster("dgx-h100"), {}, {}};
    g.t.seq_len = 8192;
    g.t.global_batch = 8;
    g.l.dp = 8;
    return g;
  }

  TEST_CASE("memory: offloaded layers leave the GPU but one in flight (Megatron-Core cpu_offloading)") {
    // Transformer Engine `cpu_offload.py` (AsyncDoubleBufferGroupOffloadHandler): the saved
    // tensors of the first N layers go to the host; the last L - N stay, and one offloaded
    // layer is on the device besides them. 32 layers, 20 offloaded: 13 / 32 of the layers'
    // activations stay.
    Setting g = data_parallel_8b();
    const auto all = estimate_memory(g.m, g.c, g.t, g.l).stages[0];
    g.l.offload_layers = 20;
    const auto off = estimate_memory(g.m, g.c, g.t, g.l).stages[0];
    CHECK(off.layer_activations_bytes == approx(all.layer_activations_bytes * 13.0 / 32.0));
    CHECK(off.params_bytes == approx(all.params_bytes));
    CHECK(off.logits_bytes == approx(all.logits_bytes));
    // 31 offloaded: 2 of 32 layers on the device.
    g.l.offload_layers = 31;
    const auto most = estimate_memory(g.m, g.c, g.t, g.l).stages[0];
    CHECK(most.layer_activations_bytes == approx(all.layer_activations_bytes * 2.0 / 32.0));
  }

  TEST_CASE("memory: Adam moments in bf16 keep 8 bytes of optimizer state per parameter") {
    // Megatron-Core precision-aware optimizer (`optimizer_config.py` exp_avg_dtype,
    // exp_avg_sq_dtype): fp32 master (4) + two bf16 moments (2 + 2) = 8 B/param instead of 12,
    // sharded over DP 8 by the distributed optimizer.
    Setting g = data_parallel_8b();
    const auto fp32 = estimate_memory(g.m, g.c, g.t, g.l).stages[0];
    g.t.adam_moments_dtype = parallel::Precision::bf16;
    const auto bf16 = estimate_memory(g.m, g.c, g.t, g.l).stages[0];
    CHECK(bf16.optimizer_bytes == approx(fp32.optimizer_bytes * 8.0 / 12.0));
    // 8,030,261,248 parameters x 8 B / 8 ranks = 8,030,261,248 B = 7.4787 GiB.
    CHECK(bf16.optimizer_bytes / kGiB == approx(7.4787).epsilon(1e-4));
  }

  TEST_CASE("memory: a fused cross-entropy holds the bf16 logits and writes a bf16 gradient") {
    // flash-attn `losses/cross_entropy.py` (llm-foundry's default loss): saves the logits and a
    // per-row log-sum-exp; backward allocates the bf16 logit gradient. PyTorch FSDP without
    // vocabulary sharding, s = 8192, b = 1, V = 128,256: held 2 s V = 2,101,346,304 B
    // (1.957 GiB), the backward's transient the same again.
    Setting g = data_parallel_8b();
    g.t.framework = parallel::Framework::fsdp;
    g.t.zero_stage = 3;
    g.t.fused_cross_entropy = true;
    const auto s = estimate_memory(g.m, g.c, g.t, g.l).stages[0];
    CHECK(s.logits_bytes == approx(2.0 * 8192 * 128256));
    g.t.fused_cross_entropy = false;
    const auto eager = estimate_memory(g.m, g.c, g.t, g.l).stages[0];
    // torchtitan's eager loss keeps the fp32 log-softmax (4 B) after `del pred`.
    CHECK(eager.logits_bytes == approx(4.0 * 8192 * 128256));
  }

  TEST_CASE("memory: record_stream fragmentation only where activations pass through NCCL") {
    // c10d ProcessGroupNCCL records the NCCL stream on every collective's tensors unless
    // TORCH_NCCL_AVOID_RECORD_STREAMS=1; the caching allocator then holds their blocks until the
    // collective's event completes. Data parallelism alone never communicates activations.
    Setting g = data_parallel_8b();
    g.l.recompute = parallel::Recompute::full;  // a layout that fits, so the cache is not cut
    const auto dp = estimate_memory(g.m, g.c, g.t, g.l).stages[0];
    REQUIRE(dp.allocated_bytes < g.c.gpu.memory_bytes);
    CHECK(dp.fragmentation_bytes == 0.0);
    CHECK(dp.reserved_bytes == approx(dp.allocated_bytes));
    // The allocator still caches those blocks and reports them as reserved; at the device's
    // limit it frees the whole free segments and retries (`release_cached_blocks`).
    CHECK(dp.torch_reserved_bytes == approx(dp.allocated_bytes + 0.25 * (dp.activations_bytes + dp.transient_bytes)));
    g.l.tp = 2;
    g.l.dp = 4;
    g.l.sp = true;
    const auto tp = estimate_memory(g.m, g.c, g.t, g.l).stages[0];
    CHECK(tp.fragmentation_bytes == approx(0.31 * (tp.activations_bytes + tp.transient_bytes)));
    g.t.avoid_record_streams = true;
    const auto avoided = estimate_memory(g.m, g.c, g.t, g.l).stages[0];
    CHECK(avoided.fragmentation_bytes == 0.0);
  }

  TEST_CASE("memory: sharded FP8 weights keep FP8 copies of the two gathered layers only") {
    // Megatron-FSDP (optim_grads_params) with fp8_param_gather: the FP8 shards are gathered as
    // FP8 a layer at a time (the one computed and the one prefetched) and backward adds the
    // column-wise copy of each. Llama-3.1-8B linears per layer: attention 4096 x 10,240 and MLP
    // 3 x 4096 x 14,336 = 218,103,808; current scaling 1 B each: 2 x 218,103,808 B = 0.40625 GiB.
    Setting g = data_parallel_8b();
    g.t.zero_stage = 3;
    g.t.fp8.recipe = parallel::Fp8Recipe::current;
    g.t.fp8.param_gather = true;
    const auto s = estimate_memory(g.m, g.c, g.t, g.l).stages[0];
    const double q = parallel::quantized_bytes_per_element(parallel::Fp8Recipe::current);
    CHECK(s.fp8_cache_bytes == approx(2.0 * 218103808 * q));
    CHECK(s.fp8_cache_bytes / kGiB == approx(0.40625).epsilon(1e-3));
  }

  TEST_CASE("memory: TE's FlashAttention backend saves a second copy of the attention output at mbs > 1") {
    // TransformerEngine attention.py (v1.7 to v1.11): before Hopper DotProductAttention runs
    // flash-attn (only compute 9.0 prefers cuDNN), whose FlashAttnFunc saves `out` (b, s, ...),
    // and hands Megatron-Core `out.view(b, s, -1).transpose(0, 1).contiguous()`, a copy for
    // b > 1 that the output projection saves. Llama-3.1-8B, s = 8192, CP 2, TP 2 with SP,
    // mbs 2: 2 B x 4096 tokens x 2 sequences x 32 heads x 128 / 2 = 32 MiB per layer; stage 0
    // of PP 2 holds 16 layers for 2 micro-batches in flight (1F1B): 32 MiB x 16 x 2 = 1 GiB.
    const model::Model m = preset_model("llama3.1-8b");
    hw::Cluster a100 = cluster("dgx-a100-40gb");
    a100.nodes = 2;
    parallel::Training t;
    t.seq_len = 8192;
    t.global_batch = 1024;
    t.attention = parallel::AttentionKernel::flash2;
    parallel::Layout l = simple_layout(2, 2, 2, 2);
    l.cp = 2;
    l.sp = true;
    const auto saved = [&](const hw::Cluster& c, const parallel::Training& tr, const parallel::Layout& ly) {
      return estimate_memory(m, c, tr, ly).stages.front().layer_activations_bytes;
    };
    parallel::Training cudnn = t;
    cudnn.attention = parallel::AttentionKernel::cudnn;
    REQUIRE(estimate_memory(m, a100, t, l).stages.front().inflight == approx(2.0));
    CHECK(saved(a100, t, l) - saved(a100, cudnn, l) == approx(1.0 * kGiB));
    // b = 1: the transpose is already contiguous, no copy.
    parallel::Layout one = l;
    one.mbs = 1;
    CHECK(saved(a100, t, one) == approx(saved(a100, cudnn, one)));
    // Hopper: TE picks cuDNN's fused attention, which takes (s, b) tensors as they are.
    hw::Cluster h100 = cluster("dgx-h100");
    h100.nodes = 2;
    CHECK(saved(h100, t, l) == approx(saved(h100, cudnn, l)));
    // Core attention recomputed (Megatron's selective default): flash-attn saves nothing.
    parallel::Layout selective = l;
    selective.recompute = parallel::Recompute::selective;
    CHECK(saved(a100, t, selective) == approx(saved(a100, cudnn, selective)));
    // Selective recompute of the MLP only: core attention keeps both copies.
    selective.recompute_modules.add(parallel::RecomputeModule::mlp);
    CHECK(saved(a100, t, selective) - saved(a100, cudnn, selective) == approx(1.0 * kGiB));
    // Full recompute keeps only the layer input.
    parallel::Layout full = l;
    full.recompute = parallel::Recompute::full;
    CHECK(saved(a100, t, full) == approx(saved(a100, cudnn, full)));
  }
}
