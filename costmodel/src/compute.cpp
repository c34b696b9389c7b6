// Compute cost model; formulas and their sources are in compute.hpp.
#include "tetra/costmodel/compute.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

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

/// Achieved rate from measured rows of the same (head_dim, causal, pass), each carried to this
/// call's grid (attention_grid_share against the row's own grid), interpolated in log(seq); 0
/// when there are none.
double measured_rate(const std::vector<AttentionRow>& rows, const ops::AttentionShape& a,
                     bool backward, double seq, int sms) {
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
    return attention_kernel_flops(s, backward) / r.seconds * attention_grid_share(a, backward, sms, s);
  };
  if (lo == nullptr && hi == nullptr) return 0;
  if (lo == nullptr) return rate(*hi);
  if (hi == nullptr) return rate(*lo);
  return lerp_clamped(std::log(seq), std::log(dbl(lo->seq)), rate(*lo), std::log(dbl(hi->seq)), rate(*hi));
}

/// The published rate of a kernel at the benchmark grid of its table.
double published_rate(const ops::AttentionShape& a, bool backward, const std::vector<AttentionRate>& rates,
                      double seq) {
  const AttentionRatePass pass = backward ? AttentionRatePass::bwd : AttentionRatePass::fwd;
  switch (a.kernel) {
    case AttentionKernel::cudnn:
      // cuDNN's fused attention, which Transformer Engine prefers on Hopper and later
      // (transformer_engine/pytorch/attention/dot_product_attention/utils.py: "Disabling
      // FlashAttention to give FusedAttention preference on Hopper+"), priced as FA3. With the
      // grid share, cuDNN 9.19 on an H100 SXM and an H200 (48 calls each,
      // tests/data/calib/*_calibrate.profile.toml) ran at 0.94 and 0.89 of the priced time,
      // within 5 % (sd of log) of that at every grid.
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
      const double own = table_rate_hd(rates, AttentionKernel::flash2, pass, a.head_dim, a.causal, seq);
      if (own > 0) return own;
      // Published FA2 numbers are forward+backward: both passes priced at that rate [assumed].
      return table_rate_hd(rates, AttentionKernel::flash2, AttentionRatePass::fwd_bwd, a.head_dim, a.causal, seq);
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

/// Kernels whose rate follows the grid (attention_grid_share): the FlashAttention-2, -3 and
/// cuDNN kernels measured at small grids (tests/data/calib/h200_sxm_attention_chunks.json).
/// FlashAttention (v1) and Triton keep their published bars [no small-grid measurement].
bool follows_grid(AttentionKernel kernel) {
  return kernel == AttentionKernel::flash2 || kernel == AttentionKernel::flash3 || kernel == AttentionKernel::cudnn;
}

}  // namespace

double attention_rate_flops(const ops::AttentionShape& a, bool backward,
                            const ComputeParams& p) noexcept {
  // Effective sequence of a rectangular block (CP ring steps): geometric mean of s_q, s_kv.
  const double seq = std::sqrt(std::max(1.0, dbl(a.seq_q)) * std::max(1.0, dbl(a.seq_kv)));
  if (!p.attention_rows.empty()) {
    const double r = measured_rate(p.attention_rows, a, backward, seq, p.sms);
    if (r > 0) return r;
  }
  const double rate = published_rate(a, backward, p.attention_rates, seq);
  // The published rate at its benchmark's grid, times what this call's grid keeps busy of it.
  return follows_grid(a.kernel) ? rate * attention_grid_share(a, backward, p.sms, benchmark_grid(a)) : rate;
}

namespace {

/// CTA slots per SM of an attention kernel: FlashAttention-2 runs two forward CTAs per SM and
/// one backward CTA (flash_fwd/bwd_launch_template.h); FlashAttention-3 and cuDNN's fused
/// attention on Hopper and later one CTA per SM in both passes (FA3 `hopper/tile_size.h`: 128 x
/// 128 tiles at head dim 128 fill the SM's shared memory) [cuDNN: assumed as FA3].
int cta_slots_per_sm(AttentionKernel kernel, bool backward) {
  return kernel == AttentionKernel::flash2 && !backward ? 2 : 1;
}

/// Grids of more than this many CTAs per slot, or more CTAs in all, are priced by the closed
/// form in busy_share (the schedule's cost and memory stay bounded whatever the input).
constexpr long long kSimulatedCtasPerSlot = 64;
constexpr long long kSimulatedCtas = 1LL << 20;

/// Share of `slots` a grid keeps busy from its launch to its last CTA's end (see
/// attention_grid_share). Grids of more than kSimulatedCtasPerSlot CTAs per slot (or
/// kSimulatedCtas in all) take the midpoint of the perfect share and Graham's list-scheduling
/// bound (makespan at most the mean load plus the largest CTA). The two differ there by
/// slots x largest / total <= 2 / 64 (a causal row's CTAs average over half its largest), so the
/// midpoint is within 1.6 % of the true share.
double busy_share(long long q_tiles, long long kv_tiles, long long rows, long long slots, bool causal,
                  bool backward) {
  const long long ctas_per_row = backward ? kv_tiles : q_tiles;
  const long long offset = kv_tiles - q_tiles;  // keys before the first query (a ring step)
  auto work = [&](long long i) -> double {
    if (!causal) return static_cast<double>(backward ? q_tiles : kv_tiles);
    const long long w = backward ? q_tiles - std::max(0LL, i - offset) : i + 1 + offset;
    return static_cast<double>(std::clamp(w, 1LL, backward ? q_tiles : kv_tiles));
  };
  double per_row = 0, largest = 0;
  for (long long i = 0; i < ctas_per_row; ++i) {
    per_row += work(i);
    largest = std::max(largest, work(i));
  }
  const double total = per_row * static_cast<double>(rows);
  const long long ctas = ctas_per_row * rows;
  if (ctas <= slots) return total / (static_cast<double>(slots) * largest);
  if (ctas > kSimulatedCtasPerSlot * slots || ctas > kSimulatedCtas) {
    return total / (total + 0.5 * static_cast<double>(slots) * largest);
  }
  // List scheduling in launch order: each CTA starts on the slot that frees first.
  std::vector<double> free_at(static_cast<std::size_t>(slots), 0.0);
  std::make_heap(free_at.begin(), free_at.end(), std::greater<>());
  for (long long r = 0; r < rows; ++r) {
    for (long long i = 0; i < ctas_per_row; ++i) {
      std::pop_heap(free_at.begin(), free_at.end(), std::greater<>());
      free_at.back() += work(i);
      std::push_heap(free_at.begin(), free_at.end(), std::greater<>());
    }
  }
  const double makespan = *std::max_element(free_at.begin(), free_at.end());
  return total / (static_cast<double>(slots) * makespan);
}

/// busy_share of a call's grid: CTAs per 128 query rows (forward) or key rows (backward) of
/// every (sequence, head). Remembers the grids it has seen (a step prices a handful of shapes,
/// a search the same ones again for many layouts).
double grid_busy_share(long long seq_q, long long seq_kv, long long rows, bool causal, bool backward,
                       long long slots) {
  constexpr long long kTile = 128;
  const long long q_tiles = std::max(1LL, ceil_div(seq_q, kTile));
  const long long kv_tiles = std::max(1LL, ceil_div(seq_kv, kTile));
  struct Key {
    long long q, kv, rows, slots;
    bool causal, backward;
    bool operator==(const Key&) const = default;
  };
  thread_local std::vector<std::pair<Key, double>> seen;
  const Key key{q_tiles, kv_tiles, std::max(1LL, rows), std::max(1LL, slots), causal, backward};
  for (const auto& [k, v] : seen) {
    if (k == key) return v;
  }
  const double share = busy_share(key.q, key.kv, key.rows, key.slots, causal, backward);
  if (seen.size() >= 256) seen.clear();
  seen.emplace_back(key, share);
  return share;
}

}  // namespace

double attention_grid_share(const ops::AttentionShape& a, bool backward, int sms,
                            const ops::AttentionShape& bench) noexcept {
  const long long slots = static_cast<long long>(std::max(1, sms)) * cta_slots_per_sm(a.kernel, backward);
  const double own = grid_busy_share(a.seq_q, a.seq_kv, static_cast<long long>(std::max(1, a.batch)) * std::max(1, a.heads),
                                     a.causal, backward, slots);
  const double ref = grid_busy_share(bench.seq_q, bench.seq_kv,
                                     static_cast<long long>(std::max(1, bench.batch)) * std::max(1, bench.heads),
                                     bench.causal, backward, slots);
  return ref > 0 ? own / ref : 1.0;
}

ops::AttentionShape benchmark_grid(const ops::AttentionShape& a) noexcept {
  // FlashAttention's benchmarks (FA2 arXiv 2307.08691 §4.1, FA3 arXiv 2407.08608 §4.1): 16k
  // tokens in sequences of the measured length, hidden 2048 (2048 / head_dim heads).
  const long long seq = std::max(1LL, std::llround(std::sqrt(std::max(1.0, dbl(a.seq_q)) * std::max(1.0, dbl(a.seq_kv)))));
  ops::AttentionShape b = a;
  b.seq_q = seq;
  b.seq_kv = seq;
  b.batch = static_cast<int>(std::max(1LL, 16384 / seq));
  b.heads = std::max(1, 2048 / std::max(1, a.head_dim));
  return b;
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
