// Bounds on the replayed time of one step (step.hpp) without replaying it: a lower bound from
// the chains of one micro-batch and a few ranks' compute streams, an upper bound from the
// longest path of the step's task graph. Split from step.cpp, which builds the graph.

#include "tetra/sim/step.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include "step_graph.hpp"

namespace tetra::sim {

using detail::build_step_graph;
using detail::BuiltStep;
using detail::kNone;
using detail::piece_end;

namespace {

// A transfer's picoseconds, none when the spec frees the links.
std::int64_t link_ps(const StepSpec& spec, Duration d) { return spec.free_links ? std::int64_t{0} : d.count_ps(); }

/// What step_lower_bound replays each rank against: the step's shape, the pass times (ps) per
/// virtual stage u (chunk u / p of rank u % p), and when the chains of one micro-batch over
/// the virtual stages release each pass.
struct BoundChains {
  int p = 1, v = 1, m = 1, V = 1;
  bool zb = false;               // the schedule splits the backward
  std::int64_t pf = 0, pb = 0;   // a PP send forward, backward
  std::vector<std::int64_t> f, b, bi, w;
  std::vector<std::int64_t> f_release;  // F on u may start
  std::vector<std::int64_t> b_tail;     // still needed after the B on u ends
  std::vector<std::int64_t> b_release;  // B on u may start
};

BoundChains bound_chains(const StepSpec& spec) {
  BoundChains ch;
  const int p = ch.p = std::max(spec.p, 1);
  ch.v = std::max(spec.v, 1);
  ch.m = std::max(spec.m, 1);
  const int V = ch.V = p * ch.v;
  const bool zb = ch.zb = splits_backward(spec.schedule);
  const std::int64_t pf = ch.pf = link_ps(spec, spec.pp_forward);
  const std::int64_t pb = ch.pb = link_ps(spec, spec.pp_backward);
  const auto n = static_cast<std::size_t>(V);
  auto& f = ch.f;
  auto& b = ch.b;
  auto& bi = ch.bi;
  auto& w = ch.w;
  f.resize(n);
  b.resize(n);
  bi.resize(n);
  w.resize(n);
  std::vector<std::int64_t> grad(n);
  for (int u = 0; u < V; ++u) {
    const ChunkCost& cc = spec.stages.at(static_cast<std::size_t>(u % p)).chunks.at(static_cast<std::size_t>(u / p));
    const auto uu = static_cast<std::size_t>(u);
    f[uu] = cc.forward.count_ps();
    b[uu] = cc.backward.count_ps();
    bi[uu] = cc.backward_input.count_ps();
    w[uu] = cc.backward_weight.count_ps();
    grad[uu] = zb ? bi[uu] : b[uu];  // the pass that sends the input gradient down
  }
  auto& f_release = ch.f_release;
  auto& b_tail = ch.b_tail;
  f_release.assign(n, 0);
  b_tail.assign(n, 0);
  for (std::size_t u = 1; u < n; ++u) {
    f_release[u] = f_release[u - 1] + f[u - 1] + pf;
    b_tail[u] = b_tail[u - 1] + grad[u - 1] + pb;
  }
  const std::int64_t forward_end = f_release[n - 1] + f[n - 1];
  auto& b_release = ch.b_release;
  b_release.assign(n, 0);
  std::int64_t above = 0;
  for (std::size_t u = n; u-- > 0;) {
    b_release[u] = forward_end + above;
    above += grad[u] + pb;
  }
  return ch;
}

/// The ranks step_lower_bound replays and what it needs of every rank.
struct BoundRanks {
  std::vector<int> ranks;
  std::vector<std::int64_t> gathers, reduces;  // per rank: DP picoseconds
  std::int64_t after = 0;                      // the longest optimizer and late-gather tail
  std::int64_t tasks = 0;                      // DP transfers counted for the rounding margin
};

// Every rank's optimizer follows the last compute and DP transfer of all ranks; its late
// parameter all-gathers follow it. Each rank's replay bounds those alone, so a few ranks
// suffice: the first, the last two, and the (latest) ones with the most compute and the most
// DP work.
BoundRanks bound_ranks(const StepSpec& spec, const BoundChains& ch) {
  const int p = ch.p;
  BoundRanks br;
  auto& gathers = br.gathers;
  auto& reduces = br.reduces;
  gathers.assign(static_cast<std::size_t>(p), 0);
  reduces.assign(static_cast<std::size_t>(p), 0);
  int heaviest = 0, busiest_dp = 0;
  std::int64_t most = -1, most_dp = -1;
  for (int r = 0; r < p; ++r) {
    const StageSpec& st = spec.stages.at(static_cast<std::size_t>(r));
    const auto rr = static_cast<std::size_t>(r);
    for (const auto& bk : st.buckets) {
      for (const auto& x : bk) {
        gathers[rr] += link_ps(spec, x.gather);
        reduces[rr] += link_ps(spec, x.reduce);
      }
      br.tasks += 2 * static_cast<std::int64_t>(bk.size());
    }
    const bool has_dp = !st.buckets.empty();
    br.after = std::max(br.after, st.optimizer.count_ps() + (has_dp && !spec.overlap_param_gather ? gathers[rr] : 0));
    std::int64_t work = 0;
    for (int c = 0; c < ch.v; ++c) {
      const auto u = static_cast<std::size_t>(c * p + r);
      work += ch.f[u] + (ch.zb ? ch.bi[u] + ch.w[u] : ch.b[u]);
    }
    // Ties go to the later rank: its forward chain starts later and its backward chain is longer.
    if (work >= most) most = work, heaviest = r;
    if (gathers[rr] + reduces[rr] >= most_dp) most_dp = gathers[rr] + reduces[rr], busiest_dp = r;
  }
  br.ranks = {0, std::max(0, p - 2), p - 1, heaviest, busiest_dp};
  std::sort(br.ranks.begin(), br.ranks.end());
  br.ranks.erase(std::unique(br.ranks.begin(), br.ranks.end()), br.ranks.end());
  return br;
}

/// The latest ends over the ranks replayed so far, the tasks counted, and scratch.
struct BoundReplay {
  std::int64_t compute_end = 0, dp_end = 0, tasks = 0;
  std::vector<ScheduleItem> order;
  std::vector<int> last_grad_item;
};

// Rank r's compute stream replayed alone, each pass released by the chains through the other
// ranks, and its DP stream behind it; raises the ends of `out`.
void replay_rank_bound(const StepSpec& spec, const BoundChains& ch, const BoundRanks& br, int r,
                       BoundReplay& out) {
  const int p = ch.p;
  const auto n = static_cast<std::size_t>(ch.V);
  const StageSpec& st = spec.stages.at(static_cast<std::size_t>(r));
  auto& order = out.order;
  auto& last_grad_item = out.last_grad_item;
  pipeline_order(spec.schedule, p, ch.v, ch.m, r, order);
  out.tasks += 2 * static_cast<std::int64_t>(order.size()) + 2;  // tasks, sends, optimizer
  last_grad_item.assign(static_cast<std::size_t>(ch.v), -1);
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    const auto& it = order[static_cast<std::size_t>(i)];
    if (it.pass == StepPass::backward || it.pass == StepPass::backward_weight) {
      last_grad_item[static_cast<std::size_t>(it.chunk)] = i;
    }
  }
  const bool has_dp = !st.buckets.empty();
  // The DP stream: the overlapped parameter all-gathers come first.
  std::int64_t dp = has_dp && spec.overlap_param_gather ? br.gathers[static_cast<std::size_t>(r)] : 0;
  std::int64_t compute_end = out.compute_end;  // a local: the loop below updates it often
  std::int64_t t = 0;        // end of the last compute task
  std::int64_t blocked = 0;  // its blocking send
  for (int i = 0; i < static_cast<int>(order.size()); ++i) {
    const auto& it = order[static_cast<std::size_t>(i)];
    const auto u = static_cast<std::size_t>(it.chunk * p + r);
    std::int64_t start = t + blocked;
    std::int64_t dur = 0;
    blocked = 0;
    switch (it.pass) {
      case StepPass::forward:
        start = std::max(start, ch.f_release[u]);
        dur = ch.f[u];
        if (u + 1 < n && spec.pp_blocking) blocked = ch.pf;
        break;
      case StepPass::backward:
      case StepPass::backward_input:
        start = std::max(start, ch.b_release[u]);
        dur = it.pass == StepPass::backward ? ch.b[u] : ch.bi[u];
        compute_end = std::max(compute_end, start + dur + ch.b_tail[u]);
        if (u > 0 && spec.pp_blocking) blocked = ch.pb;
        break;
      case StepPass::backward_weight:
        dur = ch.w[u];
        break;
    }
    t = start + dur;
    // DP buckets after their pieces of the task that completes the chunk's gradients
    // (the piece boundaries of add_pieces).
    if (has_dp && spec.overlap_grad_reduce && i == last_grad_item[static_cast<std::size_t>(it.chunk)]) {
      const auto& bk = st.buckets[static_cast<std::size_t>(it.chunk)];
      double acc = 0;
      std::int64_t used = 0;
      for (std::size_t k = 0; k < bk.size(); ++k) {
        acc += bk[k].params_fraction;
        const std::int64_t upto = piece_end(dur, acc, k, bk.size(), used);
        used = upto;
        dp = std::max(dp, start + upto) + link_ps(spec, bk[k].reduce);
      }
    }
  }
  out.compute_end = std::max(compute_end, t);
  if (has_dp && !spec.overlap_grad_reduce) dp = std::max(dp, t) + br.reduces[static_cast<std::size_t>(r)];
  out.dp_end = std::max(out.dp_end, dp);
}

}  // namespace

double step_lower_bound(const StepSpec& spec) {
  const BoundChains ch = bound_chains(spec);
  const BoundRanks br = bound_ranks(spec, ch);
  BoundReplay rep;
  rep.tasks = br.tasks;
  for (const int r : br.ranks) replay_rank_bound(spec, ch, br, r, rep);
  // One picosecond per task and transfer for the rounding of their ends (with the chains
  // through the other ranks).
  const std::int64_t tasks = rep.tasks + 4 * static_cast<std::int64_t>(ch.V);
  const std::int64_t bound = std::max<std::int64_t>(0, std::max(rep.compute_end, rep.dp_end) + br.after - tasks);
  return Duration::ps(bound).seconds() * (1.0 - 1e-9);
}

double step_upper_bound(const StepSpec& spec, TaskGraph& g) {
  BuiltStep built;
  build_step_graph(spec, g, built);
  const auto& tasks = g.tasks();
  const auto& task_links = g.task_links();
  const std::size_t n = tasks.size();
  const std::size_t n_links = g.link_names().size();
  auto is_transfer = [&](const TaskSpec& t) { return t.link_count != 0 && t.work_s > 0; };
  // Transfers that may share a link at once: one per stream that uses it (a stream runs one
  // task at a time), each transfer without a stream on its own.
  std::vector<std::vector<std::uint32_t>> link_streams(n_links);
  std::vector<std::uint32_t> link_loose(n_links, 0);
  for (const TaskSpec& t : tasks) {
    if (!is_transfer(t)) continue;
    for (std::uint32_t k = 0; k < t.link_count; ++k) {
      const auto l = task_links[t.link_first + k];
      if (t.stream == kNoStream) {
        ++link_loose[l];
      } else if (std::find(link_streams[l].begin(), link_streams[l].end(), t.stream) == link_streams[l].end()) {
        link_streams[l].push_back(t.stream);
      }
    }
  }
  // Longest durations: a compute task at full rate (its slowdown is charged below), a transfer
  // its latency plus its work at 1/k of a link that k transfers share (max-min fairness
  // gives each flow at least its link's capacity over the flows on it).
  std::vector<double> dur(n, 0.0);
  std::map<std::int32_t, double> taken;                         // SM group -> share-seconds
  std::map<std::int32_t, std::vector<std::uint32_t>> slowed;    // SM group -> compute streams
  std::map<std::int32_t, std::uint32_t> slowed_loose;
  for (std::size_t i = 0; i < n; ++i) {
    const TaskSpec& t = tasks[i];
    dur[i] = t.duration.seconds();
    if (is_transfer(t)) {
      double k = 0;
      for (std::uint32_t j = 0; j < t.link_count; ++j) {
        const auto l = task_links[t.link_first + j];
        if (g.link_unbounded()[l]) continue;
        k = std::max(k, static_cast<double>(link_streams[l].size() + link_loose[l]));
      }
      dur[i] += t.work_s * k;
    }
    if (t.sm_group < 0) continue;
    if (t.sm_share > 0) {
      taken[t.sm_group] += t.sm_share * dur[i];
    } else if (!is_transfer(t) && t.duration.count_ps() > 0) {
      auto& v = slowed[t.sm_group];
      if (t.stream == kNoStream) {
        ++slowed_loose[t.sm_group];
      } else if (std::find(v.begin(), v.end(), t.stream) == v.end()) {
        v.push_back(t.stream);
      }
    }
  }
  // A compute task of SM group q running at rate 1 − S(t) (at least 0.05) lasts its duration
  // plus the integral of min(S, 0.95) over its run: the compute of one stream of the group is
  // stretched by at most the share-seconds of the group's communication in all.
  double stretch = 0;
  for (const auto& [group, share_s] : taken) {
    const double streams = static_cast<double>(slowed[group].size() + slowed_loose[group]);
    stretch += share_s * streams;
  }
  // Longest path over dependencies and stream order (the engine starts a task when both
  // allow it, at once), in Kahn order.
  std::vector<std::uint32_t> indeg(n, 0), succ_first(n + 1, 0), succ;
  std::vector<std::uint32_t> prev_on_stream(n, kNone), last(g.stream_names().size(), kNone);
  for (std::uint32_t i = 0; i < n; ++i) {
    const auto st = tasks[i].stream;
    if (st == kNoStream) continue;
    prev_on_stream[i] = last[st];
    last[st] = i;
  }
  for (std::size_t e = 0; e < g.num_deps(); ++e) ++succ_first[g.dep_from()[e] + 1];
  for (std::uint32_t i = 0; i < n; ++i) {
    if (prev_on_stream[i] != kNone) ++succ_first[prev_on_stream[i] + 1];
  }
  for (std::size_t i = 0; i < n; ++i) succ_first[i + 1] += succ_first[i];
  succ.resize(succ_first[n]);
  std::vector<std::uint32_t> fill(succ_first.begin(), succ_first.end() - 1);
  for (std::size_t e = 0; e < g.num_deps(); ++e) {
    succ[fill[g.dep_from()[e]]++] = g.dep_to()[e];
    ++indeg[g.dep_to()[e]];
  }
  for (std::uint32_t i = 0; i < n; ++i) {
    if (prev_on_stream[i] != kNone) {
      succ[fill[prev_on_stream[i]]++] = i;
      ++indeg[i];
    }
  }
  std::vector<double> start(n, 0.0);
  std::vector<std::uint32_t> ready;
  for (std::uint32_t i = 0; i < n; ++i) {
    if (indeg[i] == 0) ready.push_back(i);
  }
  double makespan = 0;
  std::size_t seen = 0;
  while (!ready.empty()) {
    const auto i = ready.back();
    ready.pop_back();
    ++seen;
    const double end = start[i] + dur[i];
    makespan = std::max(makespan, end);
    for (auto k = succ_first[i]; k < succ_first[i + 1]; ++k) {
      const auto j = succ[k];
      start[j] = std::max(start[j], end);
      if (--indeg[j] == 0) ready.push_back(j);
    }
  }
  if (seen != n) g.check_acyclic();  // a cycle is a schedule bug (GraphError)
  // Margins for the engine's rounding of event times and of its rate arithmetic.
  return (makespan + stretch) * (1.0 + 1e-6) + static_cast<double>(4 * n) * 1e-12;
}

}  // namespace tetra::sim
