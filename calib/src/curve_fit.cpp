// Least-squares fits of calibration tables (models and sources in curve_fit.hpp).
#include "tetra/calib/curve_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>

#include <Eigen/Dense>

#include "tetra/base/error.hpp"

namespace tetra::calib {
namespace {

/// Rows of features x_i and measured times t_i; `free` says which parameters are fitted
/// (the others are fixed at 0). Minimises sum(((x_i . p) - t_i) / t_i)^2 with p >= 0 by
/// dropping, in the order given by `drop_order`, parameters that come out negative.
struct LinearProblem {
  std::vector<std::vector<double>> x;
  std::vector<double> t;
};

std::vector<double> solve_relative(const LinearProblem& problem, std::vector<bool> free,
                                   const std::vector<int>& drop_order) {
  const std::size_t n_params = free.size();
  std::vector<double> params(n_params, 0.0);
  for (;;) {
    std::vector<int> cols;
    for (std::size_t j = 0; j < n_params; ++j) {
      if (free[j]) cols.push_back(static_cast<int>(j));
    }
    if (cols.empty()) return params;
    const auto rows = static_cast<Eigen::Index>(problem.t.size());
    const auto ncols = static_cast<Eigen::Index>(cols.size());
    Eigen::MatrixXd a(rows, ncols);
    Eigen::VectorXd b = Eigen::VectorXd::Ones(rows);
    for (Eigen::Index i = 0; i < rows; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      for (Eigen::Index c = 0; c < ncols; ++c) {
        a(i, c) = problem.x[ui][static_cast<std::size_t>(cols[static_cast<std::size_t>(c)])] / problem.t[ui];
      }
    }
    // Column scaling keeps the QR well conditioned when features span many decades.
    Eigen::VectorXd scale(ncols);
    for (Eigen::Index c = 0; c < ncols; ++c) {
      const double norm = a.col(c).norm();
      scale(c) = norm > 0 ? norm : 1.0;
      a.col(c) /= scale(c);
    }
    const Eigen::VectorXd sol = a.colPivHouseholderQr().solve(b);
    std::fill(params.begin(), params.end(), 0.0);
    bool negative = false;
    for (Eigen::Index c = 0; c < ncols; ++c) {
      const double v = sol(c) / scale(c);
      params[static_cast<std::size_t>(cols[static_cast<std::size_t>(c)])] = std::isfinite(v) ? v : 0.0;
      if (!(v >= 0)) negative = true;
    }
    if (!negative) return params;
    // Drop the first still-free parameter in drop order that came out negative (or, when the
    // order lists none of them, the first free one in drop order).
    int drop = -1;
    for (int j : drop_order) {
      if (free[static_cast<std::size_t>(j)] && !(params[static_cast<std::size_t>(j)] >= 0)) {
        drop = j;
        break;
      }
    }
    if (drop < 0) {
      for (int j : drop_order) {
        if (free[static_cast<std::size_t>(j)]) {
          drop = j;
          break;
        }
      }
    }
    if (drop < 0) return std::vector<double>(n_params, 0.0);
    free[static_cast<std::size_t>(drop)] = false;
  }
}

FitQuality quality_of(const LinearProblem& problem, const std::vector<double>& params) {
  FitQuality q;
  q.rows = static_cast<int>(problem.t.size());
  double sum2 = 0;
  for (std::size_t i = 0; i < problem.t.size(); ++i) {
    double pred = 0;
    for (std::size_t j = 0; j < params.size(); ++j) pred += problem.x[i][j] * params[j];
    const double rel = (pred - problem.t[i]) / problem.t[i];
    sum2 += rel * rel;
    q.max_rel = std::max(q.max_rel, std::abs(rel));
  }
  q.rms_rel = q.rows > 0 ? std::sqrt(sum2 / q.rows) : 0.0;
  return q;
}

bool usable_time(double seconds) { return std::isfinite(seconds) && seconds > 0; }

}  // namespace

long long gemm_waves(long long m, long long n, int tile_m, int tile_n, int sms) noexcept {
  if (m <= 0 || n <= 0 || tile_m <= 0 || tile_n <= 0 || sms <= 0) return 0;
  const long long tiles = ((m + tile_m - 1) / tile_m) * ((n + tile_n - 1) / tile_n);
  return (tiles + sms - 1) / sms;
}

double gemm_seconds(const GemmFit& fit, long long m, long long n, long long k) noexcept {
  const auto waves = static_cast<double>(gemm_waves(m, n, fit.tile_m, fit.tile_n, fit.sms));
  const double wave_flops = static_cast<double>(fit.tile_m) * fit.tile_n * 2.0 * static_cast<double>(k) * fit.sms;
  const double per_wave = fit.wave_s + (fit.peak_flops > 0 ? wave_flops / fit.peak_flops : 0.0);
  return fit.launch_s + waves * per_wave;
}

GemmFit fit_gemm(const std::vector<costmodel::GemmRow>& rows, const GemmFitOptions& options) {
  if (options.sms <= 0) {
    throw UserError("GEMM fit: the SM count of the device is unknown (give --sms N)");
  }
  if (options.tile_m <= 0 || options.tile_n <= 0) throw UserError("GEMM fit: tile sizes must be positive");
  // Parameters: 0 launch_s, 1 seconds per quantised FLOP (1/peak), 2 wave_s.
  LinearProblem problem;
  for (const auto& r : rows) {
    if (r.m <= 0 || r.n <= 0 || r.k <= 0 || !usable_time(r.seconds)) continue;
    if (options.hbm_Bps > 0) {
      const double bytes = 2.0 * (static_cast<double>(r.m) * static_cast<double>(r.k) +
                                  static_cast<double>(r.k) * static_cast<double>(r.n) +
                                  static_cast<double>(r.m) * static_cast<double>(r.n));
      if (bytes / options.hbm_Bps > options.memory_bound_share * r.seconds) continue;
    }
    const auto waves = static_cast<double>(gemm_waves(r.m, r.n, options.tile_m, options.tile_n, options.sms));
    const double qflops =
        waves * options.tile_m * static_cast<double>(options.tile_n) * 2.0 * static_cast<double>(r.k) * options.sms;
    problem.x.push_back({1.0, qflops, waves});
    problem.t.push_back(r.seconds);
  }
  if (problem.t.empty()) throw UserError("GEMM fit: no usable row (need m, n, k > 0 and seconds > 0)");
  // Few rows cannot pin three parameters without extrapolating wildly: the per-wave term needs
  // 12 rows and the launch term 6; below that they stay 0 and the peak absorbs them.
  const std::vector<int> drop_order = {2, 0};
  std::vector<bool> free = {problem.t.size() >= 6, true, problem.t.size() >= 12};
  const auto p = solve_relative(problem, free, drop_order);
  GemmFit fit;
  fit.launch_s = p[0];
  fit.peak_flops = p[1] > 0 ? 1.0 / p[1] : 0.0;
  fit.wave_s = p[2];
  fit.tile_m = options.tile_m;
  fit.tile_n = options.tile_n;
  fit.sms = options.sms;
  fit.quality = quality_of(problem, p);
  return fit;
}

double bus_factor(std::string_view op, int ranks) {
  if (ranks <= 0) throw UserError("collective: ranks must be positive");
  const double n = ranks;
  // NVIDIA/nccl-tests: doc/PERFORMANCE.md, src/*.cu *GetBw.
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") return (n - 1) / n;
  if (op == "send_recv") return 1.0;
  throw UserError(std::string("collective: unknown op '") + std::string(op) +
                  "' (known: all_reduce, all_gather, reduce_scatter, send_recv, all_to_all)");
}

double algbw_Bps(const costmodel::CollectiveRow& row) noexcept {
  return row.seconds > 0 ? row.bytes / row.seconds : 0.0;
}

double busbw_Bps(const costmodel::CollectiveRow& row) { return algbw_Bps(row) * bus_factor(row.op, row.ranks); }

std::vector<CollectiveLine> fit_collectives(const std::vector<costmodel::CollectiveRow>& rows, double min_bytes) {
  using Key = std::tuple<std::string, int, int, std::string, std::string>;
  std::map<Key, LinearProblem> groups;
  for (const auto& r : rows) {
    if (!usable_time(r.seconds) || !(r.bytes > 0) || r.bytes < min_bytes) continue;
    const double f = bus_factor(r.op, r.ranks);
    if (!(f > 0)) continue;  // one rank moves nothing over a link
    auto& g = groups[Key{r.op, r.ranks, r.ranks_per_node, r.algorithm, r.protocol}];
    // Parameters: 0 latency_s, 1 seconds per bus byte (1/busbw).
    g.x.push_back({1.0, r.bytes * f});
    g.t.push_back(r.seconds);
  }
  std::vector<CollectiveLine> out;
  for (const auto& [key, problem] : groups) {
    const std::vector<int> drop_order = {0};
    const std::vector<bool> free = {problem.t.size() >= 3, true};  // latency from 3 rows
    const auto p = solve_relative(problem, free, drop_order);
    CollectiveLine line;
    std::tie(line.fit.op, line.fit.ranks, line.fit.ranks_per_node, line.fit.algorithm, line.fit.protocol) = key;
    line.fit.latency_s = p[0];
    line.fit.busbw_Bps = p[1] > 0 ? 1.0 / p[1] : 0.0;
    line.quality = quality_of(problem, p);
    out.push_back(std::move(line));
  }
  return out;
}

double collective_seconds(const costmodel::CollectiveFit& fit, double bytes) {
  const double f = bus_factor(fit.op, fit.ranks);
  return fit.latency_s + (fit.busbw_Bps > 0 ? bytes * f / fit.busbw_Bps : 0.0);
}

namespace {

MemoryFit fit_memory_rows(const std::string& name, const std::vector<const costmodel::MemoryBoundRow*>& rows) {
  LinearProblem problem;
  for (const auto* r : rows) {
    problem.x.push_back({1.0, r->bytes});
    problem.t.push_back(r->seconds);
  }
  const std::vector<int> drop_order = {0};
  const std::vector<bool> free = {problem.t.size() >= 3, true};  // launch from 3 rows
  const auto p = solve_relative(problem, free, drop_order);
  MemoryFit out;
  out.fit.kernel = name;
  out.fit.launch_s = p[0];
  out.fit.Bps = p[1] > 0 ? 1.0 / p[1] : 0.0;
  out.quality = quality_of(problem, p);
  return out;
}

}  // namespace

MemoryFits fit_memory_bound(const std::vector<costmodel::MemoryBoundRow>& rows, double l2_bytes) {
  std::map<std::string, std::vector<const costmodel::MemoryBoundRow*>> by_kernel;
  for (const auto& r : rows) {
    if (!usable_time(r.seconds) || !(r.bytes > 0)) continue;
    by_kernel[r.kernel].push_back(&r);
  }
  if (by_kernel.empty()) throw UserError("memory-bound fit: no usable row (need bytes > 0 and seconds > 0)");
  std::vector<const costmodel::MemoryBoundRow*> all;
  for (auto& [kernel, krows] : by_kernel) {
    const auto above_l2 = [&](const costmodel::MemoryBoundRow* r) { return r->bytes > 2 * l2_bytes; };
    if (l2_bytes > 0 && std::count_if(krows.begin(), krows.end(), above_l2) >= 2) {
      std::erase_if(krows, [&](const costmodel::MemoryBoundRow* r) { return !above_l2(r); });
    }
    all.insert(all.end(), krows.begin(), krows.end());
  }
  MemoryFits out;
  out.all = fit_memory_rows("all", all);
  for (const auto& [kernel, krows] : by_kernel) out.per_kernel.push_back(fit_memory_rows(kernel, krows));
  return out;
}

double attention_flops(const costmodel::AttentionRow& row) noexcept {
  // Dao-AILab/flash-attention: benchmarks/benchmark_flash_attention.py
  // flops = 4 * batch * seqlen^2 * nheads * headdim // (2 if causal else 1); backward 2.5x.
  const double fwd = 4.0 * row.batch * static_cast<double>(row.seq) * row.seq * row.heads * row.head_dim /
                     (row.causal ? 2.0 : 1.0);
  return row.pass == costmodel::AttentionPass::bwd ? 2.5 * fwd : fwd;
}

AttentionFit fit_attention(const std::vector<costmodel::AttentionRow>& rows) {
  AttentionFit out;
  for (auto pass : {costmodel::AttentionPass::fwd, costmodel::AttentionPass::bwd}) {
    LinearProblem problem;
    for (const auto& r : rows) {
      if (r.pass != pass || !usable_time(r.seconds)) continue;
      const double f = attention_flops(r);
      if (!(f > 0)) continue;
      problem.x.push_back({1.0, f});
      problem.t.push_back(r.seconds);
    }
    if (problem.t.empty()) continue;
    const std::vector<int> drop_order = {0};
    const std::vector<bool> free = {problem.t.size() >= 3, true};  // launch from 3 rows
    const auto p = solve_relative(problem, free, drop_order);
    const double rate = p[1] > 0 ? 1.0 / p[1] : 0.0;
    if (pass == costmodel::AttentionPass::fwd) {
      out.fwd_flops = rate;
      out.fwd_quality = quality_of(problem, p);
    } else {
      out.bwd_flops = rate;
      out.bwd_quality = quality_of(problem, p);
    }
  }
  return out;
}

int guess_sms(std::string_view gpu_name) noexcept {
  std::string s(gpu_name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // Datasheets: A100 108 SMs, H100 SXM 132, H100 PCIe 114, H200 132 (NVIDIA A100 / H100 /
  // H200 datasheets; A100: NVIDIA Matrix Multiplication Background User's Guide).
  if (s.find("a100") != std::string::npos) return 108;
  if (s.find("h100") != std::string::npos) return s.find("pcie") != std::string::npos ? 114 : 132;
  if (s.find("h200") != std::string::npos || s.find("gh200") != std::string::npos) return 132;
  return 0;
}

costmodel::ProfileFit fit_profile(const costmodel::Profile& profile, const ProfileFitOptions& options) {
  costmodel::ProfileFit fit;
  fit.valid = true;
  fit.gemm_tile_m = options.tile_m;
  fit.gemm_tile_n = options.tile_n;
  if (!profile.memory_bound.empty()) {
    const auto mem = fit_memory_bound(profile.memory_bound, profile.meta.l2_bytes);
    fit.hbm_Bps = mem.all.fit.Bps;
    fit.kernel_launch_s = mem.all.fit.launch_s;
    for (const auto& k : mem.per_kernel) fit.memory_bound.push_back(k.fit);
  }
  if (!profile.gemm.empty()) {
    GemmFitOptions g;
    g.tile_m = options.tile_m;
    g.tile_n = options.tile_n;
    g.sms = options.sms > 0 ? options.sms : (profile.meta.sms > 0 ? profile.meta.sms : guess_sms(profile.meta.gpu));
    g.hbm_Bps = fit.hbm_Bps;
    const auto gemm = fit_gemm(profile.gemm, g);
    fit.gemm_peak_flops = gemm.peak_flops;
    fit.gemm_launch_s = gemm.launch_s;
    fit.gemm_wave_s = gemm.wave_s;
  }
  if (!profile.attention.empty()) {
    const auto att = fit_attention(profile.attention);
    fit.attention_fwd_flops = att.fwd_flops;
    fit.attention_bwd_flops = att.bwd_flops;
  }
  for (const auto& line : fit_collectives(profile.collective, options.collective_min_bytes)) {
    fit.collectives.push_back(line.fit);
  }
  return fit;
}

std::string describe_fit(const costmodel::ProfileFit& fit) {
  std::ostringstream os;
  char buf[256];
  if (fit.gemm_peak_flops > 0) {
    std::snprintf(buf, sizeof buf, "gemm: peak %.1f TFLOP/s, launch %.2f us, per wave %.2f us (tile %dx%d)\n",
                  fit.gemm_peak_flops / 1e12, fit.gemm_launch_s * 1e6, fit.gemm_wave_s * 1e6, fit.gemm_tile_m,
                  fit.gemm_tile_n);
    os << buf;
  }
  if (fit.attention_fwd_flops > 0 || fit.attention_bwd_flops > 0) {
    std::snprintf(buf, sizeof buf, "attention: fwd %.1f TFLOP/s, bwd %.1f TFLOP/s\n", fit.attention_fwd_flops / 1e12,
                  fit.attention_bwd_flops / 1e12);
    os << buf;
  }
  if (fit.hbm_Bps > 0) {
    std::snprintf(buf, sizeof buf, "memory-bound: %.0f GB/s, launch %.2f us\n", fit.hbm_Bps / 1e9,
                  fit.kernel_launch_s * 1e6);
    os << buf;
  }
  for (const auto& c : fit.collectives) {
    std::snprintf(buf, sizeof buf, "%s ranks=%d per_node=%d%s%s%s%s: latency %.2f us, busbw %.1f GB/s\n", c.op.c_str(),
                  c.ranks, c.ranks_per_node, c.algorithm.empty() ? "" : " algo=", c.algorithm.c_str(),
                  c.protocol.empty() ? "" : " proto=", c.protocol.c_str(), c.latency_s * 1e6, c.busbw_Bps / 1e9);
    os << buf;
  }
  return os.str();
}

}  // namespace tetra::calib
