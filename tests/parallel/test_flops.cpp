// Megatron model FLOPs (`NVIDIA/Megatron-LM: megatron/training/training.py::
// num_floating_point_operations`, master d98e8a6 and core_r0.6.0).
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include "tetra/parallel/flops.hpp"
#include "tetra/model/presets.hpp"

using tetra::test::approx;
using namespace tetra::model;
using namespace tetra::parallel;

TEST_SUITE("llama") {
  TEST_CASE("Megatron FLOPs per token, Llama-3.1-8B at s = 8192 (num_floating_point_operations)") {
    const auto m = find_model_preset("llama3.1-8b");
    REQUIRE(m);
    // current master: 5.1470e10 per token; core_r0.6.0: 5.7913e10 (reference checks [derived]).
    CHECK(megatron_flops_per_token(*m, 8192) == approx(5.1470e10).epsilon(1e-4));
    CHECK(megatron_r060_step_flops(*m, 8192, 1) / 8192 == approx(5.7913e10).epsilon(1e-4));
  }

  TEST_CASE("Megatron FLOPs of a tiny model, computed by hand") {
    Model m;
    m.arch = Arch::llama;
    m.layers = 2;
    m.hidden = 8;
    m.ffn_hidden = 16;
    m.heads = 2;
    m.kv_heads = 1;
    m.vocab = 10;
    // h = 8, F = 16, L = 2, q = 8, kv = 4, V = 10, E = 3, s = 4, B = 3, T = 12:
    // 6hFEL = 6*8*16*3*2 = 4608; 6L(h(q+2kv) + qh) = 12*(8*16 + 64) = 2304; 6hV = 480
    // T * 7392 = 88704; B s^2 L 6 q = 3*16*2*6*8 = 4608; total 93312.
    CHECK(megatron_step_flops(m, 4, 3) == approx(93312.0));
    // r0.6.0: 12*B*s*L*h^2 = 12*3*4*2*64 = 18432;
    // 1 + (16/8)*1.5 + 1/2 + 4/8 + 10/(2*2*8) = 1 + 3 + 0.5 + 0.5 + 0.3125 = 5.3125 -> 97920.
    CHECK(megatron_r060_step_flops(m, 4, 3) == approx(97920.0));
    // With q = h the r0.6.0 form equals the current one with the attention term doubled:
    CHECK(megatron_r060_step_flops(m, 4, 3) == approx(93312.0 + 4608.0));
    // tetrasim's MFU FLOPs pad the vocabulary as Megatron does (`_vocab_size_with_padding`:
    // a multiple of 128 x tp): tp 2 -> V = 256, 6hV = 12288, T * 19200 + 4608 = 235008.
    Training t;
    t.seq_len = 4;
    t.global_batch = 3;
    Layout l;
    l.tp = 2;
    CHECK(spec_step_flops(m, t, l) == approx(235008.0));
  }

  TEST_CASE("GPT (GeLU) uses E = 2 and a non-gated MLP") {
    const auto m = find_model_preset("gpt3-175b");
    REQUIRE(m);
    // 12·B·s·L·h²·(1 + F/h + 1 + s/h + V/(2Lh)) with F = 4h, no GQA: r0.6.0 = current + attention.
    const double cur = megatron_step_flops(*m, 2048, 1);
    const double attn = 1.0 * 2048.0 * 2048.0 * m->layers * 6.0 * m->hidden;  // B s^2 L 6 q
    CHECK(megatron_r060_step_flops(*m, 2048, 1) == approx(cur + attn).epsilon(1e-9));
  }
}
