// Layer level: one layer's op DAG on compute and communication streams (docs/architecture.md,
// "Data flow" step 4).

#include "tetra/sim/layer.hpp"

#include <algorithm>

namespace tetra::sim {

CommAxis axis_of(ops::CommDim dim) noexcept {
  switch (dim) {
    case ops::CommDim::tp: return CommAxis::tp;
    case ops::CommDim::cp:
    case ops::CommDim::cp_a2a:
    case ops::CommDim::cp_ring: return CommAxis::cp;
    case ops::CommDim::pp: return CommAxis::pp;
    case ops::CommDim::dp:
    case ops::CommDim::dp_cp:
    case ops::CommDim::dp_replicate:
    case ops::CommDim::expert_dp: return CommAxis::dp;
    case ops::CommDim::ep: return CommAxis::ep;
  }
  return CommAxis::tp;
}

namespace {
constexpr std::uint32_t kNone = 0xffffffffu;
constexpr std::uint32_t kCompute = 0;
// Communication streams 1 + axis, then the host.
constexpr std::uint32_t kHost = 1 + kCommAxes;
}  // namespace

PassTime replay_pass(const std::vector<const ops::Op*>& ops, const std::vector<double>& seconds,
                     bool record, TaskGraph& g, Engine& engine, EventQueue& queue,
                     double comm_sm_share, HostCost host) {
  g.clear();
  g.add_stream("compute", 0);
  g.add_stream("tp", 0);
  g.add_stream("cp", 0);
  g.add_stream("pp", 0);
  g.add_stream("dp", 0);
  g.add_stream("ep", 0);
  // Host issue times enter the replay only after a sync (HostCost).
  double host_total = 0;
  bool host_chained = false;
  for (const ops::Op* op : ops) {
    if (!op->graphed) host_total += host.kernel_s * std::max(op->count, 1) * op->host_kernels;
    host_chained = host_chained || (op->host_wait != ops::HostWait::none && host.kernel_s > 0);
  }
  if (host_chained) g.add_stream("host", 0);
  PassTime out;
  std::uint32_t last_compute = kNone;
  std::vector<std::uint32_t> blocking;    // must finish before the next compute op
  std::vector<std::uint32_t> async_next;  // must finish before the compute op after the next
  std::vector<std::uint32_t> async_later;
  std::vector<std::uint32_t> op_of_task;
  std::vector<bool> paired;  // per task: covered by the co-scheduled pass (Op::paired)
  Duration paired_busy;      // their total duration
  // The host issuing `reps` repetitions of `op` before the GPU may run them (host_chained only).
  auto add_issue = [&](const ops::Op& op, int reps, std::uint32_t gpu_task) {
    if (!host_chained) return;
    TaskSpec h;
    h.stream = kHost;
    double s = op.graphed ? 0.0 : host.kernel_s * op.host_kernels * reps;
    if (op.host_wait != ops::HostWait::none) s += host.sync_s;
    if (op.host_wait == ops::HostWait::token_counts) s += host.resume_s;
    h.duration = Duration::from_seconds(s);
    const auto id = g.add_task(h);
    op_of_task.push_back(kNone);
    paired.push_back(false);
    if (op.host_wait != ops::HostWait::none && last_compute != kNone) g.add_dep(last_compute, id);
    g.add_dep(id, gpu_task);
  };
  auto add_compute = [&](const ops::Op& op, double s, int reps) {
    TaskSpec t;
    t.stream = kCompute;
    t.sm_group = 0;
    t.duration = Duration::from_seconds(s);
    const auto id = g.add_task(t);
    op_of_task.push_back(kNone);
    paired.push_back(false);
    if (last_compute != kNone) g.add_dep(last_compute, id);
    for (auto b : blocking) g.add_dep(b, id);
    for (auto a : async_later) g.add_dep(a, id);
    blocking.clear();
    async_later.swap(async_next);
    async_next.clear();
    add_issue(op, reps, id);
    last_compute = id;
    out.compute_s += s;
  };
  auto add_comm = [&](const ops::Op& op, double s, std::uint32_t index, int reps) {
    TaskSpec t;
    t.stream = 1 + static_cast<std::uint32_t>(axis_of(op.dim));
    t.sm_group = 0;
    t.sm_share = comm_sm_share;
    t.duration = Duration::from_seconds(s);
    const auto id = g.add_task(t);
    op_of_task.push_back(index);
    paired.push_back(op.paired);
    if (last_compute != kNone) g.add_dep(last_compute, id);
    add_issue(op, reps, id);
    if (op.paired) {
      // Covered by the co-scheduled pass's compute: it shares the SMs but blocks nothing here.
      paired_busy += t.duration;
    } else if (op.async) {
      async_next.push_back(id);
    } else {
      blocking.push_back(id);
    }
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const ops::Op& op = *ops[i];
    const double s = seconds[i];
    const bool ring = op.kind == ops::OpKind::p2p && op.async && op.count > 1 &&
                      i + 1 < ops.size() && ops[i + 1]->is_compute() &&
                      ops[i + 1]->count == op.count;
    if (ring) {
      // CP ring: exchange i overlaps attention step i; step i+1 needs exchange i.
      const ops::Op& next = *ops[i + 1];
      for (int r = 0; r < op.count; ++r) {
        add_comm(op, s, static_cast<std::uint32_t>(i), 1);
        add_compute(next, seconds[i + 1], 1);
      }
      ++i;
      continue;
    }
    const double total = s * std::max(op.count, 1);
    if (op.is_compute()) {
      add_compute(op, total, std::max(op.count, 1));
    } else {
      add_comm(op, total, static_cast<std::uint32_t>(i), std::max(op.count, 1));
    }
  }
  engine.run(queue, g);
  const auto& tm = engine.timings();
  // Paired exchanges finish under the other pass: the pass ends with its last own task, or,
  // when the exchanges outlast the compute that covers them, with their total.
  Time end = engine.makespan();
  if (paired_busy > Duration{}) {
    end = Time::zero() + paired_busy;
    for (std::uint32_t i = 0; i < g.tasks().size(); ++i) {
      if (!paired[i] && tm[i].end > end) end = tm[i].end;
    }
  }
  out.seconds = end.seconds();
  out.compute_s = 0;
  for (std::uint32_t i = 0; i < g.tasks().size(); ++i) {
    const double d = (tm[i].end - tm[i].start).seconds();
    if (g.tasks()[i].stream == kHost) continue;
    if (g.tasks()[i].stream == kCompute) {
      out.compute_s += d;
    } else {
      out.comm_s[g.tasks()[i].stream - 1] += d;
    }
  }
  // Blame each idle gap of the compute stream on the axis of the latest-ending dependency.
  const auto& tasks = g.tasks();
  std::vector<std::uint32_t> last_dep(tasks.size(), kNone);
  for (std::size_t e = 0; e < g.num_deps(); ++e) {
    const auto from = g.dep_from()[e], to = g.dep_to()[e];
    if (last_dep[to] == kNone || tm[from].end > tm[last_dep[to]].end) last_dep[to] = from;
  }
  // A collective the host issued late waited for the host, not for its data: the part of a
  // gap it explains by that is the host's. So is the part a collective waited behind one
  // issued late on its stream (the stream would have freed that much earlier).
  std::vector<double> issued_late(host_chained ? tasks.size() : 0, 0.0);
  if (host_chained) {
    std::vector<Time> ready(tasks.size(), Time::zero());  // data and stream order, host aside
    for (std::size_t e = 0; e < g.num_deps(); ++e) {
      const auto from = g.dep_from()[e], to = g.dep_to()[e];
      if (tasks[from].stream != kHost && tm[from].end > ready[to]) ready[to] = tm[from].end;
    }
    // When each exchange stream would have been free had the host issued in time.
    std::vector<Time> stream_free(kHost + 1, Time::zero());
    for (std::uint32_t i = 0; i < tasks.size(); ++i) {
      const auto st = tasks[i].stream;
      if (st != kCompute && st != kHost) {
        const Time free = std::max(ready[i], stream_free[st]);
        issued_late[i] = std::max(0.0, (tm[i].start - free).seconds());
        stream_free[st] = tm[i].end + Duration::from_seconds(-issued_late[i]);
      }
    }
  }
  Time prev = Time::zero();
  Time last_end = Time::zero();
  for (std::uint32_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].stream != kCompute) continue;
    const double gap = (tm[i].start - prev).seconds();
    if (tm[i].start > prev && last_dep[i] != kNone && tasks[last_dep[i]].stream == kHost) {
      out.host_s += gap;
    } else if (tm[i].start > prev && last_dep[i] != kNone && tasks[last_dep[i]].stream != kCompute) {
      const double late = host_chained ? std::min(gap, issued_late[last_dep[i]]) : 0.0;
      out.host_s += late;
      out.exposed_s[tasks[last_dep[i]].stream - 1] += gap - late;
    } else if (tm[i].start > prev && last_dep[i] == kNone) {
      // First compute op waited on nothing: cannot happen (starts at 0).
    }
    prev = tm[i].end;
    last_end = tm[i].end;
  }
  // Communication still running after the last compute op is exposed too (paired exchanges
  // only where they outlast the pass's compute).
  if (end > last_end) {
    std::uint32_t latest = kNone;
    for (std::uint32_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].stream != kCompute && tasks[i].stream != kHost &&
          (latest == kNone || tm[i].end > tm[latest].end)) {
        latest = i;
      }
    }
    if (latest != kNone) out.exposed_s[tasks[latest].stream - 1] += (end - last_end).seconds();
  }
  // The host issues the whole pass before it can end.
  if (host_total > out.seconds) {
    out.host_s += host_total - out.seconds;
    out.seconds = host_total;
  }
  if (record) {
    for (std::uint32_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].stream == kCompute || tasks[i].stream == kHost || tm[i].end == tm[i].start) continue;
      const auto* op = ops[op_of_task[i]];
      out.comm.push_back({static_cast<CommAxis>(tasks[i].stream - 1), tm[i].start.seconds(),
                          tm[i].end.seconds(), op->name});
    }
  }
  return out;
}

LayerTimes replay_layer(const std::vector<ops::Op>& ops, const OpPricer& price, bool record,
                        double comm_sm_share, HostCost host) {
  TaskGraph g;
  Engine e;
  EventQueue q;
  std::vector<double> secs(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) {
    secs[i] = ops[i].pass == ops::Pass::optimizer ? 0.0 : price(ops[i]);
  }
  std::vector<const ops::Op*> list;
  std::vector<double> s;
  auto run = [&](auto&& keep) {
    list.clear();
    s.clear();
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (keep(ops[i])) {
        list.push_back(&ops[i]);
        s.push_back(secs[i]);
      }
    }
    return replay_pass(list, s, record, g, e, q, comm_sm_share, host);
  };
  using ops::Pass;
  LayerTimes lt;
  lt.forward = run([](const ops::Op& o) { return o.pass == Pass::forward && !o.recompute; });
  lt.backward = run([](const ops::Op& o) {
    return (o.pass == Pass::forward && o.recompute) || o.pass == Pass::backward_input ||
           o.pass == Pass::backward_weight;
  });
  lt.backward_input = run([](const ops::Op& o) {
    return (o.pass == Pass::forward && o.recompute) || o.pass == Pass::backward_input;
  });
  lt.backward_weight = run([](const ops::Op& o) { return o.pass == Pass::backward_weight; });
  return lt;
}

namespace {

void add_scaled(PassTime& into, const PassTime& from, double share) {
  into.seconds += share * from.seconds;
  into.compute_s += share * from.compute_s;
  into.host_s += share * from.host_s;
  for (std::size_t a = 0; a < into.exposed_s.size(); ++a) {
    into.exposed_s[a] += share * from.exposed_s[a];
    into.comm_s[a] += share * from.comm_s[a];
  }
}

}  // namespace

LayerTimes blend(const std::vector<std::pair<LayerTimes, double>>& kinds) {
  if (kinds.size() == 1 && kinds.front().second == 1.0) return kinds.front().first;
  LayerTimes out;
  for (const auto& [times, share] : kinds) {
    add_scaled(out.forward, times.forward, share);
    add_scaled(out.backward, times.backward, share);
    add_scaled(out.backward_input, times.backward_input, share);
    add_scaled(out.backward_weight, times.backward_weight, share);
  }
  if (!kinds.empty()) {
    out.forward.comm = kinds.front().first.forward.comm;
    out.backward.comm = kinds.front().first.backward.comm;
    out.backward_input.comm = kinds.front().first.backward_input.comm;
    out.backward_weight.comm = kinds.front().first.backward_weight.comm;
  }
  return out;
}

}  // namespace tetra::sim
