// Calibration plan (shapes from the layer op list) and the sweeps over KernelTimer /
// CollectiveProbe, with replay implementations over recorded tables.
#include "tetra/calib/sweep.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "tetra/base/error.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/ops/ops.hpp"
#include "tetra/model/presets.hpp"

namespace tetra::calib {
namespace {

using AttentionKey = std::tuple<int, int, int, int, int, bool, int>;

AttentionKey key_of(const costmodel::AttentionRow& r) {
  return {r.batch, r.seq, r.heads, r.kv_heads, r.head_dim, r.causal, static_cast<int>(r.pass)};
}

/// Profile name -> the name NCCL_ALGO / NCCL_PROTO accept. NCCL's own spellings are
/// `ncclAlgoStr` {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"}
/// and `ncclProtoStr` {"LL", "LL128", "Simple"} (NVIDIA/nccl v2.28: src/enqueue.cc), which
/// `parseList` in src/graph/tuning.cc matches case-insensitively; the user guide's NCCL_ALGO /
/// NCCL_PROTO entries (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html) list the
/// same names.
struct NcclName {
  const char* profile;
  const char* nccl;
};
constexpr NcclName nccl_algorithms[] = {{"ring", "Ring"},
                                        {"tree", "Tree"},
                                        {"nvls", "NVLS"},
                                        {"nvls_tree", "NVLSTree"},
                                        {"collnet_direct", "CollNetDirect"},
                                        {"collnet_chain", "CollNetChain"},
                                        {"pat", "PAT"}};
constexpr NcclName nccl_protocols[] = {{"ll", "LL"}, {"ll128", "LL128"}, {"simple", "Simple"}};

template <std::size_t N>
std::string lookup(const NcclName (&table)[N], const std::string& name) {
  for (const auto& e : table) {
    if (name == e.profile) return e.nccl;
  }
  return "";
}

/// The forced variants of the full plan, after {"", ""}. Which (algorithm, protocol) pairs NCCL
/// can run per collective follows its tuning model (NVIDIA/nccl v2.28: src/graph/tuning.cc
/// `ncclTopoTuneModel`): AllReduce runs Tree, Ring,
/// CollNetDirect, CollNetChain, NVLS and NVLSTree but not PAT; AllGather / ReduceScatter run
/// Ring, NVLS and PAT (and CollNetDirect, left out here as it needs a SHARP network); NVLS,
/// NVLSTree and PAT run only Simple, the CollNet algorithms only Simple ("busBw = 0; // Not
/// used" for LL / LL128). Point-to-point ops have no algorithm choice; only the protocol is
/// forced. Pairs the machine lacks (NVLS without NVSwitch, CollNet without SHARP) are
/// reported unsupported by the probe and skipped by the sweep.
std::vector<CollectiveVariant> full_variants(const std::string& op) {
  std::vector<CollectiveVariant> v = {{"", ""}};
  const std::vector<std::string> protocols = {"ll", "ll128", "simple"};
  if (op == "all_reduce") {
    for (const char* algo : {"ring", "tree"}) {
      for (const auto& proto : protocols) v.push_back({algo, proto});
    }
    for (const char* algo : {"nvls", "nvls_tree", "collnet_direct", "collnet_chain"}) v.push_back({algo, "simple"});
  } else if (op == "all_gather" || op == "reduce_scatter") {
    for (const auto& proto : protocols) v.push_back({"ring", proto});
    v.push_back({"nvls", "simple"});
    v.push_back({"pat", "simple"});
  } else if (op == "send_recv" || op == "all_to_all") {
    for (const auto& proto : protocols) v.push_back({"", proto});
  }
  return v;
}

}  // namespace

std::string describe(const CollectiveVariant& variant) {
  if (variant.is_default()) return "nccl";
  if (variant.algorithm.empty()) return variant.protocol;
  if (variant.protocol.empty()) return variant.algorithm;
  return variant.algorithm + "/" + variant.protocol;
}

std::string nccl_algo_name(const std::string& algorithm) { return lookup(nccl_algorithms, algorithm); }

std::string nccl_proto_name(const std::string& protocol) { return lookup(nccl_protocols, protocol); }

std::vector<CollectiveVariant> variants_of(const SweepPlan& plan, const std::string& op) {
  const auto it = plan.collective_variants.find(op);
  if (it == plan.collective_variants.end() || it->second.empty()) return {CollectiveVariant{}};
  return it->second;
}

SweepPlan make_plan(const PlanOptions& options) {
  SweepPlan plan;
  std::set<GemmShape> gemm;
  std::set<AttentionKey> attention_keys;
  std::vector<int> seq_lens = options.seq_lens;
  std::vector<std::string> models = options.models;
  if (options.quick) {
    seq_lens = {4096};
    models.resize(std::min<std::size_t>(models.size(), 1));
  }
  for (const auto& name : models) {
    const auto model = model::find_model_preset(name);
    if (!model) throw UserError("calibrate: unknown model preset '" + name + "'");
    for (int tp : options.tp) {
      if (tp < 1 || model->heads % tp != 0 || model->kv_heads % tp != 0) continue;
      for (int seq : seq_lens) {
        parallel::Training training;
        training.seq_len = seq;
        training.global_batch = 1;
        parallel::Layout layout;
        layout.tp = tp;
        layout.sp = tp > 1;
        auto ops = ops::layer_ops(*model, training, layout);
        const auto head = ops::head_ops(*model, training, layout);
        ops.insert(ops.end(), head.begin(), head.end());
        for (const auto& op : ops) {
          if (op.kind == ops::OpKind::gemm && op.m > 0 && op.n > 0 && op.k > 0) {
            gemm.insert(GemmShape{op.m, op.n, op.k});
          } else if (op.kind == ops::OpKind::attention && op.attn.seq_q == op.attn.seq_kv && op.attn.seq_q > 0) {
            costmodel::AttentionRow r;
            r.batch = op.attn.batch;
            r.seq = static_cast<int>(op.attn.seq_q);
            r.heads = op.attn.heads;
            r.kv_heads = op.attn.kv_heads;
            r.head_dim = op.attn.head_dim;
            r.causal = op.attn.causal;
            r.pass = op.pass == ops::Pass::forward ? costmodel::AttentionPass::fwd : costmodel::AttentionPass::bwd;
            if (attention_keys.insert(key_of(r)).second) plan.attention.push_back(r);
          }
        }
      }
    }
  }
  // Square shapes for the achievable peak (MAMF-style: `stas00/ml-engineering:
  // compute/accelerator/README.md`, mamf-finder.py).
  const std::vector<long long> squares =
      options.quick ? std::vector<long long>{4096, 8192} : std::vector<long long>{1024, 2048, 4096, 8192, 16384};
  for (long long s : squares) gemm.insert(GemmShape{s, s, s});
  plan.gemm.assign(gemm.begin(), gemm.end());
  std::sort(plan.attention.begin(), plan.attention.end(),
            [](const auto& a, const auto& b) { return key_of(a) < key_of(b); });

  const double mib = 1024.0 * 1024.0;
  const std::vector<double> mem_sizes = options.quick
                                            ? std::vector<double>{4 * mib, 64 * mib, 1024 * mib}
                                            : std::vector<double>{1 * mib, 4 * mib, 16 * mib, 64 * mib, 256 * mib, 1024 * mib};
  for (const char* kernel : {"copy", "rmsnorm", "swiglu", "rope", "adam", "cross_entropy"}) {
    for (double bytes : mem_sizes) plan.memory_bound.push_back(costmodel::MemoryBoundRow{kernel, bytes, 0});
  }

  plan.collective_ops = {"all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all"};
  const double max_bytes = options.quick ? std::min(options.max_collective_bytes, 256 * mib) : options.max_collective_bytes;
  const double factor = options.quick ? 4.0 : 2.0;
  for (double s = 8; s <= max_bytes * (1 + 1e-12); s *= factor) plan.collective_bytes.push_back(s);
  for (const auto& op : plan.collective_ops) {
    plan.collective_variants[op] = options.quick ? std::vector<CollectiveVariant>{CollectiveVariant{}} : full_variants(op);
  }
  return plan;
}

double ReplayKernelTimer::gemm_seconds(const GemmShape& shape) {
  for (const auto& r : recorded_.gemm) {
    if (r.m == shape.m && r.n == shape.n && r.k == shape.k) return r.seconds;
  }
  throw UserError("replay: no recorded GEMM " + std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" +
                  std::to_string(shape.k));
}

double ReplayKernelTimer::attention_seconds(costmodel::AttentionRow& shape) {
  for (const auto& r : recorded_.attention) {
    if (key_of(r) == key_of(shape)) return r.seconds;
  }
  throw UserError("replay: no recorded attention call with seq " + std::to_string(shape.seq) + ", heads " +
                  std::to_string(shape.heads));
}

double ReplayKernelTimer::memory_bound_seconds(const std::string& kernel, double bytes) {
  for (const auto& r : recorded_.memory_bound) {
    if (r.kernel == kernel && r.bytes == bytes) return r.seconds;
  }
  throw UserError("replay: no recorded " + kernel + " row of " + std::to_string(bytes) + " bytes");
}

std::vector<GroupShape> ReplayCollectiveProbe::groups() const {
  std::set<GroupShape> g;
  for (const auto& r : recorded_.collective) g.insert(GroupShape{r.ranks, r.ranks_per_node});
  return {g.begin(), g.end()};
}

bool ReplayCollectiveProbe::supports(const std::string& op, const GroupShape& group) const {
  return std::any_of(recorded_.collective.begin(), recorded_.collective.end(), [&](const auto& r) {
    return r.op == op && r.ranks == group.ranks && r.ranks_per_node == group.ranks_per_node;
  });
}

double ReplayCollectiveProbe::seconds(const std::string& op, const GroupShape& group, double bytes) {
  const double t = variant_seconds(op, group, bytes, CollectiveVariant{});
  if (t > 0) return t;
  throw UserError("replay: no recorded " + op + " over " + std::to_string(group.ranks) + " ranks of " +
                  std::to_string(bytes) + " bytes");
}

double ReplayCollectiveProbe::variant_seconds(const std::string& op, const GroupShape& group, double bytes,
                                              const CollectiveVariant& variant) {
  bool any = false;
  for (const auto& r : recorded_.collective) {
    if (r.op != op || r.ranks != group.ranks || r.ranks_per_node != group.ranks_per_node ||
        r.algorithm != variant.algorithm || r.protocol != variant.protocol) {
      continue;
    }
    if (r.bytes == bytes) return r.seconds;
    any = true;
  }
  return any ? 0.0 : variant_unsupported;
}

void sweep_kernels(KernelTimer& timer, const SweepPlan& plan, const SweepSelection& what, costmodel::Profile& out,
                   const std::function<void(const std::string&)>& progress) {
  auto note = [&progress](const std::string& s) {
    if (progress) progress(s);
  };
  // A shape the device cannot run is skipped and reported once per table; the sweep goes on.
  int failed = 0;
  std::string first_error;
  auto attempt = [&](const std::function<void()>& body) {
    try {
      body();
    } catch (const UserError& e) {
      if (failed++ == 0) first_error = e.what();
    }
  };
  auto report = [&](const char* table) {
    if (failed > 0) note(std::string(table) + ": skipped " + std::to_string(failed) + " (" + first_error + ")");
    failed = 0;
    first_error.clear();
  };
  if (what.gemm) {
    note("gemm: " + std::to_string(plan.gemm.size()) + " shapes");
    for (const auto& s : plan.gemm) {
      attempt([&] { out.gemm.push_back(costmodel::GemmRow{s.m, s.n, s.k, "bf16", timer.gemm_seconds(s)}); });
    }
    report("gemm");
  }
  if (what.attention) {
    note("attention: " + std::to_string(plan.attention.size()) + " calls");
    for (auto r : plan.attention) {
      attempt([&] {
        r.seconds = timer.attention_seconds(r);
        out.attention.push_back(r);
      });
    }
    report("attention");
  }
  if (what.memory) {
    note("memory-bound: " + std::to_string(plan.memory_bound.size()) + " kernels");
    for (auto r : plan.memory_bound) {
      attempt([&] {
        r.seconds = timer.memory_bound_seconds(r.kernel, r.bytes);
        out.memory_bound.push_back(r);
      });
    }
    report("memory-bound");
  }
}

void sweep_collectives(CollectiveProbe& probe, const SweepPlan& plan, costmodel::Profile& out,
                       const std::function<void(const std::string&)>& progress) {
  for (const auto& g : probe.groups()) {
    if (progress) {
      progress("collectives: groups of " + std::to_string(g.ranks) + " ranks, " + std::to_string(g.ranks_per_node) +
               " per node");
    }
    for (const auto& op : plan.collective_ops) {
      if (op == "send_recv" && g.ranks != 2) continue;  // a pair, as nccl-tests' sendrecv ring step
      if (!probe.supports(op, g)) continue;
      for (const auto& variant : variants_of(plan, op)) {
        for (double bytes : plan.collective_bytes) {
          costmodel::CollectiveRow r;
          r.op = op;
          r.ranks = g.ranks;
          r.ranks_per_node = g.ranks_per_node;
          r.bytes = bytes;
          r.algorithm = variant.algorithm;
          r.protocol = variant.protocol;
          r.seconds = probe.variant_seconds(op, g, bytes, variant);
          if (r.seconds < 0) {  // variant_unsupported: the rest of its sizes would fail the same way
            if (progress) {
              progress("collectives: " + op + " " + describe(variant) + " not supported over " +
                       std::to_string(g.ranks) + " ranks (" + std::to_string(g.ranks_per_node) +
                       " per node), skipped");
            }
            break;
          }
          if (r.seconds > 0) out.collective.push_back(r);  // 0: size not measurable for this op
        }
      }
    }
  }
}

double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  return n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

}  // namespace tetra::calib
