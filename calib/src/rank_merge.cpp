// Collective times from several ranks' traces of one run (rank_merge.hpp).
#include "tetra/calib/rank_merge.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tetra/base/error.hpp"
#include "tetra/base/text_file.hpp"
#include "tetra/calib/bounded_fit.hpp"
#include "tetra/calib/sweep.hpp"
#include "trace_common.hpp"

namespace tetra::calib {
namespace {

using trace::Accumulator;
using trace::CommKernel;
using trace::fail;

constexpr std::size_t npos = static_cast<std::size_t>(-1);

/// One rank's trace as read, its NCCL kernels grouped by kind.
struct RankInput {
  std::string origin;
  TraceImport imp;
  trace::RankSamples samples;
  int rank = -1;
  bool rank_from_trace = false;
  std::map<std::string, std::vector<std::size_t>> by_key;  // indices into samples.comm, by start
  double offset_us = 0;                                    // clock minus the reference's

  [[nodiscard]] const CommKernel& kernel(std::size_t i) const { return samples.comm[i]; }
  [[nodiscard]] double start(std::size_t i) const { return samples.comm[i].start_us - offset_us; }
  [[nodiscard]] double end(std::size_t i) const { return samples.comm[i].end_us - offset_us; }
};

RankInput read_rank(std::string_view raw, const std::string& origin, const TraceImportOptions& options,
                    int position) {
  RankInput in;
  in.origin = origin;
  trace::read_trace_text(raw, origin, options, in.imp, &in.samples);
  in.rank_from_trace = in.imp.rank >= 0;
  in.rank = in.rank_from_trace ? in.imp.rank : position;
  return in;
}

/// One run: one world size, distinct ranks below it, one GPU. Errors name the trace that
/// differs from the first one to say otherwise.
void check_one_run(const std::vector<RankInput>& ins) {
  const RankInput* world = nullptr;
  const RankInput* gpu = nullptr;
  std::map<int, const RankInput*> seen;
  for (const auto& in : ins) {
    if (in.imp.world_size > 0) {
      if (world == nullptr) {
        world = &in;
      } else if (in.imp.world_size != world->imp.world_size) {
        fail(in.origin, "world size " + std::to_string(in.imp.world_size) + " (distributedInfo), but " + world->origin +
                            " has " + std::to_string(world->imp.world_size) + ": not the same run");
      }
    }
    const auto [it, fresh] = seen.emplace(in.rank, &in);
    if (!fresh) {
      fail(in.origin, "rank " + std::to_string(in.rank) + " again (" + it->second->origin +
                          " is that rank too): give each rank's trace once");
    }
    const std::string& name = in.imp.profile.meta.gpu;
    if (name.empty()) continue;
    if (gpu == nullptr) {
      gpu = &in;
    } else if (!same_device(name, gpu->imp.profile.meta.gpu)) {
      fail(in.origin, "recorded on " + name + ", but " + gpu->origin + " on " + gpu->imp.profile.meta.gpu +
                          ": not the same run");
    }
  }
  if (world == nullptr) return;
  for (const auto& in : ins) {
    if (in.rank >= world->imp.world_size) {
      const std::string from = in.rank_from_trace ? "distributedInfo" : "its position";
      fail(in.origin, "rank " + std::to_string(in.rank) + " (" + from + ") is outside world size " +
                          std::to_string(world->imp.world_size));
    }
  }
}

/// Groups each trace's NCCL kernels by kind; send / recv and kernels without a time are left
/// out. A trace with no collective left is refused: there is nothing to match.
void group_kernels(std::vector<RankInput>& ins, std::map<std::string, int>& skipped) {
  for (auto& in : ins) {
    for (std::size_t i = 0; i < in.samples.comm.size(); ++i) {
      const CommKernel& k = in.samples.comm[i];
      if (k.p2p) {
        ++skipped["NCCL send / recv kernel: it pairs two ranks, not matched across the group"];
      } else if (!std::isfinite(k.start_us) || !std::isfinite(k.end_us)) {
        ++skipped["NCCL kernel without a timestamp"];
      } else {
        in.by_key[k.key].push_back(i);
      }
    }
    if (in.by_key.empty()) {
      fail(in.origin, "no NCCL collective kernel (send / recv aside): nothing to match across the ranks' traces");
    }
    for (auto& [key, v] : in.by_key) {
      std::stable_sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
        return in.samples.comm[a].start_us < in.samples.comm[b].start_us;
      });
    }
  }
}

/// The n-th kernels of one kind on traces x and y, for every kind both hold.
std::vector<std::pair<const CommKernel*, const CommKernel*>> nth_pairs(const RankInput& x, const RankInput& y) {
  std::vector<std::pair<const CommKernel*, const CommKernel*>> out;
  for (const auto& [key, xs] : x.by_key) {
    const auto it = y.by_key.find(key);
    if (it == y.by_key.end()) continue;
    for (std::size_t i = 0; i < std::min(xs.size(), it->second.size()); ++i) {
      out.emplace_back(&x.kernel(xs[i]), &y.kernel(it->second[i]));
    }
  }
  return out;
}

/// y's clock minus x's. Kernels a and b overlap once aligned when the offset lies in
/// (b.start - a.end, b.end - a.start); the offset is taken inside the most such ranges (the one
/// nearest zero on a tie), then set to the median end difference of the pairs whose range
/// holds it: their collectives end together.
double pair_offset(const std::vector<std::pair<const CommKernel*, const CommKernel*>>& pairs) {
  std::vector<std::pair<double, int>> edges;
  for (const auto& [a, b] : pairs) {
    edges.emplace_back(b->start_us - a->end_us, +1);
    edges.emplace_back(b->end_us - a->start_us, -1);
  }
  std::sort(edges.begin(), edges.end());  // at one point the closing -1 first: ranges are open
  int depth = 0;
  int best = -1;
  double at = 0;
  for (std::size_t i = 0; i + 1 < edges.size(); ++i) {
    depth += edges[i].second;
    if (!(edges[i + 1].first > edges[i].first)) continue;  // an empty segment
    const double mid = 0.5 * (edges[i].first + edges[i + 1].first);
    if (depth > best || (depth == best && std::fabs(mid) < std::fabs(at))) {
      best = depth;
      at = mid;
    }
  }
  std::vector<double> ends;
  for (const auto& [a, b] : pairs) {
    if (b->start_us - a->end_us < at && at < b->end_us - a->start_us) ends.push_back(b->end_us - a->end_us);
  }
  return ends.empty() ? at : median(ends);
}

/// How many n-th pairs traces x and y have.
std::size_t pair_count(const RankInput& x, const RankInput& y) {
  std::size_t n = 0;
  for (const auto& [key, xs] : x.by_key) {
    const auto it = y.by_key.find(key);
    if (it != y.by_key.end()) n += std::min(xs.size(), it->second.size());
  }
  return n;
}

/// Offsets of every trace against ins[0]: each in turn, the one with the most kernel pairs
/// with an aligned trace, against that trace.
void align_clocks(std::vector<RankInput>& ins) {
  std::vector<bool> aligned(ins.size(), false);
  std::vector<std::size_t> pairs(ins.size(), 0), via(ins.size(), npos);
  // A newly aligned trace j: the best aligned partner of each other trace so far.
  auto offer = [&](std::size_t j) {
    aligned[j] = true;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      if (aligned[i]) continue;
      const std::size_t n = pair_count(ins[j], ins[i]);
      if (n > pairs[i]) {
        pairs[i] = n;
        via[i] = j;
      }
    }
  };
  offer(0);
  for (std::size_t done = 1; done < ins.size(); ++done) {
    std::size_t next = npos;
    for (std::size_t i = 0; i < ins.size(); ++i) {
      if (!aligned[i] && (next == npos || pairs[i] > pairs[next])) next = i;
    }
    if (pairs[next] == 0) {
      fail(ins[next].origin, "none of its " + std::to_string(ins[next].samples.comm.size()) +
                                 " NCCL kernels is of a kind (op, group, size) another trace holds: its clock cannot "
                                 "be aligned");
    }
    ins[next].offset_us = ins[via[next]].offset_us + pair_offset(nth_pairs(ins[via[next]], ins[next]));
    offer(next);
  }
}

/// For each of x's kernels `xs`, its partner among y's `ys` (npos: none): in order, a pair where
/// the two overlap once aligned; a kernel that ends before the other starts has no partner.
std::vector<std::size_t> partners(const RankInput& x, const std::vector<std::size_t>& xs, const RankInput& y,
                                  const std::vector<std::size_t>& ys) {
  std::vector<std::size_t> out(xs.size(), npos);
  std::size_t i = 0, j = 0;
  while (i < xs.size() && j < ys.size()) {
    if (x.start(xs[i]) < y.end(ys[j]) && y.start(ys[j]) < x.end(xs[i])) {
      out[i++] = j++;
    } else if (x.end(xs[i]) <= y.end(ys[j])) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

/// What the merge adds up: the collective samples, the instances and the kernel accounting.
struct MergeTally {
  Accumulator acc;
  RankMerge merge;
  std::map<std::string, int> skipped;
  int used = 0;
};

/// One instance: the kernels (trace, index) of one collective, the reference's first.
void add_instance(const std::vector<std::pair<const RankInput*, std::size_t>>& ks, MergeTally& t) {
  MergedCollective c;
  const CommKernel& k0 = ks.front().first->kernel(ks.front().second);
  c.op = k0.op;
  c.ranks = k0.ranks;
  double latest_start = -std::numeric_limits<double>::infinity();
  double earliest_end = std::numeric_limits<double>::infinity();
  double latest_end = -earliest_end;
  for (const auto& [in, i] : ks) {
    c.traced_ranks.push_back(in->rank);
    c.own_seconds.push_back((in->end(i) - in->start(i)) * 1e-6);
    c.bytes = std::max(c.bytes, in->kernel(i).bytes);
    if (in->start(i) > latest_start) {
      latest_start = in->start(i);
      c.last_rank = in->rank;
    }
    earliest_end = std::min(earliest_end, in->end(i));
    latest_end = std::max(latest_end, in->end(i));
  }
  const int n = static_cast<int>(ks.size());
  if (!(earliest_end > latest_start)) {
    t.skipped["NCCL kernels matched in pairs that share no common span"] += n;
    return;
  }
  c.seconds = (earliest_end - latest_start) * 1e-6;
  c.end_spread_s = (latest_end - earliest_end) * 1e-6;
  c.end_us = earliest_end;
  if (!c.op.empty() && c.ranks >= 1 && c.bytes > 0) {
    t.acc.collective[{c.op, c.ranks, k0.ranks_per_node, c.bytes}].push_back(c.seconds);
    ++t.merge.instances_with_rows;
    if (static_cast<int>(c.traced_ranks.size()) >= c.ranks) ++t.merge.instances_whole_group;
    t.used += n;
  } else {
    t.skipped["NCCL kernel without message size and group size"] += n;
  }
  t.merge.instances.push_back(std::move(c));
}

/// The instances of one kind: each kernel of the lowest rank holding it with a partner on
/// every other trace holding it.
void match_kind(const std::string& key, const std::vector<const RankInput*>& holders, MergeTally& t) {
  const RankInput& ref = *holders.front();
  const auto& refs = ref.by_key.at(key);
  if (holders.size() < 2) {
    t.skipped["NCCL kernel of a kind no other trace holds"] += static_cast<int>(refs.size());
    return;
  }
  std::vector<std::vector<std::size_t>> with(holders.size());
  int kernels = static_cast<int>(refs.size());
  for (std::size_t h = 1; h < holders.size(); ++h) {
    with[h] = partners(ref, refs, *holders[h], holders[h]->by_key.at(key));
    kernels += static_cast<int>(holders[h]->by_key.at(key).size());
  }
  int matched = 0;
  for (std::size_t i = 0; i < refs.size(); ++i) {
    std::vector<std::pair<const RankInput*, std::size_t>> ks{{&ref, refs[i]}};
    for (std::size_t h = 1; h < holders.size() && ks.size() == h; ++h) {
      if (with[h][i] != npos) ks.emplace_back(holders[h], holders[h]->by_key.at(key)[with[h][i]]);
    }
    if (ks.size() < holders.size()) continue;
    add_instance(ks, t);
    matched += static_cast<int>(ks.size());
  }
  if (kernels > matched) {
    t.skipped["NCCL kernel with no overlapping kernel of its kind on every trace holding it"] += kernels - matched;
  }
}

/// The traces' source line: the first few paths and how many ranks.
std::string merged_source(const std::vector<RankInput>& ins) {
  std::string s = "import-trace";
  for (std::size_t i = 0; i < ins.size() && i < 4; ++i) s += (i == 0 ? " " : ", ") + ins[i].origin;
  if (ins.size() > 4) s += " and " + std::to_string(ins.size() - 4) + " more";
  return s + " (" + std::to_string(ins.size()) + " ranks merged: collectives from the last arriving rank)";
}

/// Pools the traces' rows and counters; the collective rows come from `t`.
MergedTraceImport combine(const std::vector<RankInput>& ins, MergeTally& t) {
  MergedTraceImport out;
  TraceImport& imp = out.import;
  const RankInput* named = &ins.front();
  for (const auto& in : ins) {
    if (named->imp.profile.meta.gpu.empty() && !in.imp.profile.meta.gpu.empty()) named = &in;
    for (const auto& [k, v] : in.samples.acc.gemm) t.acc.gemm[k].insert(t.acc.gemm[k].end(), v.begin(), v.end());
    for (const auto& [k, v] : in.samples.acc.attention) {
      t.acc.attention[k].insert(t.acc.attention[k].end(), v.begin(), v.end());
    }
    for (const auto& [k, v] : in.samples.acc.memory) t.acc.memory[k].insert(t.acc.memory[k].end(), v.begin(), v.end());
    imp.kernels += in.imp.kernels;
    imp.used += in.imp.used;
    for (const auto& [why, n] : in.imp.skipped) imp.skipped[why] += n;
    imp.linked_by_external_id += in.imp.linked_by_external_id;
    imp.linked_by_time += in.imp.linked_by_time;
    imp.gemm_kernels += in.imp.gemm_kernels;
    imp.gemm_kernels_used += in.imp.gemm_kernels_used;
    t.merge.traces.push_back({in.origin, in.rank, in.rank_from_trace, in.offset_us,
                              static_cast<int>(in.samples.comm.size())});
    t.merge.world_size = std::max(t.merge.world_size, in.imp.world_size);
  }
  imp.profile.meta = named->imp.profile.meta;
  imp.profile.meta.source = merged_source(ins);
  if (!named->imp.profile.meta.gpu.empty()) t.merge.gpu_trace = named->origin;
  imp.world_size = t.merge.world_size;
  imp.devices = ins.front().imp.devices;
  imp.ranks_per_node = ins.front().imp.ranks_per_node;
  imp.ranks_per_node_from = ins.front().imp.ranks_per_node_from;
  imp.used += t.used;
  for (const auto& [why, n] : t.skipped) imp.skipped[why] += n;
  trace::finish(t.acc, imp);
  std::vector<double> spread;
  for (const auto& c : t.merge.instances) spread.push_back(c.end_spread_s);
  if (!spread.empty()) t.merge.median_end_spread_s = median(spread);
  out.merge = std::move(t.merge);
  return out;
}

MergedTraceImport merge(std::vector<RankInput> ins) {
  if (ins.size() < 2) throw UserError("calibrate: merging ranks needs the traces of two ranks or more");
  check_one_run(ins);
  std::stable_sort(ins.begin(), ins.end(), [](const RankInput& a, const RankInput& b) { return a.rank < b.rank; });
  MergeTally t;
  group_kernels(ins, t.skipped);
  align_clocks(ins);
  // Every kind, with the traces holding it in rank order.
  std::map<std::string, std::vector<const RankInput*>> kinds;
  for (const auto& in : ins) {
    for (const auto& [key, v] : in.by_key) kinds[key].push_back(&in);
  }
  for (const auto& [key, holders] : kinds) match_kind(key, holders, t);
  std::stable_sort(t.merge.instances.begin(), t.merge.instances.end(),
                   [](const MergedCollective& a, const MergedCollective& b) { return a.end_us < b.end_us; });
  if (t.merge.instances.empty()) {
    fail(ins[1].origin,
         "none of its NCCL kernels overlaps one of its kind on the other traces once the clocks are aligned");
  }
  return combine(ins, t);
}

}  // namespace

MergedTraceImport import_rank_traces(const std::vector<std::string>& paths, const TraceImportOptions& options) {
  std::vector<RankInput> ins;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    // One trace in memory at a time: only its samples and NCCL kernels are kept.
    const std::string data = read_input_file(paths[i], options.max_bytes);
    ins.push_back(read_rank(data, paths[i], options, static_cast<int>(i)));
  }
  return merge(std::move(ins));
}

MergedTraceImport import_rank_trace_texts(const std::vector<std::pair<std::string, std::string>>& traces,
                                          const TraceImportOptions& options) {
  std::vector<RankInput> ins;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    ins.push_back(read_rank(traces[i].second, traces[i].first, options, static_cast<int>(i)));
  }
  return merge(std::move(ins));
}

}  // namespace tetra::calib
