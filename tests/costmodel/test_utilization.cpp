// MFU, HFU and the utilization of the GEMMs' own peak (costmodel/utilization.hpp): recomputed
// FLOPs by hand on a tiny model, the full-recompute identity (one more forward: a third of the
// layers' model FLOPs; Korthikanti et al., arXiv 2205.05198, who count recomputation in
// hardware FLOPs, as PaLM's appendix B defines HFU), and the peaks of the presets' datasheets.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include "tetra/costmodel/utilization.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/parallel/flops.hpp"
#include "tetra/parallel/params.hpp"

using tetra::test::approx;
using namespace tetra;
using costmodel::recomputed_step_flops;

namespace {

/// The tiny llama of tests/parallel/test_flops.cpp: h 8, F 16, 2 layers, 2 heads, 1 kv head,
/// vocabulary 10.
model::Model tiny() {
  model::Model m;
  m.arch = model::Arch::llama;
  m.layers = 2;
  m.hidden = 8;
  m.ffn_hidden = 16;
  m.heads = 2;
  m.kv_heads = 1;
  m.vocab = 10;
  return m;
}

model::Model preset(const char* name) {
  const auto m = model::find_model_preset(name);
  REQUIRE(m);
  return *m;
}

parallel::Layout layout(int tp, int pp, int dp, parallel::Recompute rc) {
  parallel::Layout l;
  l.tp = tp;
  l.pp = pp;
  l.dp = dp;
  l.sp = tp > 1;
  l.recompute = rc;
  return l;
}

}  // namespace

TEST_SUITE("costmodel") {
  TEST_CASE("recomputed FLOPs of a tiny model by hand") {
    const model::Model m = tiny();
    parallel::Training t;
    t.seq_len = 4;
    t.global_batch = 3;  // mbs 1, dp 1: 3 micro-batches of T = 4 tokens
    // Forward GEMMs of one layer and micro-batch (2·M·N·K, M = T = 4): qkv 2·4·8·(8 + 2·4) =
    // 1024, proj 2·4·8·8 = 512, fc1 (SwiGLU, N = 2F) 2·4·8·32 = 2048, fc2 2·4·16·8 = 1024:
    // 4608. Causal core attention 4·b·s²·heads·d / 2 = 4·1·16·2·4 / 2 = 256.
    SUBCASE("full: every layer's forward again") {
      // (4608 + 256) · 3 micro-batches · 2 layers = 29,184.
      CHECK(recomputed_step_flops(m, t, layout(1, 1, 1, parallel::Recompute::full)) == approx(29184.0));
    }
    SUBCASE("selective: core attention's forward again (Megatron-Core's default module)") {
      // 256 · 3 · 2 = 1,536.
      CHECK(recomputed_step_flops(m, t, layout(1, 1, 1, parallel::Recompute::selective)) == approx(1536.0));
    }
    SUBCASE("none") {
      CHECK(recomputed_step_flops(m, t, layout(1, 1, 1, parallel::Recompute::none)) == 0.0);
    }
    SUBCASE("HFU and MFU on an H100 at half its BF16 peak") {
      // Model FLOPs (test_flops.cpp's formula, vocabulary padded to 128 at tp 1):
      // 12·(4608 + 2304 + 6·8·128) + 3·16·2·6·8 = 156,672 + 4,608 = 161,280.
      const hw::Gpu h100 = *hw::find_gpu_preset("h100-sxm-80gb");
      const parallel::Layout l = layout(1, 1, 1, parallel::Recompute::full);
      REQUIRE(parallel::spec_step_flops(m, t, l) == approx(161280.0));
      const costmodel::Utilization u = costmodel::utilization(m, t, l, h100, 494.5e12);
      CHECK(u.mfu == approx(0.5));
      // 0.5 · (1 + 29,184 / 161,280) = 0.5 · 1.180952 = 0.590476.
      CHECK(u.hfu == approx(0.5904762).epsilon(1e-6));
      CHECK(std::string(u.mfu_peak.precision) == "bf16");
      CHECK(u.mfu_peak.flops == 989e12);
      // BF16 GEMMs: their peak is MFU's.
      CHECK(std::string(u.precision_peak.precision) == "bf16");
      CHECK(u.precision_peak_utilization == approx(0.5));
    }
  }

  TEST_CASE("full recomputation adds a third of the layers' model FLOPs (GPT-3 175B)") {
    // Megatron's count with the LM head apart: the head (6·h·V per token) is not recomputed,
    // the layers run one forward (a third of forward + backward) again.
    const model::Model m = preset("gpt3-175b");
    parallel::Training t;
    t.seq_len = 2048;
    t.global_batch = 64;
    const parallel::Layout l = layout(8, 8, 2, parallel::Recompute::full);
    const double tokens = 2048.0 * 64;
    const double head = 6.0 * m.hidden * static_cast<double>(parallel::padded_vocab(m, l.tp)) * tokens;
    const double model = parallel::spec_step_flops(m, t, l);
    CHECK(recomputed_step_flops(m, t, l) == approx((model - head) / 3.0).epsilon(1e-9));
  }

  TEST_CASE("selective recomputation adds a third of the attention term (Llama-3.1-8B)") {
    // Megatron's causal core-attention term B·s²·L·6·q over three (its forward), for
    // B = 64, s = 8192, L = 32, q = 4096: 2·64·8192²·32·4096 = 1.1259e15.
    const model::Model m = preset("llama3.1-8b");
    parallel::Training t;
    t.seq_len = 8192;
    t.global_batch = 64;
    const double want = 2.0 * 64 * 8192.0 * 8192.0 * 32 * 4096;
    CHECK(recomputed_step_flops(m, t, layout(2, 2, 4, parallel::Recompute::selective)) == approx(want).epsilon(1e-9));
  }

  TEST_CASE("MoE: full recomputation of Mixtral-8x7B, expert GEMMs over the EP ranks") {
    // Every layer is MoE; the recomputed forward is a third of the layers' model FLOPs plus the
    // router GEMM's forward (2·T·h·E per layer, which Megatron leaves out of model FLOPs).
    const model::Model m = preset("mixtral-8x7b");
    parallel::Training t;
    t.seq_len = 4096;
    t.global_batch = 64;
    parallel::Layout l = layout(2, 4, 4, parallel::Recompute::full);
    l.ep = 4;
    const double tokens = 4096.0 * 64;
    const double head = 6.0 * m.hidden * static_cast<double>(parallel::padded_vocab(m, l.tp)) * tokens;
    const double router = 2.0 * tokens * m.hidden * m.moe->num_experts * m.layers;
    const double model = parallel::spec_step_flops(m, t, l);
    CHECK(recomputed_step_flops(m, t, l) == approx((model - head) / 3.0 + router).epsilon(1e-9));
  }

  TEST_CASE("the GEMMs' own peak: FP8 and MXFP8 at the FP8 rate, NVFP4 at the FP4 rate") {
    // Dense rates of the presets (hw/src/presets.cpp): H100 SXM FP8 1,979 TFLOP/s [H100-DS];
    // B200 FP8 4,500 and FP4 9,000 [DGXB200].
    const hw::Gpu h100 = *hw::find_gpu_preset("h100-sxm-80gb");
    const hw::Gpu b200 = *hw::find_gpu_preset("b200");
    parallel::Training t;
    t.fp8.recipe = parallel::Fp8Recipe::delayed;
    CHECK(std::string(costmodel::gemm_peak(h100, t).precision) == "fp8");
    CHECK(costmodel::gemm_peak(h100, t).flops == 1979e12);
    t.fp8.recipe = parallel::Fp8Recipe::mxfp8;
    CHECK(costmodel::gemm_peak(b200, t).flops == 4500e12);
    t.fp8.recipe = parallel::Fp8Recipe::nvfp4;
    CHECK(std::string(costmodel::gemm_peak(b200, t).precision) == "fp4");
    CHECK(costmodel::gemm_peak(b200, t).flops == 9000e12);
    t.fp8.recipe = parallel::Fp8Recipe::none;
    t.precision = parallel::Precision::fp16;
    CHECK(std::string(costmodel::gemm_peak(h100, t).precision) == "fp16");
    CHECK(costmodel::gemm_peak(h100, t).flops == 989e12);
    // 494.5 TFLOP/s of model FLOPs in an FP8 run on an H100: MFU 50 %, 494.5 / 1979 =
    // 24.99 % of the FP8 peak.
    const model::Model m = tiny();
    t.precision = parallel::Precision::bf16;
    t.fp8.recipe = parallel::Fp8Recipe::current;
    t.seq_len = 4;
    t.global_batch = 3;
    const costmodel::Utilization u =
        costmodel::utilization(m, t, layout(1, 1, 1, parallel::Recompute::none), h100, 494.5e12);
    CHECK(u.mfu == approx(0.5));
    CHECK(u.hfu == approx(0.5));
    CHECK(u.precision_peak_utilization == approx(494.5 / 1979.0));
  }
}
