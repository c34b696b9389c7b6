// NCCL's performance model (`NVIDIA/nccl: src/graph/tuning.cc` ncclTopoTuneModel and
// ncclTopoGetAlgoTime, `src/enqueue.cc` topoGetAlgoInfo) and nccl-tests' bandwidth definitions
// (`NVIDIA/nccl-tests: doc/PERFORMANCE.md`). Constants: `NVIDIA/nccl: src/graph/tuning.cc` at
// v2.30.7-1 (73cf112), v2.27.7-1 (593de54), v2.21.5-1 (ab2b89c); graph search:
// `src/graph/search.cc`, `topo.h`.
#include "tetra/costmodel/collective.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>

namespace tetra::costmodel {
namespace {

using ops::CollectiveKind;
using ops::CommDim;

constexpr int kAlgos = 7;
constexpr int kProtos = 3;
constexpr int kHwNvlink = 0, kHwPci = 1, kHwNet = 2;

/// Tuning constants of one NCCL version (ncclTunerConstantsDefaults, src/graph/tuning.cc).
struct Constants {
  double base[kAlgos][kProtos];
  double hw[3][kAlgos][kProtos];
  bool has_pat;
};

// v2.30.7-1 (src/graph/tuning.cc: baseLatencies, hwLatencies).
constexpr Constants kV2_30 = {
    {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}},
    {{{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
     {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
     {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}}},
    true};
// v2.27.7-1: as 2.30 except the NET NVLSTree hardware latency 14 (src/graph/tuning.cc at
// v2.27.7-1).
constexpr Constants kV2_27 = {
    {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}},
    {{{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
     {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
     {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 14}, {0, 0, 14}}},
    true};
// v2.21.5-1: Tree/Simple base 0 and hardware 28 us on every link class; no PAT (1.5).
constexpr Constants kV2_21 = {
    {{6.8, 14.0, 0}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
    {{{0.6, 1.25, 28}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 0}},
     {{1.0, 1.9, 28}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
     {{5.0, 8.5, 28}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 14}, {0, 0, 0}}},
    false};

const Constants& constants(NcclVersion v) {
  switch (v) {
    case NcclVersion::v2_21_5: return kV2_21;
    case NcclVersion::v2_27_7: return kV2_27;
    case NcclVersion::v2_30_7: return kV2_30;
  }
  return kV2_30;
}

/// Per-compute-capability bandwidth caps {1 node, 2 nodes, > 2 nodes}, GB/s (tuning.cc:
/// llMaxBws, perChMax*Bws, nvlsEfficiency).
/// Rows: Volta, Ampere, Hopper, Blackwell.
constexpr double kLlMaxBws[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282, 90, 70}};
constexpr double kPerChMaxRingLL128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}};
constexpr double kPerChMaxTreeLL128[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0}};
constexpr double kPerChMaxTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0}};
constexpr double kPerChMaxNvlsTree[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0, 57.7, 45.5}, {0, 96.0, 80.0}};
constexpr double kNvlsEfficiency[4] = {0, 0, 0.85, 0.74};

/// treeCorrectionFactor[proto][log2(nBytes/64)], 64 B .. 256 MB (tuning.cc).
constexpr double kTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};

// Candidate per-channel speeds, GB/s (src/graph/search.cc: speedArray*, sm90SpeedArray*,
// sm100SpeedArray*).
constexpr std::array<double, 13> kSpeedIntra = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
constexpr std::array<double, 11> kSm90SpeedIntra = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
constexpr std::array<double, 17> kSm90SpeedInter = {48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
constexpr std::array<double, 19> kSpeedInter = {48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12};
constexpr std::array<double, 11> kSm100SpeedIntra = {90, 80, 70, 60, 50, 40, 30, 24, 20, 19, 18};
constexpr std::array<double, 18> kSm100SpeedInter = {96, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
constexpr int kMaxGraphChannels = 32;  // MAXCHANNELS / 2
constexpr int kMaxNvlsChannels = 16;   // NCCL_NVLS_NCHANNELS default (docs/env.rst)

int cc_index(int cc) { return cc >= 100 ? 3 : cc >= 90 ? 2 : cc >= 80 ? 1 : 0; }

int log2i(double v) {
  if (v < 1) return -1;
  return static_cast<int>(std::floor(std::log2(v)));
}

struct Speeds {
  const double* v;
  std::size_t n;
};
Speeds speeds_for(int cc, bool inter) {
  if (cc >= 100) {
    return inter ? Speeds{kSm100SpeedInter.data(), kSm100SpeedInter.size()}
                 : Speeds{kSm100SpeedIntra.data(), kSm100SpeedIntra.size()};
  }
  if (cc >= 90) {
    return inter ? Speeds{kSm90SpeedInter.data(), kSm90SpeedInter.size()}
                 : Speeds{kSm90SpeedIntra.data(), kSm90SpeedIntra.size()};
  }
  return inter ? Speeds{kSpeedInter.data(), kSpeedInter.size()}
               : Speeds{kSpeedIntra.data(), kSpeedIntra.size()};
}

/// Channels of speed `s` that fit: the intra bandwidth, and across nodes the NICs owned.
int channels_at(const NcclTopology& t, double s, int ranks_per_node, int nodes) {
  const double intra_bw = group_nvlink_GBps(t, ranks_per_node);
  // Inside one node every GPU forwards each channel over its links; across nodes the GPU that
  // hands a channel to its NIC does not, so the links carry (ppn − 1)/ppn of the channels.
  const double load = nodes > 1 ? s * (ranks_per_node - 1.0) / std::max(1, ranks_per_node) : s;
  int ch = load > 0 ? static_cast<int>(std::floor(intra_bw / load + 1e-9)) : kMaxGraphChannels;
  if (nodes > 1) {
    const int nics = std::max(1, static_cast<int>(std::lround(static_cast<double>(ranks_per_node) *
                                                              t.nics_per_node / std::max(1, t.gpus_per_node))));
    const int per_nic = static_cast<int>(std::floor(t.nic_GBps / s + 1e-9));
    ch = std::min(ch, nics * per_nic);
  }
  return std::min(ch, kMaxGraphChannels);
}

/// Pass 1 of the search plus channel duplication (see collective.hpp).
GraphInfo search(const NcclTopology& t, int ranks_per_node, int nodes) {
  const bool inter = nodes > 1;
  const Speeds sp = speeds_for(t.compute_capability, inter);
  const double total = inter ? std::min(group_nvlink_GBps(t, ranks_per_node),
                                        t.nic_GBps * std::max(1.0, static_cast<double>(ranks_per_node) *
                                                                       t.nics_per_node / std::max(1, t.gpus_per_node)))
                             : group_nvlink_GBps(t, ranks_per_node);
  GraphInfo best;
  for (std::size_t i = 0; i < sp.n; ++i) {
    const double s = sp.v[i];
    if (best.channels > 0 && s / best.bw_intra_GBps <= 0.49) break;
    const int ch = channels_at(t, s, ranks_per_node, nodes);
    if (ch <= 0) continue;
    if (ch * s > best.channels * best.bw_intra_GBps) {
      best = GraphInfo{ch, s, s};
      if (ch * s >= total) break;  // optimal
    }
  }
  if (best.channels == 0) best = GraphInfo{1, sp.v[sp.n - 1], sp.v[sp.n - 1]};
  // ncclTopoDupChannels.
  const bool dup = best.bw_intra_GBps >= 25 &&
                   (t.compute_capability <= 80 || best.bw_intra_GBps >= 50 || best.channels <= 4);
  if (dup && best.channels * 2 <= 2 * kMaxGraphChannels) {
    best.channels *= 2;
    best.bw_intra_GBps /= 2;
    best.bw_inter_GBps /= 2;
  }
  return best;
}

}  // namespace

double group_nvlink_GBps(const NcclTopology& t, int ranks_per_node) noexcept {
  if (!t.nvlink) return t.pci_GBps;
  if (t.mesh_gpus < 2) return t.nvlink_GBps;
  // A ring through k mesh GPUs can use every link among them: the directed links of the
  // complete graph split into rings with equal shares (Tillson 1980 for most k; fractionally
  // for all), i.e. the k - 1 of each GPU's mesh_gpus - 1 link bundles that lead to members.
  const int k = std::clamp(ranks_per_node, 2, t.mesh_gpus);
  return t.nvlink_GBps * (k - 1) / (t.mesh_gpus - 1);
}

GraphInfo ring_graph(const NcclTopology& t, int ranks_per_node, int nodes) noexcept {
  GraphInfo g = search(t, ranks_per_node, nodes);
  // Pass 2: raise the speed with the same channel count while it still fits.
  const Speeds sp = speeds_for(t.compute_capability, nodes > 1);
  for (std::size_t i = sp.n; i-- > 0;) {
    const double s = sp.v[i];
    if (s <= g.bw_intra_GBps) continue;
    if (channels_at(t, s, ranks_per_node, nodes) >= g.channels) {
      g.bw_intra_GBps = g.bw_inter_GBps = s;
    } else {
      break;
    }
  }
  return g;
}

GraphInfo tree_graph(const NcclTopology& t, int ranks_per_node, int nodes) noexcept {
  GraphInfo g = ring_graph(t, ranks_per_node, nodes);
  if (nodes <= 1) return g;
  // Pass 2 for trees: bwIntra may rise up to 2 x bwInter where NVLink carries it.
  const Speeds sp = speeds_for(t.compute_capability, true);
  const double intra_bw = group_nvlink_GBps(t, ranks_per_node);
  for (std::size_t i = 0; i < sp.n; ++i) {
    const double s = sp.v[i];
    if (s <= g.bw_intra_GBps) break;
    if (s <= 2 * g.bw_inter_GBps && s * g.channels <= intra_bw + 1e-9) {
      g.bw_intra_GBps = s;
      break;
    }
  }
  return g;
}

GraphInfo nvls_graph(const NcclTopology& t, int ranks_per_node, int nodes) noexcept {
  GraphInfo g;
  if (!t.nvls || !t.nvlink || ranks_per_node < 2) return g;
  // One NVLS head per GPU of the node, at most NCCL_NVLS_NCHANNELS (default 16) of them:
  // the 72 GPUs of an NVL72 domain share 16 heads.
  g.channels = std::min(ranks_per_node, kMaxNvlsChannels);
  const Speeds sp = speeds_for(t.compute_capability, false);
  for (std::size_t i = 0; i < sp.n; ++i) {
    if (sp.v[i] * g.channels <= t.nvlink_GBps + 1e-9) {
      g.bw_intra_GBps = sp.v[i];
      break;
    }
  }
  g.bw_inter_GBps = g.bw_intra_GBps;
  if (nodes > 1) {
    // Across nodes each head owns a NIC share; bwInter rises to the NIC speed (search pass 2).
    const Speeds si = speeds_for(t.compute_capability, true);
    const double nic_per_head =
        t.nic_GBps * t.nics_per_node / std::max(1, t.gpus_per_node);
    g.bw_inter_GBps = 0;
    for (std::size_t i = 0; i < si.n; ++i) {
      if (si.v[i] <= nic_per_head + 1e-9 && si.v[i] <= 2 * g.bw_intra_GBps) {
        g.bw_inter_GBps = si.v[i];
        break;
      }
    }
  }
  return g;
}

NcclVersion parse_nccl_version(const std::string& text) noexcept {
  int major = 0, minor = 0;
  std::size_t i = 0;
  auto num = [&](int& out) {
    bool any = false;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      out = out * 10 + (text[i] - '0');
      ++i;
      any = true;
    }
    return any;
  };
  if (!num(major) || i >= text.size() || text[i] != '.') return NcclVersion::v2_30_7;
  ++i;
  if (!num(minor)) return NcclVersion::v2_30_7;
  if (major != 2) return NcclVersion::v2_30_7;
  if (minor <= 22) return NcclVersion::v2_21_5;
  if (minor <= 27) return NcclVersion::v2_27_7;
  return NcclVersion::v2_30_7;
}

const char* to_string(NcclVersion v) noexcept {
  switch (v) {
    case NcclVersion::v2_21_5: return "2.21.5";
    case NcclVersion::v2_27_7: return "2.27.7";
    case NcclVersion::v2_30_7: return "2.30.7";
  }
  return "?";
}

const char* to_string(NcclAlgo a) noexcept {
  switch (a) {
    case NcclAlgo::tree: return "tree";
    case NcclAlgo::ring: return "ring";
    case NcclAlgo::collnet_direct: return "collnet_direct";
    case NcclAlgo::collnet_chain: return "collnet_chain";
    case NcclAlgo::nvls: return "nvls";
    case NcclAlgo::nvls_tree: return "nvls_tree";
    case NcclAlgo::pat: return "pat";
  }
  return "?";
}

const char* to_string(NcclProto p) noexcept {
  switch (p) {
    case NcclProto::ll: return "LL";
    case NcclProto::ll128: return "LL128";
    case NcclProto::simple: return "Simple";
  }
  return "?";
}

double bus_factor(CollectiveKind kind, int n) noexcept {
  if (n <= 1) return 0;
  const double dn = n;
  switch (kind) {
    case CollectiveKind::all_reduce: return 2.0 * (dn - 1) / dn;
    case CollectiveKind::all_gather:
    case CollectiveKind::reduce_scatter:
    case CollectiveKind::all_to_all: return (dn - 1) / dn;
    case CollectiveKind::send_recv: return 1.0;
  }
  return 1.0;
}

NcclLatBw nccl_lat_bw(CollectiveKind kind, NcclAlgo algo, NcclProto proto, const GroupPlacement& g,
                      const CommParams& p) noexcept {
  NcclLatBw out;
  const NcclTopology& t = p.topo;
  const Constants& k = constants(p.version);
  const int n = g.ranks;
  const int nodes = std::max(1, g.nodes);
  if (n <= 1) return out;
  const bool ar = kind == CollectiveKind::all_reduce;
  const bool agrs = kind == CollectiveKind::all_gather || kind == CollectiveKind::reduce_scatter;
  if (!ar && !agrs) return out;
  const double ppn = static_cast<double>(n) / nodes;
  const int a = static_cast<int>(algo);
  const int pr = static_cast<int>(proto);
  const int cci = cc_index(t.compute_capability);
  const int idx2 = nodes <= 2 ? nodes - 1 : 2;

  // Eligibility (tuning.cc ncclTopoTuneModel; enqueue.cc updateCollCostTable).
  switch (algo) {
    case NcclAlgo::ring: break;
    case NcclAlgo::tree:
      if (!ar || !p.allow_tree) return out;
      break;
    case NcclAlgo::nvls:
      if (!p.allow_nvls || nodes > 1 || proto != NcclProto::simple) return out;
      break;
    case NcclAlgo::nvls_tree:
      if (!ar || !p.allow_nvls || nodes == 1 || proto != NcclProto::simple) return out;
      break;
    case NcclAlgo::pat:
      if (!agrs || !k.has_pat || proto != NcclProto::simple || ppn != 1.0 || nodes != n || nodes < 2) return out;
      break;
    case NcclAlgo::collnet_direct:
    case NcclAlgo::collnet_chain: return out;  // needs CollNet (IB SHARP plugin)
  }
  if (proto == NcclProto::ll && !p.allow_ll) return out;
  if (proto == NcclProto::ll128 && !p.allow_ll128) return out;

  const int rpn = static_cast<int>(std::lround(ppn));
  GraphInfo gr;
  switch (algo) {
    case NcclAlgo::tree: gr = tree_graph(t, rpn, nodes); break;
    case NcclAlgo::nvls:
    case NcclAlgo::nvls_tree: gr = nvls_graph(t, rpn, nodes); break;
    default: gr = ring_graph(t, rpn, nodes); break;
  }
  if (gr.channels <= 0 || gr.bw_intra_GBps <= 0) return out;
  const double nch = gr.channels;
  const int nsteps = ar ? 2 * (n - 1) : n - 1;

  // ---- bandwidth (tuning.cc ncclTopoTuneModel) ----
  double bw = nodes <= 2 ? gr.bw_intra_GBps : gr.bw_inter_GBps;
  if (algo == NcclAlgo::nvls || algo == NcclAlgo::nvls_tree) {
    if (nch < 2) return out;
    if (p.version == NcclVersion::v2_30_7) {
      double intra = gr.bw_intra_GBps * kNvlsEfficiency[cci] * (nch - 1) / nch;
      intra *= ar ? 2.0 : (ppn - 1) / ppn;
      const double inter = gr.bw_inter_GBps * (algo == NcclAlgo::nvls_tree && nodes <= 2 ? 2.0 : 1.0);
      bw = std::min(intra, algo == NcclAlgo::nvls && nodes == 1 ? intra : inter);
      if (algo == NcclAlgo::nvls_tree) bw = std::min(bw, kPerChMaxNvlsTree[cci][idx2]);
    } else if (p.version == NcclVersion::v2_27_7) {
      bw = ar || algo == NcclAlgo::nvls_tree
               ? std::min(gr.bw_intra_GBps, gr.bw_inter_GBps)
               : std::min(gr.bw_intra_GBps * (ppn - 1) / ppn, 0.9 * gr.bw_inter_GBps);
      if (algo == NcclAlgo::nvls_tree) bw = std::min(bw, kPerChMaxNvlsTree[cci][idx2]);
    } else {
      bw = algo == NcclAlgo::nvls ? std::min(gr.bw_intra_GBps, gr.bw_inter_GBps)
                                  : std::min(gr.bw_intra_GBps, nodes <= 2 ? gr.bw_inter_GBps : gr.bw_inter_GBps / 2);
    }
    if (bw <= 0) return out;
  }
  double bus = nch * bw;
  const int ll_row = nodes == 1 ? cci : (t.cpu_amd ? 1 : 0);
  const double ll_max = kLlMaxBws[ll_row][idx2];
  if (algo == NcclAlgo::ring && proto == NcclProto::ll) bus = std::min(ll_max, 0.5 * bus);
  if (algo == NcclAlgo::ring && proto == NcclProto::ll128) {
    const double f = p.version == NcclVersion::v2_21_5 ? (ppn < 2 ? 0.7 : 0.92) : 0.92;
    bus = std::min(f * bus, nch * kPerChMaxRingLL128[cci][idx2]);
  }
  if (algo == NcclAlgo::tree && ar) bus = std::min(0.92 * bus, nch * kPerChMaxTree[cci][idx2]);
  if (algo == NcclAlgo::tree && proto == NcclProto::ll) bus = std::min(bus / 3.8, ll_max);
  if (algo == NcclAlgo::tree && proto == NcclProto::ll128) {
    bus = std::min(bus * (nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nch * kPerChMaxTreeLL128[cci][idx2]);
  }
  if (algo == NcclAlgo::pat) bus *= 0.75;
  // Bus -> algorithm bandwidth (not for non-ring all-gather / reduce-scatter).
  if (!(agrs && algo != NcclAlgo::ring)) {
    double ratio = 0.5;
    if (algo == NcclAlgo::ring) {
      ratio = static_cast<double>(n) / nsteps;
    } else if (algo == NcclAlgo::nvls || algo == NcclAlgo::nvls_tree) {
      ratio = p.version == NcclVersion::v2_30_7 ? static_cast<double>(n) / nsteps : 5.0 / 6.0;
    }
    bus *= ratio;
  }
  out.bw_GBps = bus;

  // ---- latency (tuning.cc ncclTopoTuneModel) ----
  const int intra_hw = t.nvlink ? kHwNvlink : kHwPci;
  double intra_lat = k.hw[intra_hw][a][pr];
  const double inter_lat = ppn == 1.0 ? k.hw[kHwNet][static_cast<int>(NcclAlgo::tree)][pr] : k.hw[kHwNet][a][pr];
  double lat = k.base[a][pr];
  switch (algo) {
    case NcclAlgo::ring: {
      const double net_overhead = nodes > 1 ? (t.cpu_amd ? 2.0 : 1.0) * (proto == NcclProto::simple ? 3.0 : 1.0) : 0.0;
      intra_lat = std::max(intra_lat, net_overhead);
      int inter_steps = 0;
      if (nodes > 1) {
        inter_steps = ar ? (p.version == NcclVersion::v2_21_5 ? 2 * nodes : 2 * (nodes - 1)) : nodes - 1;
      }
      lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
      break;
    }
    case NcclAlgo::tree:
      lat += 2.0 * ((n / nodes - 1) * intra_lat + log2i(nodes) * inter_lat);
      break;
    case NcclAlgo::nvls:
      lat = intra_lat + (nodes > 1 ? inter_lat : 0.0);
      break;
    case NcclAlgo::nvls_tree:
      lat += intra_lat + 2.0 * log2i(nodes) * inter_lat;
      break;
    case NcclAlgo::pat:
      lat += log2i(nodes) * (inter_lat / 3.5) + n * 2.8;
      break;
    default: break;
  }
  out.lat_us = lat;
  return out;
}

double nccl_algo_seconds(CollectiveKind kind, NcclAlgo algo, NcclProto proto, double bytes,
                         const GroupPlacement& g, const CommParams& p) noexcept {
  const NcclLatBw lb = nccl_lat_bw(kind, algo, proto, g, p);
  if (lb.bw_GBps <= 0) return -1;
  double bw = lb.bw_GBps;
  double lat = lb.lat_us;
  const int log_size = log2i(std::floor(bytes / 64.0));
  if (algo == NcclAlgo::tree && kind == CollectiveKind::all_reduce && log_size >= 0 && log_size < 23) {
    bw *= kTreeCorrection[static_cast<int>(proto)][log_size];
  }
  if (algo == NcclAlgo::ring && proto == NcclProto::simple && kind == CollectiveKind::all_reduce &&
      g.nodes > 1) {
    const int nch = ring_graph(p.topo, std::max(1, g.ranks / std::max(1, g.nodes)), g.nodes).channels;
    if (bytes / (std::max(1, nch) * static_cast<double>(g.ranks)) >= 64) {
      lat *= p.topo.compute_capability < 80 ? 1.9 : 1.4;  // "plateau effect"
    }
  }
  const double us = lat + bytes / (1000.0 * bw);
  return us * 1e-6;
}

namespace {

/// One NIC's achievable GPU-to-GPU rate across nodes.
double nic_Bps(const NcclTopology& t) noexcept { return t.p2p_inter_Bps > 0 ? t.p2p_inter_Bps : t.nic_GBps * 1e9; }

/// A transfer's modelled time before the cluster factor.
double p2p_model_seconds(double bytes, bool same_node, const CommParams& p) noexcept {
  const NcclTopology& t = p.topo;
  if (same_node) {
    const double bw = t.p2p_intra_Bps > 0 ? t.p2p_intra_Bps : t.nvlink_GBps * 1e9;
    return t.p2p_intra_lat_s + bytes / bw;
  }
  return t.p2p_inter_lat_s + bytes / nic_Bps(t);
}

/// The cluster factor of a link class (factors.hpp).
double link_factor(bool same_node, const CommParams& p) noexcept {
  return same_node ? p.intra_node_factor : p.inter_node_factor;
}

}  // namespace

double p2p_seconds(double bytes, bool same_node, const CommParams& p) noexcept {
  return p2p_model_seconds(bytes, same_node, p) / link_factor(same_node, p);
}

namespace {

const char* op_name(CollectiveKind k) { return to_string(k); }

/// What a profile's measured rows and fits say about one collective: `seconds` when a row
/// pair brackets the size, the largest row lies below it or a fit covers the group; `cap` (the
/// smallest row's time) when every row is larger, so a smaller message never costs more than
/// the smallest one measured. Both < 0 when the profile says nothing.
struct Measured {
  double seconds = -1;
  double cap = -1;
};

/// Log-log interpolation between rows of the same (op, ranks, ranks_per_node); beyond the
/// largest row at its bandwidth.
Measured measured_seconds(CollectiveKind kind, double bytes, const GroupPlacement& g, const CommParams& p) {
  const CollectiveRow* lo = nullptr;
  const CollectiveRow* hi = nullptr;
  const char* name = op_name(kind);
  for (const CollectiveRow& r : p.rows) {
    if (r.op != name || r.ranks != g.ranks || r.ranks_per_node != g.ranks_per_node) continue;
    if (!r.algorithm.empty() || !r.protocol.empty() || r.bytes <= 0 || r.seconds <= 0) continue;
    if (r.bytes <= bytes && (lo == nullptr || r.bytes > lo->bytes)) lo = &r;
    if (r.bytes >= bytes && (hi == nullptr || r.bytes < hi->bytes)) hi = &r;
  }
  Measured m;
  if (lo != nullptr && hi != nullptr) {
    if (lo->bytes == hi->bytes) {
      m.seconds = lo->seconds;
      return m;
    }
    const double w = (std::log(bytes) - std::log(lo->bytes)) / (std::log(hi->bytes) - std::log(lo->bytes));
    m.seconds = std::exp(std::log(lo->seconds) + w * (std::log(hi->seconds) - std::log(lo->seconds)));
    return m;
  }
  if (lo != nullptr) {
    m.seconds = lo->seconds * bytes / lo->bytes;
    return m;
  }
  for (const CollectiveFit& f : p.fits) {
    if (f.op != name || f.ranks != g.ranks || f.ranks_per_node != g.ranks_per_node) continue;
    if (!f.algorithm.empty() || f.busbw_Bps <= 0) continue;
    m.seconds = f.latency_s + bytes * bus_factor(kind, g.ranks) / f.busbw_Bps;
    return m;
  }
  if (hi != nullptr) m.cap = hi->seconds;
  return m;
}

/// One GPU's share of its node's NICs, the rate a cross-node all-to-all leaves each rank at.
double nic_share_Bps(const NcclTopology& t) noexcept {
  return nic_Bps(t) * t.nics_per_node /
         std::max(1, t.gpus_per_node);
}

/// Launch latency of an all-to-all over n ranks [assumed]: NCCL's base latency and half a
/// microsecond per peer.
double alltoall_latency_s(double n, const CommParams& p) noexcept {
  return (constants(p.version).base[1][2] + (n - 1) * 0.5) * 1e-6;
}

/// The model's price: send_recv as a transfer, all-to-all by its busbw, the rest as NCCL's
/// fastest eligible (algorithm, protocol).
CollectiveEstimate modelled(CollectiveKind kind, double bytes, const GroupPlacement& g, const CommParams& p) {
  CollectiveEstimate e;
  if (kind == CollectiveKind::send_recv) {
    e.seconds = p2p_model_seconds(bytes, g.nodes <= 1, p);
    return e;
  }
  if (kind == CollectiveKind::all_to_all) {
    // Not an NCCL collective algorithm: n−1 concurrent sends per rank. Inside a node at the
    // measured intra-node all-to-all busbw (GTC25 S72583 slides: A100 210, H100 320 GB/s);
    // across nodes the remote share (n − ppn)/n of each rank's buffer crosses its NIC share
    // [derived].
    const NcclTopology& t = p.topo;
    const double n = g.ranks;
    const double ppn = static_cast<double>(g.ranks) / std::max(1, g.nodes);
    double busbw = t.alltoall_intra_busbw_Bps > 0 ? t.alltoall_intra_busbw_Bps : 0.8 * t.nvlink_GBps * 1e9;
    if (g.nodes > 1) {
      busbw = std::min(busbw, t.alltoall_nic_efficiency * nic_share_Bps(t) * (n - 1) / (n - ppn));
    }
    e.seconds = alltoall_latency_s(n, p) + bytes * bus_factor(kind, g.ranks) / busbw;
    return e;
  }
  double best = std::numeric_limits<double>::infinity();
  for (int a = 0; a < kAlgos; ++a) {
    for (int pr = 0; pr < kProtos; ++pr) {
      const double t = nccl_algo_seconds(kind, static_cast<NcclAlgo>(a), static_cast<NcclProto>(pr), bytes, g, p);
      if (t >= 0 && t < best) {
        best = t;
        e.algo = static_cast<NcclAlgo>(a);
        e.proto = static_cast<NcclProto>(pr);
      }
    }
  }
  e.seconds = std::isfinite(best) ? best : p2p_model_seconds(bytes, g.nodes <= 1, p);
  return e;
}

}  // namespace

CollectiveEstimate collective(CollectiveKind kind, double bytes, const GroupPlacement& g,
                              const CommParams& p) noexcept {
  CollectiveEstimate e;
  if (g.ranks <= 1 || bytes <= 0) return e;
  const Measured m = measured_seconds(kind, bytes, g, p);
  if (m.seconds > 0) {
    e.measured = true;
    e.seconds = m.seconds;
  } else {
    e = modelled(kind, bytes, g, p);
    if (m.cap > 0 && m.cap < e.seconds) {
      e.measured = true;
      e.seconds = m.cap;
    }
  }
  e.seconds /= link_factor(g.nodes <= 1, p);
  e.seconds = std::max({e.seconds, node_nic_seconds(kind, bytes, g, p), cross_pod_seconds(kind, bytes, g, p)});
  e.algbw_Bps = e.seconds > 0 ? bytes / e.seconds : 0;
  e.busbw_Bps = e.algbw_Bps * bus_factor(kind, g.ranks);
  return e;
}


double hierarchical_all_to_all(double bytes, int topk, int experts, parallel::FlexBackend backend,
                               const GroupPlacement& g, const CommParams& p) noexcept {
  if (g.nodes <= 1 || topk <= 0 || experts <= topk) {
    return collective(CollectiveKind::all_to_all, bytes, g, p).seconds;
  }
  const double nodes = g.nodes;
  const double per_node = static_cast<double>(experts) / nodes;
  double none = 1.0;  // P0: a node holds none of the token's experts
  for (int i = 0; i < topk; ++i) {
    none *= std::max(0.0, (experts - per_node - i) / (experts - i));
  }
  const double remote_nodes = (nodes - 1.0) * (1.0 - none);
  const double efficiency = backend == parallel::FlexBackend::hybridep ? p.topo.hybridep_nic_efficiency
                                                                     : p.topo.alltoall_nic_efficiency;
  const double nic = efficiency * nic_share_Bps(p.topo);
  const double network =
      alltoall_latency_s(g.ranks, p) + bytes / topk * remote_nodes / nic / link_factor(false, p);
  const GroupPlacement node{g.ranks_per_node, g.ranks_per_node, 1};
  return std::max(network, collective(CollectiveKind::all_to_all, bytes, node, p).seconds);
}

double node_nic_seconds(CollectiveKind kind, double bytes, const GroupPlacement& g, const CommParams& p) noexcept {
  if (g.nodes <= 1 || bytes <= 0 || kind == CollectiveKind::all_to_all || kind == CollectiveKind::send_recv) return 0;
  // At the NICs' line rate: NCCL's model already prices what a communicator achieves on the
  // NICs it owns, so the bound binds only where the node's NICs are shared.
  const NcclTopology& t = p.topo;
  const double nic = t.nic_GBps * 1e9 * t.nics_per_node / std::max(1, t.gpus_per_node);
  if (nic <= 0) return 0;
  return bytes * bus_factor(kind, g.ranks) / (std::max(1, g.ranks_per_node) * nic) / link_factor(false, p);
}

double cross_pod_seconds(CollectiveKind kind, double bytes, const GroupPlacement& g, const CommParams& p) noexcept {
  if (g.ranks_per_pod <= 0 || g.nodes <= 1 || p.pods.oversubscription <= 1.0 || bytes <= 0) return 0;
  const double nic = nic_share_Bps(p.topo);
  if (nic <= 0) return 0;
  // The layer above the pods carries the NICs' traffic: a cluster's fitted inter-node factor
  // scales it as it scales every transfer across nodes.
  const double o = p.pods.oversubscription / link_factor(false, p);
  const double in_pod = std::min<double>(g.ranks_per_pod, g.ranks);
  if (kind == CollectiveKind::all_to_all) return bytes * (1.0 - in_pod / g.ranks) * o / nic;
  const double factor = kind == CollectiveKind::send_recv ? 1.0 : bus_factor(kind, g.ranks);
  return bytes * factor * o / (in_pod * nic);
}

double cross_pod_p2p_seconds(double bytes, long long senders, const CommParams& p) noexcept {
  if (p.pods.gpus <= 0 || p.pods.oversubscription <= 1.0 || senders <= 0) return 0;
  const NcclTopology& t = p.topo;
  const double share = std::min(1.0, static_cast<double>(p.pods.gpus) /
                                         (p.pods.oversubscription * static_cast<double>(senders)));
  return (t.p2p_inter_lat_s + bytes / (nic_Bps(t) * share)) / link_factor(false, p);
}

double comm_op_seconds(const ops::Op& op, const parallel::Layout& layout, const CommParams& p) noexcept {
  if (op.kind != ops::OpKind::collective && op.kind != ops::OpKind::p2p) return 0;
  const GroupPlacement g = place_group(layout, op.dim, p.topo.gpus_per_node, p.pods);
  if (op.kind == ops::OpKind::p2p) {
    return std::max(p2p_seconds(op.bytes, g.nodes <= 1, p),
                    cross_pod_seconds(CollectiveKind::send_recv, op.bytes, g, p));
  }
  GroupPlacement gg = g;
  if (op.group != g.ranks && op.group > 0) {
    // The op names its own group size (e.g. a sub-group); keep the node share.
    gg.ranks = op.group;
    gg.ranks_per_node = std::min(g.ranks_per_node, op.group);
    gg.nodes = std::max(1, op.group / gg.ranks_per_node);
    gg.ranks_per_pod = g.ranks_per_pod > 0 && g.ranks_per_pod < op.group ? g.ranks_per_pod : 0;
  }
  if (op.coll == CollectiveKind::all_to_all && op.route_topk > 0) {
    return std::max(hierarchical_all_to_all(op.bytes, op.route_topk, op.route_experts, op.route_backend, gg, p),
                    cross_pod_seconds(CollectiveKind::all_to_all, op.bytes, gg, p));
  }
  return collective(op.coll, op.bytes, gg, p).seconds;
}

}  // namespace tetra::costmodel
