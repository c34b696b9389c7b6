// tetrasim presets --costs CLUSTER [--model M] [--layout L] [--seq S] [--json]:
// predicted time of every op of one transformer layer (forward, input-gradient and
// weight-gradient passes) under the built-in profile of the cluster, and nccl-tests-style bus
// bandwidth against message size for all-reduce / all-gather / reduce-scatter on 1, 2, 4 and
// 16 nodes, next to the published figures the model is checked against.
#include "cmd_presets_costs.hpp"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "output.hpp"
#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/collective.hpp"
#include "tetra/costmodel/compute.hpp"
#include "tetra/base/error.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/ops/ops.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/parallel/validate.hpp"
#include "tetra/scenarios/scenario.hpp"

namespace tetra::cli {
namespace {

using costmodel::CollectiveEstimate;
using costmodel::GroupPlacement;
using ops::CollectiveKind;
using ops::Op;
using ops::OpKind;

/// "ring/Simple" for NCCL's choice, "measured" for a profile row.
std::string algo_label(const CollectiveEstimate& e) {
  if (e.measured) return "measured";
  return std::string(costmodel::to_string(e.algo)) + "/" + costmodel::to_string(e.proto);
}

std::string shape_of(const Op& op) {
  char buf[160];
  switch (op.kind) {
    case OpKind::gemm:
      std::snprintf(buf, sizeof buf, "%lldx%lldx%lld", op.m, op.n, op.k);
      break;
    case OpKind::attention:
      std::snprintf(buf, sizeof buf, "b%d s%lldx%lld h%d/%d d%d %s", op.attn.batch, op.attn.seq_q, op.attn.seq_kv,
                    op.attn.heads, op.attn.kv_heads, op.attn.head_dim, op.attn.causal ? "causal" : "full");
      break;
    case OpKind::memory_bound:
      std::snprintf(buf, sizeof buf, "%s %.2f MiB", to_string(op.mem), op.bytes / 1048576.0);
      break;
    case OpKind::collective:
    case OpKind::p2p:
      std::snprintf(buf, sizeof buf, "%s/%s x%d %.2f MiB", to_string(op.coll), to_string(op.dim),
                    op.group, op.bytes / 1048576.0);
      break;
  }
  return buf;
}

const char* pass_label(const Op& op) {
  if (op.recompute) return "recompute";
  switch (op.pass) {
    case ops::Pass::forward: return "fwd";
    case ops::Pass::backward_input: return "bwd-input";
    case ops::Pass::backward_weight: return "bwd-weight";
    case ops::Pass::optimizer: return "optimizer";
  }
  return "?";
}

/// 8 B .. 8 GiB in steps of x4.
std::vector<double> sizes() {
  std::vector<double> out;
  for (double s = 8; s <= 8.0 * 1024 * 1024 * 1024; s *= 4) out.push_back(s);
  return out;
}

std::string size_label(double b) {
  char buf[32];
  if (b >= 1073741824.0) {
    std::snprintf(buf, sizeof buf, "%.0f GiB", b / 1073741824.0);
  } else if (b >= 1048576.0) {
    std::snprintf(buf, sizeof buf, "%.0f MiB", b / 1048576.0);
  } else if (b >= 1024.0) {
    std::snprintf(buf, sizeof buf, "%.0f KiB", b / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f B", b);
  }
  return buf;
}

/// The op table of one layer: per-op rows and JSON, and the pass totals.
struct LayerTable {
  nlohmann::json jops = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows;
  double t_fwd = 0, t_bwd = 0, t_comm_fwd = 0, t_comm_bwd = 0, f_fwd = 0, f_bwd = 0;
};

LayerTable layer_table(const std::vector<Op>& ops, const parallel::Layout& layout, const hw::Cluster& cluster,
                       const costmodel::ComputeParams& cp, const costmodel::CommParams& mp) {
  LayerTable lt;
  nlohmann::json& jops = lt.jops;
  std::vector<std::vector<std::string>>& rows = lt.rows;
  double& t_fwd = lt.t_fwd;
  double& t_bwd = lt.t_bwd;
  double& t_comm_fwd = lt.t_comm_fwd;
  double& t_comm_bwd = lt.t_comm_bwd;
  double& f_fwd = lt.f_fwd;
  double& f_bwd = lt.f_bwd;
  for (const Op& op : ops) {
    const double one = op.is_compute() ? costmodel::op_seconds(op, cp) : costmodel::comm_op_seconds(op, layout, mp);
    const double t = one * op.count;
    const double flops = op.total_flops();
    std::string note;
    if (op.kind == OpKind::gemm) {
      const auto est = costmodel::gemm_roofline(costmodel::GemmShape{op.m, op.n, op.k, 2, 1, op.format}, cp);
      note = "tile " + std::to_string(est.tile_m) + "x" + std::to_string(est.tile_n) + ", " +
             std::to_string(est.waves) + " wave" + (est.waves == 1 ? "" : "s") + (est.memory_bound ? ", HBM-bound" : "");
    } else if (op.kind == OpKind::collective) {
      const GroupPlacement g = costmodel::place_group(layout, op.dim, cluster.nvlink_domain());
      const CollectiveEstimate e = costmodel::collective(op.coll, op.bytes, g, mp);
      note = algo_label(e) + ", busbw " + fixed(e.busbw_Bps / 1e9, 0) + " GB/s";
    }
    if (op.async) note += note.empty() ? "async" : ", async";
    if (op.count > 1) note += (note.empty() ? "x" : ", x") + std::to_string(op.count);
    const bool fwd = op.pass == ops::Pass::forward && !op.recompute;
    if (op.is_compute()) {
      (fwd ? t_fwd : t_bwd) += t;
      (fwd ? f_fwd : f_bwd) += op.recompute ? 0 : flops;
    } else {
      (fwd ? t_comm_fwd : t_comm_bwd) += t;
    }
    const double tflops = flops > 0 && t > 0 ? flops / t / 1e12 : 0;
    rows.push_back({pass_label(op), op.name, to_string(op.kind), shape_of(op),
                    flops > 0 ? fixed(flops / 1e9, 1) : "", fixed(t * 1e6, 1),
                    tflops > 0 ? fixed(tflops, 0) : "", note});
    jops.push_back({{"pass", pass_label(op)},
                    {"name", op.name},
                    {"kind", to_string(op.kind)},
                    {"shape", shape_of(op)},
                    {"m", op.m},
                    {"n", op.n},
                    {"k", op.k},
                    {"bytes", op.bytes},
                    {"count", op.count},
                    {"async", op.async},
                    {"flops", flops},
                    {"seconds", t},
                    {"tflops", tflops}});
  }

  return lt;
}

/// Collectives against size on 1, 2, 4 and 16 NVLink domains: the text tables and JSON.
std::pair<nlohmann::json, std::string> collective_tables(const hw::Cluster& cluster, const costmodel::CommParams& mp) {
  const CollectiveKind kinds[] = {CollectiveKind::all_reduce, CollectiveKind::all_gather, CollectiveKind::reduce_scatter};
  const int node_counts[] = {1, 2, 4, 16};  // NVLink domains
  const int domain = cluster.nvlink_domain();
  nlohmann::json jcoll = nlohmann::json::array();
  std::string coll_text;
  for (CollectiveKind k : kinds) {
    std::vector<std::vector<std::string>> crows;
    for (double s : sizes()) {
      std::vector<std::string> r{size_label(s)};
      for (int n : node_counts) {
        const GroupPlacement g{domain * n, domain, n};
        const CollectiveEstimate e = costmodel::collective(k, s, g, mp);
        r.push_back(fixed(e.seconds * 1e6, 1));
        r.push_back(fixed(e.busbw_Bps / 1e9, 1));
        r.push_back(algo_label(e));
        jcoll.push_back({{"op", to_string(k)},
                         {"nodes", n},
                         {"ranks", g.ranks},
                         {"bytes", s},
                         {"seconds", e.seconds},
                         {"algbw_gbps", e.algbw_Bps / 1e9},
                         {"busbw_gbps", e.busbw_Bps / 1e9},
                         {"algorithm", costmodel::to_string(e.algo)},
                         {"protocol", costmodel::to_string(e.proto)},
                         {"measured", e.measured}});
      }
      crows.push_back(r);
    }
    std::vector<std::string> header{"size"};
    for (int n : node_counts) {
      const std::string tag = std::to_string(n * domain) + "g";
      header.push_back(tag + " us");
      header.push_back(tag + " busbw");
      header.push_back(tag + " algo");
    }
    coll_text += std::string("\n") + to_string(k) + " (GB/s busbw per nccl-tests; " +
                 std::to_string(domain) + " GPUs per NVLink domain; " + std::to_string(domain) + "g = one domain)\n" + format_table(header, crows);
  }

  return {jcoll, coll_text};
}

/// The published nccl-tests figures of the cluster beside the model at 1 GiB.
std::pair<nlohmann::json, std::vector<std::vector<std::string>>> published_table(const hw::Cluster& cluster,
                                                                                 const costmodel::CommParams& mp) {
  nlohmann::json jpub = nlohmann::json::array();
  std::vector<std::vector<std::string>> prow;
  for (const auto& p : costmodel::published_busbw(cluster)) {
    const int nodes = p.ranks / p.ranks_per_node;
    const GroupPlacement g{p.ranks, p.ranks_per_node, nodes};
    costmodel::CommParams q = mp;
    const std::string algo = p.algorithm;
    if (algo == "ring") q.allow_nvls = false;
    const CollectiveEstimate e = costmodel::collective(p.op, 1073741824.0, g, q);
    const double mid = (p.busbw_lo_Bps + p.busbw_hi_Bps) / 2;
    prow.push_back({to_string(p.op), std::to_string(p.ranks), algo.empty() ? "NCCL's choice" : algo,
                    fixed(p.busbw_lo_Bps / 1e9, 0) + (p.busbw_hi_Bps > p.busbw_lo_Bps ? "-" + fixed(p.busbw_hi_Bps / 1e9, 0) : ""),
                    fixed(e.busbw_Bps / 1e9, 1),
                    p.op == CollectiveKind::all_to_all
                        ? std::string("direct")
                        : algo_label(e),
                    fixed((e.busbw_Bps / mid - 1) * 100, 1) + "%", p.source});
    jpub.push_back({{"op", to_string(p.op)},
                    {"ranks", p.ranks},
                    {"ranks_per_node", p.ranks_per_node},
                    {"algorithm", algo},
                    {"published_busbw_gbps", {p.busbw_lo_Bps / 1e9, p.busbw_hi_Bps / 1e9}},
                    {"predicted_busbw_gbps", e.busbw_Bps / 1e9},
                    {"source", p.source}});
  }

  return {jpub, prow};
}

}  // namespace

int print_preset_costs(const PresetCostOptions& o) {
  auto cluster_opt = hw::find_cluster_preset(o.cluster);
  if (!cluster_opt) {
    std::string names;
    for (const auto& c : hw::cluster_presets()) names += (names.empty() ? "" : ", ") + c.name;
    throw UserError(SourceLocation{"--costs"}, "cluster", "unknown cluster preset \"" + o.cluster + "\" (known: " + names + ")");
  }
  hw::Cluster cluster = *cluster_opt;
  cluster.nodes = o.nodes > 0 ? o.nodes : 1;
  auto model_opt = model::find_model_preset(o.model);
  if (!model_opt) {
    std::string names;
    for (const auto& m : model::model_presets()) names += (names.empty() ? "" : ", ") + m.name;
    throw UserError(SourceLocation{"--model"}, "model", "unknown model preset \"" + o.model + "\" (known: " + names + ")");
  }
  const model::Model model = *model_opt;
  if (o.seq <= 0) throw UserError(SourceLocation{"--seq"}, "seq", "must be a positive integer");
  parallel::Layout layout;
  layout.dp = 1;
  scenarios::apply_layout_string(layout, o.layout, "--layout");
  parallel::Training training;
  training.seq_len = o.seq;
  training.global_batch = layout.mbs * layout.dp * std::max(1, layout.pp);
  if (auto issue = parallel::check_layout(model, layout.world(), training, layout)) {
    throw UserError(SourceLocation{"--layout"}, issue->key, issue->message);
  }

  const costmodel::Profile profile = costmodel::builtin_profile(cluster);
  const costmodel::ComputeParams cp = costmodel::make_compute_params(cluster, profile);
  const costmodel::CommParams mp = costmodel::make_comm_params(cluster, profile);
  const std::vector<Op> ops = ops::layer_ops(model, training, layout);

  const LayerTable lt = layer_table(ops, layout, cluster, cp, mp);
  const double t_fwd = lt.t_fwd, t_bwd = lt.t_bwd, t_comm_fwd = lt.t_comm_fwd, t_comm_bwd = lt.t_comm_bwd;
  const double f_fwd = lt.f_fwd, f_bwd = lt.f_bwd;
  const auto& jops = lt.jops;
  const auto& rows = lt.rows;

  // Collectives against size.
  const auto [jcoll, coll_text] = collective_tables(cluster, mp);

  // Published figures next to the model at 1 GiB.
  const auto [jpub, prow] = published_table(cluster, mp);

  const std::string layout_text = scenarios::format_layout(layout);
  if (o.json) {
    print_json({{"cluster", cluster.name},
                {"gpu", cluster.gpu.name},
                {"model", model.name},
                {"layout", layout_text},
                {"seq_len", o.seq},
                {"nccl", costmodel::to_string(mp.version)},
                {"profile", profile.meta.source},
                {"gemm_peak_tflops", cp.gemm_peak_flops / 1e12},
                {"hbm_gbps", cp.hbm_Bps / 1e9},
                {"layer",
                 {{"forward_compute_s", t_fwd},
                  {"backward_compute_s", t_bwd},
                  {"forward_comm_s", t_comm_fwd},
                  {"backward_comm_s", t_comm_bwd},
                  {"forward_flops", f_fwd},
                  {"backward_flops", f_bwd}}},
                {"ops", jops},
                {"collectives", jcoll},
                {"published", jpub}});
    return 0;
  }
  std::printf("Cost model of %s (%s, %d GPUs/node, NVLink domain %d), built-in profile, NCCL %s\n",
              cluster.name.c_str(), cluster.gpu.name.c_str(), cluster.gpus_per_node, cluster.nvlink_domain(),
              costmodel::to_string(mp.version));
  std::printf("GEMM ceiling %.1f TFLOP/s (MAMF held under load), HBM %.0f GB/s, %d SMs\n", cp.gemm_peak_flops / 1e12, cp.hbm_Bps / 1e9,
              cp.sms);
  std::printf("\nOne layer of %s, seq %d, layout %s (one micro-batch, one rank)\n", model.name.c_str(), o.seq,
              layout_text.c_str());
  std::printf("%s", format_table({"pass", "op", "kind", "shape", "GFLOP", "time us", "TFLOP/s", "notes"}, rows).c_str());
  std::printf("forward : compute %.1f us (%.0f TFLOP/s), communication %.1f us\n", t_fwd * 1e6,
              t_fwd > 0 ? f_fwd / t_fwd / 1e12 : 0.0, t_comm_fwd * 1e6);
  std::printf("backward: compute %.1f us (%.0f TFLOP/s), communication %.1f us (async ops overlap compute)\n",
              t_bwd * 1e6, t_bwd > 0 ? f_bwd / t_bwd / 1e12 : 0.0, t_comm_bwd * 1e6);
  std::printf("\nCollectives against size (NCCL model, algorithm/protocol as NCCL would choose)%s", coll_text.c_str());
  if (!prow.empty()) {
    std::printf("\nPublished nccl-tests busbw at large messages vs the model at 1 GiB\n%s",
                format_table({"op", "GPUs", "algorithm", "published", "model", "model algo", "diff", "source"}, prow).c_str());
  }
  return 0;
}

}  // namespace tetra::cli
