// Compute cost model; formulas and their sources are in compute.hpp.
#include "tetra/costmodel/compute.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <boost/math/distributions/normal.hpp>

namespace tetra::costmodel {
namespace {

using parallel::AttentionKernel;

double dbl(long long v) { return static_cast<double>(v); }

/// Bytes per input element of a GEMM in `format` (bf16 training precision).
double gemm_input_bytes(parallel::GemmFormat format) {
  switch (format) {
    case parallel::GemmFormat::fp8:
      return 1.0;
    case parallel::GemmFormat::fp4:
      return 0.5;
    case parallel::GemmFormat::training:
      break;
  }
  return 2.0;
}

long long ceil_div(long long a, long long b) { return b > 0 ? (a + b - 1) / b : 0; }

/// Linear interpolation of y over x on two points, clamped to the segment.
double lerp_clamped(double x, double x0, double y0, double x1, double y1) {
  if (x1 == x0) return y0;
  const double w = std::clamp((x - x0) / (x1 - x0), 0.0, 1.0);
  return y0 + w * (y1 - y0);
}

}  // namespace

double gemm_peak(parallel::GemmFormat format, const ComputeParams& p) noexcept {
  switch (format) {
    case parallel::GemmFormat::fp4:
      if (p.fp4_gemm_peak_flops > 0) return p.fp4_gemm_peak_flops;
      [[fallthrough]];
    case parallel::GemmFormat::fp8:
      if (p.fp8_gemm_peak_flops > 0) return p.fp8_gemm_peak_flops;
      [[fallthrough]];
    case parallel::GemmFormat::training:
      break;
  }
  return p.gemm_peak_flops;
}

GemmEstimate gemm_roofline(const GemmShape& s, const ComputeParams& p) noexcept {
  GemmEstimate best;
  const double peak = gemm_peak(s.format, p);
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || peak <= 0) {
    best.seconds = p.gemm_launch_s;
    return best;
  }
  const int sms = std::max(1, p.sms);
  const double batch = std::max(1, s.batch);
  // t_mem: every operand read once, the output written once [derived: the roofline's memory
  // side].
  const double bytes = batch * s.dtype_bytes * (dbl(s.m) * dbl(s.k) + dbl(s.k) * dbl(s.n) + dbl(s.m) * dbl(s.n));
  const double t_mem = p.hbm_Bps > 0 ? bytes / p.hbm_Bps : 0.0;
  static const GemmTile kDefault{128, 128, 1.0};
  const GemmTile* first = p.tiles.empty() ? &kDefault : p.tiles.data();
  const std::size_t n_tiles = p.tiles.empty() ? 1 : p.tiles.size();
  best.seconds = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < n_tiles; ++i) {
    const GemmTile& t = first[i];
    const long long tiles = ceil_div(s.m, t.m) * ceil_div(s.n, t.n) * static_cast<long long>(batch);
    const long long waves = ceil_div(tiles, sms);
    // Each SM computes one tm x tn x K tile per wave at peak/SMs (scaled by tile efficiency).
    const double per_sm = t.efficiency * peak / sms;
    const double t_math = dbl(waves) * (p.gemm_wave_s + 2.0 * t.m * t.n * dbl(s.k) / per_sm);
    const double total = std::max(t_math, t_mem) + p.gemm_launch_s;
    if (total < best.seconds) {
      best.seconds = total;
      best.tile_m = t.m;
      best.tile_n = t.n;
      best.tiles = tiles;
      best.waves = waves;
      best.memory_bound = t_mem > t_math;
    }
  }
  return best;
}

double gemm_seconds(const GemmShape& s, const ComputeParams& p) noexcept {
  const double model = gemm_roofline(s, p).seconds;
  if (p.gemm_rows.empty() || s.batch != 1 || s.format != parallel::GemmFormat::training) return model;
  // Rows with the same (n, k): rows are sorted by (n, k, m).
  const GemmRow* lo = nullptr;
  const GemmRow* hi = nullptr;
  for (const GemmRow& r : p.gemm_rows) {
    if (r.n != s.n || r.k != s.k || r.seconds <= 0) continue;
    if (r.m == s.m) return r.seconds;
    if (r.m < s.m) lo = &r;
    if (r.m > s.m && hi == nullptr) hi = &r;
  }
  if (lo != nullptr && hi != nullptr) {
    // log-log interpolation in m between the bracketing rows.
    const double x = std::log(dbl(s.m));
    return std::exp(lerp_clamped(x, std::log(dbl(lo->m)), std::log(lo->seconds), std::log(dbl(hi->m)),
                                 std::log(hi->seconds)));
  }
  // Outside the same-(n,k) range or no such rows: scale the analytical time by the
  // measured/analytical ratio of the row nearest in log FLOPs.
  const double target = std::log(2.0 * dbl(s.m) * dbl(s.n) * dbl(s.k));
  const GemmRow* nearest = nullptr;
  double best = std::numeric_limits<double>::infinity();
  for (const GemmRow& r : p.gemm_rows) {
    if (r.seconds <= 0 || r.m <= 0 || r.n <= 0 || r.k <= 0) continue;
    // Prefer rows of the same (n, k) by giving other rows a distance penalty of one decade.
    double d = std::fabs(std::log(2.0 * dbl(r.m) * dbl(r.n) * dbl(r.k)) - target);
    if (r.n != s.n || r.k != s.k) d += std::log(10.0);
    if (d < best) {
      best = d;
      nearest = &r;
    }
  }
  if (nearest == nullptr) return model;
  GemmShape rs{nearest->m, nearest->n, nearest->k, s.dtype_bytes, 1, s.format};
  const double row_model = gemm_roofline(rs, p).seconds;
  return row_model > 0 ? model * nearest->seconds / row_model : model;
}

double attention_kernel_flops(const ops::AttentionShape& a, bool backward) noexcept {
  double f = 4.0 * a.batch * dbl(a.seq_q) * dbl(a.seq_kv) * a.heads * a.head_dim;
  if (a.causal) f /= 2.0;
  return backward ? 2.5 * f : f;  // FlashAttention benchmark convention
}

namespace {

/// Rate of a published table for (kernel, pass, head_dim, causal) at `seq`, interpolated in
/// log(seq) between the bracketing points, clamped at the ends; 0 when no point exists.
double table_rate(const std::vector<AttentionRate>& rates, AttentionKernel kernel,
                  AttentionRatePass pass, int head_dim, bool causal, double seq) {
  const AttentionRate* lo = nullptr;
  const AttentionRate* hi = nullptr;
  for (const AttentionRate& r : rates) {
    if (r.kernel != kernel || r.pass != pass || r.head_dim != head_dim || r.causal != causal) continue;
    if (dbl(r.seq) <= seq && (lo == nullptr || r.seq > lo->seq)) lo = &r;
    if (dbl(r.seq) >= seq && (hi == nullptr || r.seq < hi->seq)) hi = &r;
  }
  if (lo == nullptr && hi == nullptr) return 0;
  if (lo == nullptr) return hi->flops;
  if (hi == nullptr) return lo->flops;
  return lerp_clamped(std::log(seq), std::log(dbl(lo->seq)), lo->flops, std::log(dbl(hi->seq)), hi->flops);
}

/// Interpolates also in log2(head_dim) between the tabulated head dims.
double table_rate_hd(const std::vector<AttentionRate>& rates, AttentionKernel kernel,
                     AttentionRatePass pass, int head_dim, bool causal, double seq) {
  int lo = 0, hi = 0;
  for (const AttentionRate& r : rates) {
    if (r.kernel != kernel || r.pass != pass) continue;
    if (r.head_dim <= head_dim && r.head_dim > lo) lo = r.head_dim;
    if (r.head_dim >= head_dim && (hi == 0 || r.head_dim < hi)) hi = r.head_dim;
  }
  if (lo == 0 && hi == 0) return 0;
  if (lo == 0) lo = hi;
  if (hi == 0) hi = lo;
  const double rlo = table_rate(rates, kernel, pass, lo, causal, seq);
  const double rhi = table_rate(rates, kernel, pass, hi, causal, seq);
  if (lo == hi) return rlo;
  return lerp_clamped(std::log2(head_dim), std::log2(lo), rlo, std::log2(hi), rhi);
}

/// Achieved rate from measured rows of the same (head_dim, causal, pass), interpolated in
/// log(seq); 0 when there are none.
double measured_rate(const std::vector<AttentionRow>& rows, const ops::AttentionShape& a,
                     bool backward, double seq) {
  const AttentionRow* lo = nullptr;
  const AttentionRow* hi = nullptr;
  const AttentionPass pass = backward ? AttentionPass::bwd : AttentionPass::fwd;
  for (const AttentionRow& r : rows) {
    if (r.head_dim != a.head_dim || r.causal != a.causal || r.pass != pass || r.seconds <= 0) continue;
    if (r.seq <= seq && (lo == nullptr || r.seq > lo->seq)) lo = &r;
    if (r.seq >= seq && (hi == nullptr || r.seq < hi->seq)) hi = &r;
  }
  auto rate = [&](const AttentionRow& r) {
    ops::AttentionShape s{a.kernel, r.causal, r.batch, r.seq, r.seq, r.heads, r.kv_heads, r.head_dim};
    return attention_kernel_flops(s, backward) / r.seconds;
  };
  if (lo == nullptr && hi == nullptr) return 0;
  if (lo == nullptr) return rate(*hi);
  if (hi == nullptr) return rate(*lo);
  return lerp_clamped(std::log(seq), std::log(dbl(lo->seq)), rate(*lo), std::log(dbl(hi->seq)), rate(*hi));
}

}  // namespace

double attention_rate_flops(const ops::AttentionShape& a, bool backward,
                            const ComputeParams& p) noexcept {
  // Effective sequence of a rectangular block (CP ring steps): geometric mean of s_q, s_kv.
  const double seq = std::sqrt(std::max(1.0, dbl(a.seq_q)) * std::max(1.0, dbl(a.seq_kv)));
  if (!p.attention_rows.empty()) {
    const double r = measured_rate(p.attention_rows, a, backward, seq);
    if (r > 0) return r;
  }
  const auto& rates = p.attention_rates;
  const AttentionRatePass pass = backward ? AttentionRatePass::bwd : AttentionRatePass::fwd;
  switch (a.kernel) {
    case AttentionKernel::cudnn:
      // cuDNN's fused attention, which Transformer Engine prefers on Hopper and later
      // (transformer_engine/pytorch/attention/dot_product_attention/utils.py: "Disabling
      // FlashAttention to give FusedAttention preference on Hopper+"), priced as FA3: cuDNN 9.19
      // measured on an H100 SXM and an H200 (48 calls each, tests/data/calib) took 1/1.015 and
      // 1/1.079 of the time this prices.
      [[fallthrough]];
    case AttentionKernel::flash3: {
      // FA3 forward from its published table; backward: FA2's fwd+bwd rate times 1.5, the low
      // end of FA3's "1.5-1.75x faster backward than FlashAttention-2" (arXiv 2407.08608 §4.1)
      // [derived; no published FA3 backward table], capped at the FA3 forward rate.
      const double fwd3 = table_rate_hd(rates, AttentionKernel::flash3, AttentionRatePass::fwd,
                                        a.head_dim, a.causal, seq);
      const double fb2 = table_rate_hd(rates, AttentionKernel::flash2, AttentionRatePass::fwd_bwd,
                                       a.head_dim, a.causal, seq);
      if (fwd3 <= 0) return fb2;  // no FA3 on this GPU (A100): runs as FA2
      return backward ? std::min(fwd3, 1.5 * fb2) : fwd3;
    }
    case AttentionKernel::flash2: {
      // The published rate at the benchmark's grid, times the share of it this call's grid fills.
      const double waves = flash2_wave_share(a, backward, p.sms);
      const double own = table_rate_hd(rates, AttentionKernel::flash2, pass, a.head_dim, a.causal, seq);
      if (own > 0) return own * waves;
      // Published FA2 numbers are forward+backward: both passes priced at that rate [assumed].
      return waves * table_rate_hd(rates, AttentionKernel::flash2, AttentionRatePass::fwd_bwd,
                                   a.head_dim, a.causal, seq);
    }
    case AttentionKernel::flash1:
    case AttentionKernel::triton: {
      // The published bars of FlashAttention (v1) and of the Triton FlashAttention (FA2 README
      // figures, A100 and H100). Hopper has no Triton bars: there it runs at FlashAttention's
      // rate [assumed; on the A100 the two are within 0.8-1.2x of each other at every length].
      if (a.kernel == AttentionKernel::triton) {
        const double own = table_rate_hd(rates, AttentionKernel::triton, AttentionRatePass::fwd_bwd,
                                         a.head_dim, a.causal, seq);
        if (own > 0) return own;
      }
      const double v1 = table_rate_hd(rates, AttentionKernel::flash1, AttentionRatePass::fwd_bwd, a.head_dim,
                                      a.causal, seq);
      if (v1 > 0) return v1;
      // No published bars for this GPU: FlashAttention-2 is "around 2x" faster than
      // FlashAttention (arXiv 2307.08691 abstract).
      return 0.5 * table_rate_hd(rates, AttentionKernel::flash2, AttentionRatePass::fwd_bwd,
                                 a.head_dim, a.causal, seq);
    }
    case AttentionKernel::fused:
    case AttentionKernel::torch:
      return 0;  // priced as GEMMs
  }
  return 0;
}

double flash2_wave_share(const ops::AttentionShape& a, bool backward, int sms) noexcept {
  constexpr long long kBlock = 128;       // query rows (forward) / key rows (backward) per CTA
  const long long per_sm = backward ? 1 : 2;
  const long long slots = std::max(1LL, static_cast<long long>(sms) * per_sm);
  auto share = [&](long long ctas) {
    const long long waves = (ctas + slots - 1) / slots;
    return static_cast<double>(ctas) / static_cast<double>(std::max(1LL, waves) * slots);
  };
  const long long rows = backward ? a.seq_kv : a.seq_q;
  const long long ctas = std::max(1LL, (rows + kBlock - 1) / kBlock) * std::max(1, a.batch) *
                         std::max(1, a.heads);
  // The benchmark: 16,384 tokens in sequences of the row's length, 2048 / head_dim heads.
  const long long bench_heads = std::max(1, 2048 / std::max(1, a.head_dim));
  const long long bench = (16384 / kBlock) * bench_heads;
  return std::min(1.0, share(ctas) / share(bench));
}

double attention_seconds(const ops::AttentionShape& a, bool backward,
                         const ComputeParams& p) noexcept {
  if (a.kernel == AttentionKernel::fused || a.kernel == AttentionKernel::torch) {
    // Unfused: scores = Q·Kᵀ (s_q x s_kv x d) and out = P·V (s_q x d x s_kv) per (batch, head),
    // over the full s_q x s_kv (the mask saves nothing); backward runs four such GEMMs.
    const int batch = std::max(1, a.batch * a.heads);
    const GemmShape qk{a.seq_q, a.seq_kv, a.head_dim, 2, batch};
    const GemmShape pv{a.seq_q, a.head_dim, a.seq_kv, 2, batch};
    const double fwd = gemm_roofline(qk, p).seconds + gemm_roofline(pv, p).seconds;
    return backward ? 2.0 * fwd : fwd;
  }
  const double rate = attention_rate_flops(a, backward, p);
  const double flops = attention_kernel_flops(a, backward);
  if (rate <= 0) {
    // No table: fall back to half the GEMM ceiling [assumed].
    return flops / (0.5 * std::max(1.0, p.gemm_peak_flops)) + p.kernel_launch_s;
  }
  return flops / rate + p.kernel_launch_s;
}

double memory_bound_seconds(ops::MemoryKernel kernel, double bytes, const ComputeParams& p) noexcept {
  const char* name = to_string(kernel);
  const MemoryBoundRow* lo = nullptr;
  const MemoryBoundRow* hi = nullptr;
  for (const MemoryBoundRow& r : p.memory_rows) {
    if (r.kernel != name || r.bytes <= 0 || r.seconds <= 0) continue;
    if (r.bytes <= bytes && (lo == nullptr || r.bytes > lo->bytes)) lo = &r;
    if (r.bytes >= bytes && (hi == nullptr || r.bytes < hi->bytes)) hi = &r;
  }
  if (lo != nullptr && hi != nullptr) {
    if (lo->bytes == hi->bytes) return lo->seconds;
    return std::exp(lerp_clamped(std::log(bytes), std::log(lo->bytes), std::log(lo->seconds),
                                 std::log(hi->bytes), std::log(hi->seconds)));
  }
  for (const MemoryBoundFit& f : p.memory_fits) {
    if (f.kernel == name && f.Bps > 0) return f.launch_s + bytes / f.Bps;
  }
  const double bw = p.hbm_Bps > 0 ? p.hbm_Bps : 1e12;
  return bytes / bw + p.kernel_launch_s;
}

double expected_max_standard_normal(long long n) {
  if (n <= 1) return 0.0;
  const double share = (static_cast<double>(n) - 0.375) / (static_cast<double>(n) + 0.25);
  return boost::math::quantile(boost::math::normal_distribution<double>(), share);
}

double slowest_gpu_factor(long long gpus, double spread) {
  if (gpus <= 1 || spread <= 0) return 1.0;
  return 1.0 + spread * expected_max_standard_normal(gpus);
}

double op_seconds(const ops::Op& op, const ComputeParams& p) noexcept {
  switch (op.kind) {
    case ops::OpKind::gemm:
      return gemm_seconds(GemmShape{op.m, op.n, op.k, gemm_input_bytes(op.format), 1, op.format}, p) /
             p.gemm_factor * p.slowest_gpu_factor;
    case ops::OpKind::attention:
      return attention_seconds(op.attn, op.pass != ops::Pass::forward, p) / p.attention_factor *
             p.slowest_gpu_factor;
    case ops::OpKind::memory_bound:
      return memory_bound_seconds(op.mem, op.bytes, p) / p.memory_bound_factor;
    case ops::OpKind::collective:
    case ops::OpKind::p2p:
      return 0;
  }
  return 0;
}

}  // namespace tetra::costmodel
