// Step level: the pipeline task graph of one training step (docs/architecture.md, "Data flow"
// step 4).

#include "tetra/sim/step.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace tetra::sim {

namespace {

constexpr std::uint32_t kNone = 0xffffffffu;

struct Builder {
  Builder(const StepSpec& s, TaskGraph& graph) : spec(s), g(graph) {}
  const StepSpec& spec;
  TaskGraph& g;
  int V = 1;  // virtual stages
  // per virtual stage x micro-batch
  std::vector<std::uint32_t> fwd_first, fwd_last, bwd_first, bwd_last, send_fwd, send_bwd, cp_fwd, cp_bwd;
  std::vector<std::uint32_t> links;  // per stage: nic_tx, nic_rx, nvl_tx, nvl_rx
  std::uint32_t name_f = 0, name_b = 0, name_bi = 0, name_w = 0, name_sf = 0, name_sb = 0,
                name_dp = 0, name_opt = 0, name_ag = 0, name_cp = 0;
  std::vector<ScheduleItem> order;

  [[nodiscard]] std::size_t idx(int vs, int mb) const {
    return static_cast<std::size_t>(vs) * static_cast<std::size_t>(spec.m) + static_cast<std::size_t>(mb);
  }
  [[nodiscard]] std::uint32_t link(int stage, int which) const {
    return links[static_cast<std::size_t>(stage) * 4 + static_cast<std::size_t>(which)];
  }
};

// End of piece k (of n) of a task of `total_ps` split by cumulative fraction `acc`, after the
// previous piece's end `used`: the last piece takes the rest. Shared by the replay (add_pieces)
// and its bound, whose DP buckets start at these ends.
std::int64_t piece_end(std::int64_t total_ps, double acc, std::size_t k, std::size_t n, std::int64_t used) {
  const std::int64_t upto =
      k + 1 == n ? total_ps : static_cast<std::int64_t>(static_cast<double>(total_ps) * acc);
  return std::clamp<std::int64_t>(upto, used, total_ps);
}

// Adds a chain of pieces on the compute stream of `stage` whose durations split `total` by
// `fractions`; returns the ids of the pieces.
void add_pieces(Builder& b, TaskSpec proto, Duration total, const std::vector<double>& fractions,
                std::vector<std::uint32_t>& ids) {
  ids.clear();
  std::int64_t used = 0;
  double acc = 0;
  const auto alloc = proto.alloc_bytes;
  const auto fr = proto.free_bytes;
  for (std::size_t k = 0; k < fractions.size(); ++k) {
    acc += fractions[k];
    const std::int64_t upto = piece_end(total.count_ps(), acc, k, fractions.size(), used);
    TaskSpec t = proto;
    t.duration = Duration::ps(upto - used);
    t.alloc_bytes = k == 0 ? alloc : 0;
    t.free_bytes = k + 1 == fractions.size() ? fr : 0;
    used = upto;
    const auto id = b.g.add_task(t);
    if (!ids.empty()) b.g.add_dep(ids.back(), id);
    ids.push_back(id);
  }
}

// A transfer of `work_s` seconds (alone on its links) on `stream` of `stage`, over the NICs
// (`inter`) or NVLink: out of `stage` and into `peer` (a PP receiver), or both ways on the
// stage's own links when `peer` < 0.
std::uint32_t add_transfer(Builder& b, std::uint32_t stream, TaskRole role, int stage, int chunk,
                           std::uint32_t name, double work_s, double sm_share, bool inter,
                           int micro_batch = -1, int peer = -1) {
  TaskSpec t;
  t.stream = stream;
  t.role = role;
  t.stage = stage;
  t.chunk = chunk;
  t.micro_batch = micro_batch;
  t.name = name;
  t.work_s = work_s;
  t.sm_group = stage;
  t.sm_share = sm_share;
  const int base = inter ? 0 : 2;
  return b.g.add_task(t, {b.link(stage, base), b.link(peer < 0 ? stage : peer, base + 1)});
}


/// Ids the metrics of a replay need, per stage.
struct BuiltStep {
  std::vector<std::uint32_t> opt;                         ///< optimizer task
  std::vector<std::vector<std::uint32_t>> dp_tasks;       ///< DP reductions
  std::vector<std::vector<std::uint32_t>> cp_tasks;       ///< CP ring transfers
  std::vector<std::vector<std::uint32_t>> late_gathers;   ///< parameter gathers after the optimizer
};

/// The task graph of one step (step.hpp) into `g`.
void build_step_graph(const StepSpec& spec, TaskGraph& g, BuiltStep& built) {
  g.clear();
  const int p = std::max(spec.p, 1);
  const int v = std::max(spec.v, 1);
  const int m = std::max(spec.m, 1);
  Builder b(spec, g);
  b.V = p * v;
  const std::size_t n_vm = static_cast<std::size_t>(b.V) * static_cast<std::size_t>(m);
  b.fwd_first.assign(n_vm, kNone);
  b.fwd_last.assign(n_vm, kNone);
  b.bwd_first.assign(n_vm, kNone);
  b.bwd_last.assign(n_vm, kNone);
  b.send_fwd.assign(n_vm, kNone);
  b.send_bwd.assign(n_vm, kNone);
  b.cp_fwd.assign(n_vm, kNone);
  b.cp_bwd.assign(n_vm, kNone);
  b.name_f = g.intern("F");
  b.name_b = g.intern("B");
  b.name_bi = g.intern("B (input grad)");
  b.name_w = g.intern("W (weight grad)");
  b.name_sf = g.intern("send activation");
  b.name_sb = g.intern("send gradient");
  b.name_dp = g.intern("dp grad reduce");
  b.name_opt = g.intern("optimizer");
  b.name_ag = g.intern("dp param gather");
  b.name_cp = g.intern("cp ring traffic");

  for (int r = 0; r < p; ++r) {
    const std::string s = "stage " + std::to_string(r);
    g.add_stream("compute", r);
    g.add_stream("pp", r);
    g.add_stream("dp", r);
    g.add_stream("cp", r);
    b.links.push_back(g.add_link(s + " nic tx", spec.free_links));
    b.links.push_back(g.add_link(s + " nic rx", spec.free_links));
    b.links.push_back(g.add_link(s + " nvlink tx", spec.free_links));
    b.links.push_back(g.add_link(s + " nvlink rx", spec.free_links));
  }
  auto zero_if_free = [&](Duration d) { return spec.free_links ? Duration{} : d; };

  std::vector<std::uint32_t> pieces;
  std::vector<double> fr;  // piece fractions of the current task (reused: no allocation per task)
  std::vector<std::uint32_t> stage_last_compute(static_cast<std::size_t>(p), kNone);
  auto& stage_dp_tasks = built.dp_tasks;
  auto& stage_cp_tasks = built.cp_tasks;
  auto& stage_late_gathers = built.late_gathers;
  stage_dp_tasks.assign(static_cast<std::size_t>(p), {});
  stage_cp_tasks.assign(static_cast<std::size_t>(p), {});
  stage_late_gathers.assign(static_cast<std::size_t>(p), {});
  std::vector<std::uint32_t> compute_seq;  // this stage's compute tasks in stream order

  for (int r = 0; r < p; ++r) {
    const StageSpec& st = spec.stages.at(static_cast<std::size_t>(r));
    const std::uint32_t cs = static_cast<std::uint32_t>(r) * kStepStreams + kStreamCompute;
    const std::uint32_t ps = static_cast<std::uint32_t>(r) * kStepStreams + kStreamPp;
    const std::uint32_t ds = static_cast<std::uint32_t>(r) * kStepStreams + kStreamDp;
    const std::uint32_t cps = static_cast<std::uint32_t>(r) * kStepStreams + kStreamCp;
    pipeline_order(spec.schedule, p, v, m, r, b.order);
    // Last backward-producing task of each chunk (where its gradients complete).
    std::vector<int> last_grad_item(static_cast<std::size_t>(v), -1);
    std::vector<int> first_fwd_item(static_cast<std::size_t>(v), -1);
    for (int i = 0; i < static_cast<int>(b.order.size()); ++i) {
      const auto& it = b.order[static_cast<std::size_t>(i)];
      const auto c = static_cast<std::size_t>(it.chunk);
      if (it.pass == StepPass::backward || it.pass == StepPass::backward_weight) last_grad_item[c] = i;
      if (it.pass == StepPass::forward && first_fwd_item[c] < 0) first_fwd_item[c] = i;
    }
    const bool has_dp = !st.buckets.empty();
    // Parameter all-gathers of this step, overlapped with the first forwards (issued at
    // the start on the DP stream in forward order).
    std::vector<std::vector<std::uint32_t>> gathers(static_cast<std::size_t>(v));
    const bool gather_overlapped = has_dp && spec.overlap_param_gather;
    if (gather_overlapped) {
      for (int c = 0; c < v; ++c) {
        const auto& bk = st.buckets[static_cast<std::size_t>(c)];
        // Forward order is the reverse of the backward (bucket) order.
        for (auto it = bk.rbegin(); it != bk.rend(); ++it) {
          if (it->gather.count_ps() <= 0) continue;
          gathers[static_cast<std::size_t>(c)].push_back(
              add_transfer(b, ds, TaskRole::param_gather, r, c, b.name_ag, zero_if_free(it->gather).seconds(),
                           spec.comm_sm_share, st.dp_inter_node));
        }
      }
    }
    compute_seq.clear();
    for (int i = 0; i < static_cast<int>(b.order.size()); ++i) {
      const auto& it = b.order[static_cast<std::size_t>(i)];
      const int vs = it.chunk * p + r;
      const auto c = static_cast<std::size_t>(it.chunk);
      const ChunkCost& cc = st.chunks.at(c);
      TaskSpec t;
      t.stream = cs;
      t.stage = r;
      t.micro_batch = it.micro_batch;
      t.chunk = it.chunk;
      t.pool = r;
      t.sm_group = r;
      fr.assign(1, 1.0);
      Duration dur;
      double cp_s = 0;
      switch (it.pass) {
        case StepPass::forward:
          t.role = TaskRole::forward;
          t.name = b.name_f;
          dur = cc.forward;
          cp_s = cc.cp_forward_s;
          t.alloc_bytes = cc.activation_bytes;
          if (i == first_fwd_item[c] && !gathers[c].empty()) {
            fr.assign(gathers[c].size(), 1.0 / static_cast<double>(gathers[c].size()));
          }
          break;
        case StepPass::backward:
          t.role = TaskRole::backward;
          t.name = b.name_b;
          dur = cc.backward;
          cp_s = cc.cp_backward_s;
          t.free_bytes = cc.activation_bytes;
          break;
        case StepPass::backward_input:
          t.role = TaskRole::backward_input;
          t.name = b.name_bi;
          dur = cc.backward_input;
          cp_s = cc.cp_backward_input_s;
          t.free_bytes = cc.activation_bytes * (1.0 - cc.weight_keep_fraction);
          break;
        case StepPass::backward_weight:
          t.role = TaskRole::backward_weight;
          t.name = b.name_w;
          dur = cc.backward_weight;
          t.free_bytes = cc.activation_bytes * cc.weight_keep_fraction;
          break;
      }
      const bool grads_done = i == last_grad_item[c];
      if (grads_done && has_dp && spec.overlap_grad_reduce) {
        fr.clear();
        for (const auto& bk : st.buckets[c]) fr.push_back(bk.params_fraction);
        if (fr.empty()) fr.push_back(1.0);
      }
      // CP ring traffic that crosses nodes runs beside the pass on the NICs, released by what
      // releases the pass (the previous task on the compute stream here, the incoming PP
      // transfer below). Inside a node it stays on NVLink, priced at the layer level only.
      std::uint32_t cp_task = kNone;
      if (cp_s > 0 && st.cp_inter_node && !spec.free_links) {
        // Its share of the SMs is already in the pass time.
        cp_task = add_transfer(b, cps, TaskRole::cp_exchange, r, it.chunk, b.name_cp, cp_s, 0, true,
                               it.micro_batch);
        if (!compute_seq.empty()) g.add_dep(compute_seq.back(), cp_task);
        stage_cp_tasks[static_cast<std::size_t>(r)].push_back(cp_task);
      }
      add_pieces(b, t, dur, fr, pieces);
      const std::uint32_t first = pieces.front();
      // Blocking PP: this task waits for the sends of the previous task.
      if (!compute_seq.empty()) g.add_dep(compute_seq.back(), first);
      compute_seq.push_back(pieces.back());
      if (it.pass == StepPass::forward && i == first_fwd_item[c]) {
        const auto& ag = gathers[c];
        for (std::size_t k = 0; k < ag.size() && k < pieces.size(); ++k) g.add_dep(ag[k], pieces[k]);
      }
      // A PP send of this task's output (or input gradient) to `dst` on the pair's link: NVLink
      // when the boundary after stage `boundary` stays inside a node, else the NICs.
      auto add_send = [&](TaskRole role, std::uint32_t name, Duration work, int dst, int boundary) {
        const bool inter = spec.pp_inter_node.empty() ||
                           spec.pp_inter_node[static_cast<std::size_t>(boundary)] != 0;
        const auto sid = add_transfer(b, ps, role, r, it.chunk, name, zero_if_free(work).seconds(),
                                      spec.comm_sm_share, inter, it.micro_batch, dst);
        g.add_dep(pieces.back(), sid);
        return sid;
      };
      const std::size_t key = b.idx(vs, it.micro_batch);
      if (it.pass == StepPass::forward) {
        b.fwd_first[key] = first;
        b.cp_fwd[key] = cp_task;
        b.fwd_last[key] = pieces.back();
        if (vs + 1 < b.V) {
          b.send_fwd[key] = add_send(TaskRole::send_forward, b.name_sf, spec.pp_forward, (r + 1) % p,
                                     r);
        }
      } else if (it.pass != StepPass::backward_weight) {
        b.bwd_first[key] = first;
        b.bwd_last[key] = pieces.back();
        b.cp_bwd[key] = cp_task;
        if (vs > 0) {
          const int dst = (r + p - 1) % p;
          b.send_bwd[key] = add_send(TaskRole::send_backward, b.name_sb, spec.pp_backward, dst, dst);
        }
        // A backward needs its own forward.
        const auto f = b.fwd_last[key];
        if (f != kNone) g.add_dep(f, first);
      } else {
        const auto bi = b.bwd_last[key];
        if (bi != kNone) g.add_dep(bi, first);
      }
      // DP buckets as the last micro-batch's backward produces them.
      if (grads_done && has_dp && spec.overlap_grad_reduce) {
        const auto& bk = st.buckets[c];
        for (std::size_t k = 0; k < bk.size(); ++k) {
          const auto id = add_transfer(b, ds, TaskRole::dp_reduce, r, it.chunk, b.name_dp,
                                       zero_if_free(bk[k].reduce).seconds(), spec.comm_sm_share,
                                       st.dp_inter_node);
          g.add_dep(pieces[std::min(k, pieces.size() - 1)], id);
          stage_dp_tasks[static_cast<std::size_t>(r)].push_back(id);
        }
      }
    }
    stage_last_compute[static_cast<std::size_t>(r)] = compute_seq.empty() ? kNone : compute_seq.back();
    if (has_dp && !spec.overlap_grad_reduce) {
      for (int c = 0; c < v; ++c) {
        for (const auto& bk : st.buckets[static_cast<std::size_t>(c)]) {
          const auto id = add_transfer(b, ds, TaskRole::dp_reduce, r, c, b.name_dp,
                                       zero_if_free(bk.reduce).seconds(), spec.comm_sm_share,
                                       st.dp_inter_node);
          if (!compute_seq.empty()) g.add_dep(compute_seq.back(), id);
          stage_dp_tasks[static_cast<std::size_t>(r)].push_back(id);
        }
      }
    }
  }
  // Cross-stage edges: a forward needs the previous virtual stage's activation, a backward
  // the next virtual stage's gradient.
  for (int vs = 0; vs < b.V; ++vs) {
    for (int mb = 0; mb < m; ++mb) {
      const auto key = b.idx(vs, mb);
      if (vs > 0) {
        const auto sf = b.send_fwd[b.idx(vs - 1, mb)];
        if (sf != kNone && b.fwd_first[key] != kNone) g.add_dep(sf, b.fwd_first[key]);
        if (sf != kNone && b.cp_fwd[key] != kNone) g.add_dep(sf, b.cp_fwd[key]);
      }
      if (vs + 1 < b.V) {
        const auto sb = b.send_bwd[b.idx(vs + 1, mb)];
        if (sb != kNone && b.bwd_first[key] != kNone) g.add_dep(sb, b.bwd_first[key]);
        if (sb != kNone && b.cp_bwd[key] != kNone) g.add_dep(sb, b.cp_bwd[key]);
      }
    }
  }
  // Blocking sends: the sender's next compute task waits for the send to finish.
  if (spec.pp_blocking) {
    // The task after each producer on the same compute stream: found through the stream order.
    std::vector<std::uint32_t> next_on_stream(g.tasks().size(), kNone);
    std::vector<std::uint32_t> last(static_cast<std::size_t>(p) * kStepStreams, kNone);
    for (std::uint32_t i = 0; i < g.tasks().size(); ++i) {
      const auto s = g.tasks()[i].stream;
      if (s == kNoStream || s % kStepStreams != kStreamCompute) continue;
      if (last[s] != kNone) next_on_stream[last[s]] = i;
      last[s] = i;
    }
    for (std::size_t k = 0; k < n_vm; ++k) {
      for (auto sid : {b.send_fwd[k], b.send_bwd[k]}) {
        if (sid == kNone) continue;
        const auto producer = (sid == b.send_fwd[k]) ? b.fwd_last[k] : b.bwd_last[k];
        const auto next = next_on_stream[producer];
        if (next != kNone) g.add_dep(sid, next);
      }
    }
  }
  // Optimizer: after every stage's gradients are reduced (the gradient-norm all-reduce over
  // the model-parallel group synchronises the ranks), then the parameter all-gather.
  auto& opt = built.opt;
  opt.assign(static_cast<std::size_t>(p), 0);
  for (int r = 0; r < p; ++r) {
    const StageSpec& st = spec.stages[static_cast<std::size_t>(r)];
    TaskSpec t;
    t.stream = static_cast<std::uint32_t>(r) * kStepStreams + kStreamCompute;
    t.role = TaskRole::optimizer;
    t.stage = r;
    t.name = b.name_opt;
    t.sm_group = r;
    t.duration = st.optimizer;
    opt[static_cast<std::size_t>(r)] = g.add_task(t);
  }
  for (int r = 0; r < p; ++r) {
    for (int q = 0; q < p; ++q) {
      const auto lc = stage_last_compute[static_cast<std::size_t>(q)];
      if (lc != kNone) g.add_dep(lc, opt[static_cast<std::size_t>(r)]);
      for (auto d : stage_dp_tasks[static_cast<std::size_t>(q)]) g.add_dep(d, opt[static_cast<std::size_t>(r)]);
    }
  }
  for (int r = 0; r < p; ++r) {
    const StageSpec& st = spec.stages[static_cast<std::size_t>(r)];
    if (st.buckets.empty() || spec.overlap_param_gather) continue;
    for (int c = 0; c < v; ++c) {
      for (const auto& bk : st.buckets[static_cast<std::size_t>(c)]) {
        if (bk.gather.count_ps() <= 0) continue;
        const auto id = add_transfer(b, static_cast<std::uint32_t>(r) * kStepStreams + kStreamDp,
                                     TaskRole::param_gather, r, c, b.name_ag, zero_if_free(bk.gather).seconds(),
                                     spec.comm_sm_share, st.dp_inter_node);
        g.add_dep(opt[static_cast<std::size_t>(r)], id);
        stage_late_gathers[static_cast<std::size_t>(r)].push_back(id);
      }
    }
  }

}

}  // namespace

StepOutcome simulate_step(const StepSpec& spec, TaskGraph& g, Engine& engine, EventQueue& queue) {
  const int p = std::max(spec.p, 1);
  BuiltStep built;
  build_step_graph(spec, g, built);
  const auto& opt = built.opt;
  const auto& stage_dp_tasks = built.dp_tasks;
  const auto& stage_cp_tasks = built.cp_tasks;
  const auto& stage_late_gathers = built.late_gathers;
  engine.run(queue, g, p, spec.record_memory);

  // ---- metrics
  StepOutcome out;
  out.events = queue.executed();
  out.step_time_s = engine.makespan().seconds();
  out.stages.assign(static_cast<std::size_t>(p), StageOutcome{});
  const auto& tasks = g.tasks();
  const auto& tm = engine.timings();
  double span_lo = 1e300, span_hi = 0;
  // Latest-ending dependency per task, for exposure attribution.
  std::vector<std::uint32_t> last_dep(tasks.size(), kNone);
  for (std::size_t e = 0; e < g.num_deps(); ++e) {
    const auto from = g.dep_from()[e], to = g.dep_to()[e];
    if (last_dep[to] == kNone || tm[from].end > tm[last_dep[to]].end) last_dep[to] = from;
  }
  // Producer of each send (its only dependency).
  std::vector<Time> prev_end(static_cast<std::size_t>(p) * kStepStreams, Time::zero());
  for (std::uint32_t i = 0; i < tasks.size(); ++i) {
    const TaskSpec& t = tasks[i];
    if (t.stream == kNoStream || t.stream % kStepStreams != kStreamCompute) continue;
    auto& so = out.stages[static_cast<std::size_t>(t.stage)];
    const double d = (tm[i].end - tm[i].start).seconds();
    so.busy_s += d;
    const bool pipe = t.role != TaskRole::optimizer;
    if (pipe) {
      so.pipeline_busy_s += d;
      span_lo = std::min(span_lo, tm[i].start.seconds());
      span_hi = std::max(span_hi, tm[i].end.seconds());
      so.last_compute_end_s = std::max(so.last_compute_end_s, tm[i].end.seconds());
    }
    const Time pe = prev_end[t.stream];
    prev_end[t.stream] = tm[i].end;
    if (tm[i].start <= pe || last_dep[i] == kNone) continue;
    const auto dep = last_dep[i];
    const TaskSpec& dt = tasks[dep];
    if (dt.role == TaskRole::send_forward || dt.role == TaskRole::send_backward) {
      // The wait beyond the producer's end is the transfer's share (the rest is bubble).
      const Time producer_end = tm[dep].start;
      const Time from = std::max(pe, producer_end);
      if (tm[i].start > from) so.exposed_pp_s += (tm[i].start - from).seconds();
    } else if (t.role != TaskRole::optimizer &&
               (dt.role == TaskRole::dp_reduce || dt.role == TaskRole::param_gather)) {
      so.exposed_dp_s += (tm[i].start - pe).seconds();
    }
  }
  out.pipeline_span_s = span_hi > span_lo ? span_hi - span_lo : 0;
  double bubble = 0;
  for (int r = 0; r < p; ++r) {
    auto& so = out.stages[static_cast<std::size_t>(r)];
    so.idle_s = std::max(0.0, out.step_time_s - so.busy_s);
    if (out.pipeline_span_s > 0) bubble += (out.pipeline_span_s - so.pipeline_busy_s) / out.pipeline_span_s;
    // DP exposure after the pipeline: this rank's reductions still running after its last
    // backward (waiting for other ranks at the optimizer barrier is pipeline imbalance).
    const auto o = opt[static_cast<std::size_t>(r)];
    double dp_end = 0;
    for (auto d : stage_dp_tasks[static_cast<std::size_t>(r)]) dp_end = std::max(dp_end, tm[d].end.seconds());
    so.exposed_dp_s += std::max(0.0, dp_end - so.last_compute_end_s);
    // Non-overlapped parameter gathers after the optimizer.
    double gather_end = tm[o].end.seconds();
    for (auto a : stage_late_gathers[static_cast<std::size_t>(r)]) gather_end = std::max(gather_end, tm[a].end.seconds());
    so.exposed_dp_s += gather_end - tm[o].end.seconds();
    // CP traffic still running after this rank's compute, reductions and gathers.
    double cp_end = 0;
    for (auto x : stage_cp_tasks[static_cast<std::size_t>(r)]) cp_end = std::max(cp_end, tm[x].end.seconds());
    so.exposed_cp_s = std::max(0.0, cp_end - std::max({so.last_compute_end_s, dp_end, gather_end}));
    so.peak_activation_bytes = engine.pool_peak_bytes()[static_cast<std::size_t>(r)];
    double per_mb = 0;
    for (const auto& c : spec.stages[static_cast<std::size_t>(r)].chunks) per_mb += c.activation_bytes;
    so.inflight = per_mb > 0 ? so.peak_activation_bytes / per_mb : 0;
  }
  // Clamped: a pipeline of one stage is busy for its whole span, up to rounding.
  out.bubble_fraction = p > 0 ? std::max(0.0, bubble / p) : 0;
  return out;
}

StepOutcome simulate_step(const StepSpec& spec) {
  TaskGraph g;
  Engine e;
  EventQueue q;
  return simulate_step(spec, g, e, q);
}

double step_lower_bound(const StepSpec& spec) {
  const int p = std::max(spec.p, 1);
  const int v = std::max(spec.v, 1);
  const int m = std::max(spec.m, 1);
  const int V = p * v;
  const bool zb = splits_backward(spec.schedule);
  auto ps_of = [&](Duration d) { return spec.free_links ? std::int64_t{0} : d.count_ps(); };
  const std::int64_t pf = ps_of(spec.pp_forward);
  const std::int64_t pb = ps_of(spec.pp_backward);
  // Per virtual stage u (chunk u / p of rank u % p): pass times, and the chains of one
  // micro-batch over the virtual stages.
  const auto n = static_cast<std::size_t>(V);
  std::vector<std::int64_t> f(n), b(n), bi(n), w(n), grad(n);
  for (int u = 0; u < V; ++u) {
    const ChunkCost& cc = spec.stages.at(static_cast<std::size_t>(u % p)).chunks.at(static_cast<std::size_t>(u / p));
    const auto uu = static_cast<std::size_t>(u);
    f[uu] = cc.forward.count_ps();
    b[uu] = cc.backward.count_ps();
    bi[uu] = cc.backward_input.count_ps();
    w[uu] = cc.backward_weight.count_ps();
    grad[uu] = zb ? bi[uu] : b[uu];  // the pass that sends the input gradient down
  }
  std::vector<std::int64_t> f_release(n, 0);  // F on u may start
  std::vector<std::int64_t> b_tail(n, 0);     // still needed after the B on u ends
  for (std::size_t u = 1; u < n; ++u) {
    f_release[u] = f_release[u - 1] + f[u - 1] + pf;
    b_tail[u] = b_tail[u - 1] + grad[u - 1] + pb;
  }
  const std::int64_t forward_end = f_release[n - 1] + f[n - 1];
  std::vector<std::int64_t> b_release(n, 0);  // B on u may start
  std::int64_t above = 0;
  for (std::size_t u = n; u-- > 0;) {
    b_release[u] = forward_end + above;
    above += grad[u] + pb;
  }

  // Every rank's optimizer follows the last compute and DP transfer of all ranks; its late
  // parameter all-gathers follow it. Each rank's replay below bounds those alone, so a few
  // ranks suffice: the first, the last two, and the (latest) ones with the most compute and
  // the most DP work.
  std::int64_t after = 0, tasks = 0;
  std::vector<std::int64_t> gathers(static_cast<std::size_t>(p), 0), reduces(static_cast<std::size_t>(p), 0);
  int heaviest = 0, busiest_dp = 0;
  std::int64_t most = -1, most_dp = -1;
  for (int r = 0; r < p; ++r) {
    const StageSpec& st = spec.stages.at(static_cast<std::size_t>(r));
    const auto rr = static_cast<std::size_t>(r);
    for (const auto& bk : st.buckets) {
      for (const auto& x : bk) {
        gathers[rr] += ps_of(x.gather);
        reduces[rr] += ps_of(x.reduce);
      }
      tasks += 2 * static_cast<std::int64_t>(bk.size());
    }
    const bool has_dp = !st.buckets.empty();
    after = std::max(after, st.optimizer.count_ps() + (has_dp && !spec.overlap_param_gather ? gathers[rr] : 0));
    std::int64_t work = 0;
    for (int c = 0; c < v; ++c) {
      const auto u = static_cast<std::size_t>(c * p + r);
      work += f[u] + (zb ? bi[u] + w[u] : b[u]);
    }
    // Ties go to the later rank: its forward chain starts later and its backward chain is longer.
    if (work >= most) most = work, heaviest = r;
    if (gathers[rr] + reduces[rr] >= most_dp) most_dp = gathers[rr] + reduces[rr], busiest_dp = r;
  }
  std::vector<int> ranks{0, std::max(0, p - 2), p - 1, heaviest, busiest_dp};
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());

  std::int64_t compute_end = 0, dp_end = 0;
  std::vector<ScheduleItem> order;
  std::vector<int> last_grad_item;
  for (const int r : ranks) {
    const StageSpec& st = spec.stages.at(static_cast<std::size_t>(r));
    pipeline_order(spec.schedule, p, v, m, r, order);
    tasks += 2 * static_cast<std::int64_t>(order.size()) + 2;  // tasks, sends, optimizer
    last_grad_item.assign(static_cast<std::size_t>(v), -1);
    for (int i = 0; i < static_cast<int>(order.size()); ++i) {
      const auto& it = order[static_cast<std::size_t>(i)];
      if (it.pass == StepPass::backward || it.pass == StepPass::backward_weight) {
        last_grad_item[static_cast<std::size_t>(it.chunk)] = i;
      }
    }
    const bool has_dp = !st.buckets.empty();
    // The DP stream: the overlapped parameter all-gathers come first.
    std::int64_t dp = has_dp && spec.overlap_param_gather ? gathers[static_cast<std::size_t>(r)] : 0;
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
          start = std::max(start, f_release[u]);
          dur = f[u];
          if (u + 1 < n && spec.pp_blocking) blocked = pf;
          break;
        case StepPass::backward:
        case StepPass::backward_input:
          start = std::max(start, b_release[u]);
          dur = it.pass == StepPass::backward ? b[u] : bi[u];
          compute_end = std::max(compute_end, start + dur + b_tail[u]);
          if (u > 0 && spec.pp_blocking) blocked = pb;
          break;
        case StepPass::backward_weight:
          dur = w[u];
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
          dp = std::max(dp, start + upto) + ps_of(bk[k].reduce);
        }
      }
    }
    compute_end = std::max(compute_end, t);
    if (has_dp && !spec.overlap_grad_reduce) dp = std::max(dp, t) + reduces[static_cast<std::size_t>(r)];
    dp_end = std::max(dp_end, dp);
  }
  // One picosecond per task and transfer for the rounding of their ends (with the chains
  // through the other ranks).
  tasks += 4 * static_cast<std::int64_t>(V);
  const std::int64_t bound = std::max<std::int64_t>(0, std::max(compute_end, dp_end) + after - tasks);
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
