#pragma once
// Synthetic calibration tables generated from known parameters plus a fixed-seed noise, so
// the fits can be checked to recover those parameters. tests/data/calib/synthetic_h100.csv is
// this generator's output (test_fit.cpp checks that it still is).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tetra/calib/curve_fit.hpp"
#include "tetra/costmodel/profile.hpp"

namespace tetra::calib::testing {

/// The parameters the synthetic tables are generated from.
struct SyntheticTruth {
  // GEMM: wave-quantised model of fit.hpp, tile 128 x 128 on 132 SMs (an H100 SXM).
  double gemm_peak_flops = 760e12;
  double gemm_launch_s = 4.0e-6;
  double gemm_wave_s = 1.5e-6;
  int sms = 132;
  // Attention (FlashAttention FLOP convention): t = launch + flops / rate.
  double attn_fwd_flops = 520e12;
  double attn_bwd_flops = 390e12;
  double attn_launch_s = 12e-6;
  // Memory-bound kernels: t = launch + bytes / bw, per kernel.
  struct Mem {
    const char* kernel;
    double launch_s;
    double Bps;
  };
  std::vector<Mem> memory = {{"adam", 5e-6, 2.6e12},  {"copy", 3e-6, 3.0e12},  {"cross_entropy", 8e-6, 2.2e12},
                             {"rmsnorm", 4e-6, 2.7e12}, {"rope", 4e-6, 2.5e12}, {"swiglu", 3.5e-6, 2.9e12}};
  // Collectives: t = latency + S * f / busbw per group.
  struct Coll {
    const char* op;
    int ranks;
    int per_node;
    double latency_s;
    double busbw_Bps;
  };
  std::vector<Coll> collectives = {
      {"all_reduce", 8, 8, 18e-6, 360e9},   {"all_gather", 8, 8, 11e-6, 350e9}, {"reduce_scatter", 8, 8, 12e-6, 345e9},
      {"all_to_all", 8, 8, 14e-6, 320e9},   {"send_recv", 2, 2, 6e-6, 380e9},   {"all_reduce", 16, 8, 35e-6, 92e9},
      {"reduce_scatter", 16, 8, 28e-6, 45e9}, {"all_gather", 2, 1, 15e-6, 47e9}};
  double noise = 0.01;              ///< multiplicative noise amplitude: t * (1 + noise * u), u in [-1, 1)
  std::uint64_t seed = 20261122;
};

/// u in [-1, 1) from the top 53 bits of a 64-bit Mersenne twister (portable across standard
/// libraries, unlike std::uniform_real_distribution).
inline double uniform_pm1(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53 * 2.0 - 1.0;
}

/// Llama-3.1-8B layer and head GEMMs (Megatron-LM megatron/core/tensor_parallel/layers.py) for
/// TP 1, 2, 4, 8 and 4096 / 8192 tokens per rank, forward, dgrad and wgrad, plus square shapes
/// 1024 .. 16384.
inline std::vector<costmodel::GemmRow> synthetic_gemm_shapes() {
  const long long h = 4096, f = 14336, q = 32 * 128, kv = 8 * 128, v = 128256;
  std::vector<costmodel::GemmRow> rows;
  for (long long t : {1, 2, 4, 8}) {
    for (long long tokens : {4096, 8192}) {
      const std::vector<std::pair<long long, long long>> in_out = {
          {h, (q + 2 * kv) / t}, {q / t, h}, {h, 2 * f / t}, {f / t, h}, {h, v / t}};
      for (const auto& [in, out] : in_out) {
        rows.push_back({tokens, out, in, "bf16", 0});  // forward
        rows.push_back({tokens, in, out, "bf16", 0});  // dgrad
        rows.push_back({out, in, tokens, "bf16", 0});  // wgrad
      }
    }
  }
  for (long long s : {1024, 2048, 4096, 8192, 16384}) rows.push_back({s, s, s, "bf16", 0});
  // One row per distinct shape, in (m, n, k) order.
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return std::tie(a.m, a.n, a.k) < std::tie(b.m, b.n, b.k);
  });
  rows.erase(std::unique(rows.begin(), rows.end(),
                         [](const auto& a, const auto& b) { return a.m == b.m && a.n == b.n && a.k == b.k; }),
             rows.end());
  return rows;
}

inline costmodel::Profile make_synthetic(const SyntheticTruth& truth = {}) {
  std::mt19937_64 rng(truth.seed);
  auto noisy = [&](double t) { return t * (1.0 + truth.noise * uniform_pm1(rng)); };
  costmodel::Profile p;
  p.meta.gpu = "synthetic H100 SXM";
  p.meta.source = "synthetic: known parameters plus 1% uniform noise, seed 20261122";
  p.meta.sms = truth.sms;
  GemmFit g;
  g.peak_flops = truth.gemm_peak_flops;
  g.launch_s = truth.gemm_launch_s;
  g.wave_s = truth.gemm_wave_s;
  g.sms = truth.sms;
  for (auto r : synthetic_gemm_shapes()) {
    r.seconds = noisy(gemm_seconds(g, r.m, r.n, r.k));
    p.gemm.push_back(r);
  }
  for (int tp : {1, 2, 4, 8}) {
    for (int seq : {1024, 2048, 4096, 8192, 16384}) {
      for (auto pass : {costmodel::AttentionPass::fwd, costmodel::AttentionPass::bwd}) {
        costmodel::AttentionRow r;
        r.batch = 1;
        r.seq = seq;
        r.heads = 32 / tp;
        r.kv_heads = 8 / tp;
        r.head_dim = 128;
        r.causal = true;
        r.pass = pass;
        const double rate = pass == costmodel::AttentionPass::fwd ? truth.attn_fwd_flops : truth.attn_bwd_flops;
        r.seconds = noisy(truth.attn_launch_s + attention_flops(r) / rate);
        p.attention.push_back(r);
      }
    }
  }
  for (const auto& m : truth.memory) {
    for (double bytes = 1 << 20; bytes <= 1024.0 * (1 << 20); bytes *= 4) {
      p.memory_bound.push_back({m.kernel, bytes, noisy(m.launch_s + bytes / m.Bps)});
    }
  }
  for (const auto& c : truth.collectives) {
    for (double bytes = 8; bytes <= 8.0 * (1LL << 30); bytes *= 2) {
      costmodel::CollectiveRow r;
      r.op = c.op;
      r.ranks = c.ranks;
      r.ranks_per_node = c.per_node;
      r.bytes = bytes;
      r.seconds = noisy(c.latency_s + bytes * bus_factor(c.op, c.ranks) / c.busbw_Bps);
      p.collective.push_back(r);
    }
  }
  return p;
}

}  // namespace tetra::calib::testing
