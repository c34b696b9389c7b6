// Datasheet-bounded fits of imported rows (bounded_fit.hpp).
#include "tetra/calib/bounded_fit.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "tetra/base/error.hpp"
#include "tetra/calib/curve_fit.hpp"

namespace tetra::calib {
namespace {

constexpr double T = 1e12;   // TFLOP/s
constexpr double G = 1e9;    // GB/s
constexpr double MiB = 1024.0 * 1024.0;
constexpr double GB = 1e9;

// Dense rates (the datasheets print sparse tensor rates as twice these).
// [V100-DS] NVIDIA Tesla V100 datasheet: SXM2 15.7 TF FP32, 125 TF tensor (FP16), 900 GB/s,
//   NVLink 300 GB/s (150 per direction); 6 MB L2, 80 SMs (Volta whitepaper). No BF16 / TF32
//   tensor cores: a bf16 row is bounded by the FP16 tensor rate.
// [A100-DS] NVIDIA A100 datasheet: 19.5 TF FP32, 156 TF32, 312 BF16; 40GB SXM 1,555 GB/s, 80GB SXM
//   2,039 GB/s, 80GB PCIe 1,935 GB/s; NVLink 600 GB/s (300 per direction); 40 MB L2, 108 SMs
//   (Ampere whitepaper).
// [H100-DS] NVIDIA H100 datasheet: SXM 67 TF FP32, 494.5 TF32, 989.5 BF16, 1,979 FP8 (sparse
//   989 / 1,979 / 3,958 halved), 3.35 TB/s, NVLink 900 GB/s; PCIe 51 / 378 / 756 / 1,513, 2.0 TB/s;
//   NVL 60 / 417.5 / 835.5 / 1,670.5, 3.9 TB/s; 50 MiB L2 (cudaDeviceProp::l2CacheSize of an H100
//   SXM, tests/data/calib/h100_sxm_calibrate.profile.toml), 132 SMs (SXM, NVL), 114 (PCIe).
// [H200-DS] NVIDIA H200 datasheet: compute as H100 SXM, 4.8 TB/s, NVLink 900 GB/s; 60 MiB L2
//   (l2CacheSize measured, tests/data/calib/h200_sxm_calibrate.profile.toml).
// [B200-DS] NVIDIA DGX B200 datasheet, 8 GPUs: 72 PF FP8 and 36 PF BF16 sparse, 18 PF TF32
//   sparse, 600 TF FP32, 64 TB/s, NVLink 1.8 TB/s per GPU -> 4,500 / 2,250 / 1,125 / 75 dense per
//   GPU, 8 TB/s, 900 GB/s per direction; 148 SMs; L2 126 MiB [assumed: l2CacheSize as drivers
//   report it for B200].
// [MI300X-DS] AMD Instinct MI300X datasheet: 163.4 TF FP32 (vector and matrix), 653.7 TF32,
//   1,307.4 BF16, 2,614.9 FP8, 5.3 TB/s, 256 MB Infinity Cache (the last-level cache), 304 CUs,
//   Infinity Fabric 896 GB/s peak (448 per direction). MI325X: same compute, 6 TB/s.
// [MI250-DS] AMD Instinct MI250 datasheet: 90.5 TF FP32 matrix, 362.1 BF16, 3.2768 TB/s, 208 CUs
//   for the two GCDs of one package; PyTorch sees one GCD: half of each, 8 MB L2 per GCD.
// [MI210-DS] AMD Instinct MI210 datasheet: 45.3 TF FP32 matrix, 181 BF16, 1.6384 TB/s, 8 MB L2,
//   104 CUs.
// No datasheet link bandwidth is used for the AMD parts of one GCD (0: collectives unbounded,
// so not fitted).
const std::vector<DeviceSpec>& devices() {
  static const std::vector<DeviceSpec> all = {
      {"v100-sxm2", "Tesla V100 SXM2", 15.7 * T, 0, 125 * T, 0, 900 * G, 6 * MiB, 150 * G, 80, 32 * GB, "V100 datasheet"},
      {"v100-pcie", "Tesla V100 PCIe", 14 * T, 0, 112 * T, 0, 900 * G, 6 * MiB, 0, 80, 32 * GB, "V100 datasheet"},
      {"a100-sxm-40gb", "A100 SXM4 40GB", 19.5 * T, 156 * T, 312 * T, 0, 1555 * G, 40 * MiB, 300 * G, 108, 40 * GB,
       "A100 datasheet"},
      {"a100-sxm-80gb", "A100 SXM4 80GB", 19.5 * T, 156 * T, 312 * T, 0, 2039 * G, 40 * MiB, 300 * G, 108, 80 * GB,
       "A100 datasheet"},
      {"a100-pcie-80gb", "A100 PCIe 80GB", 19.5 * T, 156 * T, 312 * T, 0, 1935 * G, 40 * MiB, 300 * G, 108, 80 * GB,
       "A100 datasheet"},
      {"a100-pcie-40gb", "A100 PCIe 40GB", 19.5 * T, 156 * T, 312 * T, 0, 1555 * G, 40 * MiB, 300 * G, 108, 40 * GB,
       "A100 datasheet"},
      {"h100-sxm", "H100 SXM5", 67 * T, 494.5 * T, 989.5 * T, 1979 * T, 3350 * G, 50 * MiB, 450 * G, 132, 80 * GB,
       "H100 datasheet"},
      {"h100-pcie", "H100 PCIe", 51 * T, 378 * T, 756 * T, 1513 * T, 2000 * G, 50 * MiB, 300 * G, 114, 80 * GB,
       "H100 datasheet"},
      {"h100-nvl", "H100 NVL", 60 * T, 417.5 * T, 835.5 * T, 1670.5 * T, 3900 * G, 50 * MiB, 300 * G, 132, 94 * GB,
       "H100 datasheet"},
      {"h200", "H200 SXM", 67 * T, 494.5 * T, 989.5 * T, 1979 * T, 4800 * G, 60 * MiB, 450 * G, 132, 141 * GB,
       "H200 datasheet"},
      {"b200", "B200", 75 * T, 1125 * T, 2250 * T, 4500 * T, 8000 * G, 126 * MiB, 900 * G, 148, 180 * GB,
       "DGX B200 datasheet"},
      {"mi300x", "AMD Instinct MI300X", 163.4 * T, 653.7 * T, 1307.4 * T, 2614.9 * T, 5300 * G, 256 * MiB, 448 * G, 304,
       192 * GB, "MI300X datasheet"},
      {"mi325x", "AMD Instinct MI325X", 163.4 * T, 653.7 * T, 1307.4 * T, 2614.9 * T, 6000 * G, 256 * MiB, 448 * G, 304,
       256 * GB, "MI325X datasheet"},
      {"mi250", "AMD Instinct MI250 (one GCD)", 45.25 * T, 0, 181.05 * T, 0, 1638.4 * G, 8 * MiB, 0, 104, 64 * GB,
       "MI250 datasheet, halved per GCD"},
      {"mi210", "AMD Instinct MI210", 45.3 * T, 0, 181 * T, 0, 1638.4 * G, 8 * MiB, 0, 104, 64 * GB, "MI210 datasheet"},
  };
  return all;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

const DeviceSpec* by_key(std::string_view key) {
  for (const auto& d : devices()) {
    if (d.key == key) return &d;
  }
  return nullptr;
}

/// The key a driver name maps to; "" when unknown.
std::string key_of(std::string_view raw, double memory_bytes) {
  const std::string n = lower(raw);
  if (by_key(n) != nullptr) return n;
  // Preset names of hw/ (h100-sxm-80gb, h200-sxm-141gb, a100-sxm-40gb, ...).
  if (n == "h100-sxm-80gb" || n == "h100-sxm-94gb") return "h100-sxm";
  if (n == "h200-sxm-141gb") return "h200";
  if (has(n, "v100")) return has(n, "pcie") ? "v100-pcie" : "v100-sxm2";
  if (has(n, "a100")) {
    // The name does not always say the memory (A100-PG509-200): totalGlobalMem does; unknown
    // memory takes the 80 GB part, the higher bound.
    const bool small = has(n, "40gb") || (memory_bytes > 0 && memory_bytes < 60 * GB);
    if (has(n, "pcie")) return small ? "a100-pcie-40gb" : "a100-pcie-80gb";
    return small ? "a100-sxm-40gb" : "a100-sxm-80gb";
  }
  if (has(n, "gh200") || has(n, "h200")) return "h200";
  if (has(n, "h100")) return has(n, "pcie") ? "h100-pcie" : has(n, "nvl") ? "h100-nvl" : "h100-sxm";
  if (has(n, "b200")) return "b200";
  if (has(n, "mi300x")) return "mi300x";
  if (has(n, "mi325x")) return "mi325x";
  if (has(n, "mi250")) return "mi250";
  if (has(n, "mi210")) return "mi210";
  return {};
}

bool usable(double seconds) { return std::isfinite(seconds) && seconds > 0; }

bool tensor_dtype(const std::string& dtype) { return dtype == "bf16" || dtype == "fp16"; }

double dbl(long long v) { return static_cast<double>(v); }

}  // namespace

std::optional<DeviceSpec> find_device(std::string_view name, double memory_bytes) {
  const std::string key = key_of(name, memory_bytes);
  if (const DeviceSpec* d = by_key(key)) return *d;
  return std::nullopt;
}

std::string known_devices() {
  std::string out;
  for (const auto& d : devices()) out += (out.empty() ? "" : ", ") + d.key;
  return out;
}

double peak_flops(const DeviceSpec& dev, std::string_view dtype) noexcept {
  if (dtype == "bf16" || dtype == "fp16") return dev.bf16_flops;
  if (dtype == "tf32") return dev.tf32_flops;
  if (dtype == "fp32") return std::max(dev.fp32_flops, dev.tf32_flops);
  if (dtype.substr(0, 3) == "fp8") return dev.fp8_flops;
  return 0;
}

bool same_device(std::string_view a, std::string_view b) noexcept {
  const std::string ka = key_of(a, 0);
  const std::string kb = key_of(b, 0);
  // A100 40/80 GB differ only in memory, which a name may not say: same model.
  auto family = [](const std::string& k) { return k.rfind("a100-", 0) == 0 ? k.substr(0, 9) : k; };
  if (!ka.empty() || !kb.empty()) return family(ka) == family(kb);
  return lower(a) == lower(b);
}

namespace {

/// Memory-bound: rows above the HBM bandwidth are dropped; rows within 2 x L2 unfitted.
/// Kept rows go to `p`, the fit (HBM bandwidth, launch time, per-kernel lines) to `p.fit`.
TableReport bound_memory(const costmodel::Profile& in, const DeviceSpec& dev, const BoundedFitOptions& opt,
                         costmodel::Profile& p) {
  const double l2 = p.meta.l2_bytes;
  costmodel::ProfileFit& fit = p.fit;
  char buf[320];
  TableReport mem;
  mem.table = "memory_bound";
  std::vector<costmodel::MemoryBoundRow> mem_fit_rows;
  for (const auto& r : in.memory_bound) {
    ++mem.rows;
    if (!usable(r.seconds) || !(r.bytes > 0)) {
      ++mem.dropped["no positive bytes or time"];
      continue;
    }
    if (r.bytes / r.seconds > dev.hbm_Bps) {
      ++mem.dropped["faster than the datasheet HBM bandwidth (ran from cache)"];
      continue;
    }
    p.memory_bound.push_back(r);
    ++mem.kept;
    if (r.bytes <= 2 * l2) {
      ++mem.unfitted["moves no more than 2 x L2 (runs from cache)"];
      continue;
    }
    mem_fit_rows.push_back(r);
  }
  if (static_cast<int>(mem_fit_rows.size()) < opt.min_memory_rows) {
    std::snprintf(buf, sizeof buf, "%zu rows above 2 x L2, fewer than %d: built-in HBM bandwidth kept",
                  mem_fit_rows.size(), opt.min_memory_rows);
    mem.notes.emplace_back(buf);
    return mem;
  }
  try {
    const auto mf = fit_memory_bound(mem_fit_rows, 0);
    if (mf.all.fit.Bps > 0 && mf.all.fit.Bps <= dev.hbm_Bps) {
      fit.hbm_Bps = mf.all.fit.Bps;
      fit.kernel_launch_s = mf.all.fit.launch_s;
      mem.fitted = true;
      mem.fitted_rows = mf.all.quality.rows;
      std::snprintf(buf, sizeof buf, "fit on %d rows: %.0f GB/s (datasheet %.0f), launch %.2f us", mf.all.quality.rows,
                    fit.hbm_Bps / 1e9, dev.hbm_Bps / 1e9, fit.kernel_launch_s * 1e6);
      mem.notes.emplace_back(buf);
      for (std::size_t i = 0; i < mf.per_kernel.size(); ++i) {
        const auto& k = mf.per_kernel[i];
        if (k.quality.rows >= opt.min_memory_rows && k.fit.Bps > 0 && k.fit.Bps <= dev.hbm_Bps) {
          fit.memory_bound.push_back(k.fit);
        }
      }
    } else {
      std::snprintf(buf, sizeof buf, "fit gives %.0f GB/s, outside (0, %.0f] of the datasheet: built-in kept",
                    mf.all.fit.Bps / 1e9, dev.hbm_Bps / 1e9);
      mem.notes.emplace_back(buf);
    }
  } catch (const UserError& e) {
    mem.notes.emplace_back(std::string("not fitted: ") + e.what());
  }
  return mem;
}

/// GEMM: rows above their dtype's peak or of a dtype without one are dropped; the fit
/// takes bf16 / fp16 rows that are compute-bound at the datasheet HBM bandwidth.
/// Kept rows go to `p`, the fit (peak, launch and wave times) to `p.fit`.
TableReport bound_gemm(const costmodel::Profile& in, const DeviceSpec& dev, const BoundedFitOptions& opt,
                       costmodel::Profile& p) {
  costmodel::ProfileFit& fit = p.fit;
  char buf[320];
  TableReport gemm;
  gemm.table = "gemm";
  std::vector<costmodel::GemmRow> gemm_fit_rows;
  for (const auto& r : in.gemm) {
    ++gemm.rows;
    if (!usable(r.seconds) || r.m <= 0 || r.n <= 0 || r.k <= 0) {
      ++gemm.dropped["no positive shape or time"];
      continue;
    }
    const double peak = peak_flops(dev, r.dtype);
    if (!(peak > 0)) {
      ++gemm.dropped["no datasheet peak for dtype " + r.dtype + " on this GPU"];
      continue;
    }
    const double rate = 2.0 * dbl(r.m) * dbl(r.n) * dbl(r.k) / r.seconds;
    if (rate > peak) {
      ++gemm.dropped["faster than the " + r.dtype + " datasheet peak"];
      continue;
    }
    p.gemm.push_back(r);
    ++gemm.kept;
    if (!tensor_dtype(r.dtype)) {
      ++gemm.unfitted["dtype " + r.dtype + " (the fit is of bf16 / fp16)"];
      continue;
    }
    const double elt = 2.0;
    const double bytes = elt * (dbl(r.m) * dbl(r.k) + dbl(r.k) * dbl(r.n) + dbl(r.m) * dbl(r.n));
    if (bytes / dev.hbm_Bps > 0.5 * r.seconds) {
      ++gemm.unfitted["memory-bound at the datasheet HBM bandwidth"];
      continue;
    }
    gemm_fit_rows.push_back(r);
  }
  if (static_cast<int>(gemm_fit_rows.size()) < opt.min_gemm_rows) {
    std::snprintf(buf, sizeof buf, "%zu compute-bound bf16 / fp16 rows, fewer than %d: built-in GEMM rate kept",
                  gemm_fit_rows.size(), opt.min_gemm_rows);
    gemm.notes.emplace_back(buf);
    return gemm;
  }
  try {
    GemmFitOptions g;
    g.tile_m = opt.tile_m;
    g.tile_n = opt.tile_n;
    g.sms = p.meta.sms;
    const auto gf = fit_gemm(gemm_fit_rows, g);
    if (gf.peak_flops > 0 && gf.peak_flops <= dev.bf16_flops) {
      fit.gemm_peak_flops = gf.peak_flops;
      fit.gemm_launch_s = gf.launch_s;
      fit.gemm_wave_s = gf.wave_s;
      gemm.fitted = true;
      gemm.fitted_rows = gf.quality.rows;
      std::snprintf(buf, sizeof buf, "fit on %d rows: peak %.1f TFLOP/s (bf16 datasheet %.1f), launch %.2f us",
                    gf.quality.rows, gf.peak_flops / 1e12, dev.bf16_flops / 1e12, gf.launch_s * 1e6);
      gemm.notes.emplace_back(buf);
    } else {
      std::snprintf(buf, sizeof buf, "fit gives %.1f TFLOP/s, outside (0, %.1f] of the bf16 datasheet: built-in kept",
                    gf.peak_flops / 1e12, dev.bf16_flops / 1e12);
      gemm.notes.emplace_back(buf);
    }
  } catch (const UserError& e) {
    gemm.notes.emplace_back(std::string("not fitted: ") + e.what());
  }
  return gemm;
}

/// Attention: rows above the bf16 peak dropped; each pass fitted from its minimum.
/// Kept rows go to `p`, the per-pass rates to `p.fit`.
TableReport bound_attention(const costmodel::Profile& in, const DeviceSpec& dev, const BoundedFitOptions& opt,
                            costmodel::Profile& p) {
  costmodel::ProfileFit& fit = p.fit;
  char buf[320];
  TableReport att;
  att.table = "attention";
  for (const auto& r : in.attention) {
    ++att.rows;
    const double f = attention_flops(r);
    if (!usable(r.seconds) || !(f > 0)) {
      ++att.dropped["no positive shape or time"];
      continue;
    }
    if (f / r.seconds > dev.bf16_flops) {
      ++att.dropped["faster than the bf16 datasheet peak"];
      continue;
    }
    p.attention.push_back(r);
    ++att.kept;
  }
  int fwd = 0, bwd = 0;
  for (const auto& r : p.attention) (r.pass == costmodel::AttentionPass::fwd ? fwd : bwd) += 1;
  try {
    const auto af = fit_attention(p.attention);
    auto take = [&](const char* pass, int rows, double rate, double& field) {
      if (rows < opt.min_attention_rows) {
        std::snprintf(buf, sizeof buf, "%s: %d rows, fewer than %d: built-in rate kept", pass, rows,
                      opt.min_attention_rows);
      } else if (!(rate > 0) || rate > dev.bf16_flops) {
        std::snprintf(buf, sizeof buf, "%s: fit gives %.1f TFLOP/s, outside (0, %.1f]: built-in kept", pass,
                      rate / 1e12, dev.bf16_flops / 1e12);
      } else {
        field = rate;
        att.fitted = true;
        att.fitted_rows += rows;
        std::snprintf(buf, sizeof buf, "%s: fit on %d rows: %.1f TFLOP/s (bf16 datasheet %.1f)", pass, rows,
                      rate / 1e12, dev.bf16_flops / 1e12);
      }
      att.notes.emplace_back(buf);
    };
    take("fwd", fwd, af.fwd_flops, fit.attention_fwd_flops);
    take("bwd", bwd, af.bwd_flops, fit.attention_bwd_flops);
  } catch (const UserError& e) {
    att.notes.emplace_back(std::string("not fitted: ") + e.what());
  }
  return att;
}

/// The fit notes of the kept collective rows, one per (op, ranks) group fitted from its
/// minimum; the groups within bounds go to `fit`.
void fit_collective_groups(const std::vector<costmodel::CollectiveRow>& kept, const DeviceSpec& dev,
                           const BoundedFitOptions& opt, costmodel::ProfileFit& fit, TableReport& coll) {
  char buf[320];
  try {
    for (const auto& line : fit_collectives(kept)) {
      const int rows = line.quality.rows;
      const std::string what = line.fit.op + " ranks=" + std::to_string(line.fit.ranks);
      if (rows < opt.min_collective_rows) {
        std::snprintf(buf, sizeof buf, "%s: %d rows, fewer than %d: built-in kept", what.c_str(), rows,
                      opt.min_collective_rows);
      } else if (!(line.fit.busbw_Bps > 0) || line.fit.busbw_Bps > dev.link_Bps) {
        std::snprintf(buf, sizeof buf, "%s: fit gives %.1f GB/s, outside (0, %.1f] of the link: built-in kept",
                      what.c_str(), line.fit.busbw_Bps / 1e9, dev.link_Bps / 1e9);
      } else {
        fit.collectives.push_back(line.fit);
        coll.fitted = true;
        coll.fitted_rows += rows;
        std::snprintf(buf, sizeof buf, "%s: fit on %d rows: busbw %.1f GB/s (link %.1f), latency %.2f us",
                      what.c_str(), rows, line.fit.busbw_Bps / 1e9, dev.link_Bps / 1e9, line.fit.latency_s * 1e6);
      }
      coll.notes.emplace_back(buf);
    }
  } catch (const UserError& e) {
    coll.notes.emplace_back(std::string("not fitted: ") + e.what());
  }
}

/// Collectives: rows above the link bandwidth dropped; groups fitted from their minimum.
/// Kept rows go to `p`, the fitted groups to `p.fit`.
TableReport bound_collectives(const costmodel::Profile& in, const DeviceSpec& dev, const BoundedFitOptions& opt,
                              costmodel::Profile& p) {
  TableReport coll;
  coll.table = "collective";
  for (const auto& r : in.collective) {
    ++coll.rows;
    double busbw = 0;
    try {
      busbw = busbw_Bps(r);
    } catch (const UserError&) {
      ++coll.dropped["unknown collective op"];
      continue;
    }
    if (!usable(r.seconds) || !(r.bytes > 0)) {
      ++coll.dropped["no positive bytes or time"];
      continue;
    }
    if (dev.link_Bps > 0 && busbw > dev.link_Bps) {
      ++coll.dropped["bus bandwidth above the datasheet link bandwidth"];
      continue;
    }
    p.collective.push_back(r);
    ++coll.kept;
  }
  if (p.collective.empty()) return coll;
  if (!(dev.link_Bps > 0)) {
    coll.notes.emplace_back("no datasheet link bandwidth for this GPU: collectives not fitted, built-in kept");
  } else {
    fit_collective_groups(p.collective, dev, opt, p.fit, coll);
  }
  // One rank's trace times a collective from its own launch: the wait for the others is in it.
  if (opt.merged_ranks > 1) {
    coll.notes.emplace_back("times from the last arriving of " + std::to_string(opt.merged_ranks) +
                            " ranks' traces (earliest end - latest start, clocks aligned)");
  } else {
    coll.notes.emplace_back("times of one rank include the wait for the other ranks");
  }
  return coll;
}

}  // namespace

BoundedFit fit_bounded(const costmodel::Profile& in, const DeviceSpec& dev, const BoundedFitOptions& opt) {
  BoundedFit out;
  out.profile = in;
  auto& p = out.profile;
  p.gemm.clear();
  p.attention.clear();
  p.memory_bound.clear();
  p.collective.clear();
  if (p.meta.sms <= 0) p.meta.sms = dev.sms;
  if (!(p.meta.l2_bytes > 0)) p.meta.l2_bytes = dev.l2_bytes;
  costmodel::ProfileFit& fit = p.fit;
  fit = costmodel::ProfileFit{};
  fit.valid = true;
  fit.gemm_tile_m = opt.tile_m;
  fit.gemm_tile_n = opt.tile_n;
  // Each table filters its own rows of `in` into `p` and fills its own fields of `p.fit`.
  const TableReport mem = bound_memory(in, dev, opt, p);
  const TableReport gemm = bound_gemm(in, dev, opt, p);
  const TableReport att = bound_attention(in, dev, opt, p);
  const TableReport coll = bound_collectives(in, dev, opt, p);
  out.tables = {gemm, att, mem, coll};
  return out;
}

std::string describe_reports(const std::vector<TableReport>& tables) {
  std::ostringstream os;
  for (const auto& t : tables) {
    os << t.table << ": " << t.rows << " rows found, " << t.kept << " kept, "
       << (t.fitted ? "fitted" : "not fitted (built-in kept)") << "\n";
    for (const auto& [why, n] : t.dropped) os << "  dropped " << n << ": " << why << "\n";
    for (const auto& [why, n] : t.unfitted) os << "  kept, not fitted " << n << ": " << why << "\n";
    for (const auto& note : t.notes) os << "  " << note << "\n";
  }
  return os.str();
}

}  // namespace tetra::calib
