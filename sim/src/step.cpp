// Step level: the pipeline task graph of one training step (docs/architecture.md, "Data flow"
// step 4). Its bounds without a replay are in step_bounds.cpp.

#include "tetra/sim/step.hpp"

#include <algorithm>
#include <string>

#include "step_graph.hpp"

namespace tetra::sim {

using detail::build_step_graph;
using detail::BuiltStep;
using detail::kNone;
using detail::piece_end;

namespace {

struct Builder {
  Builder(const StepSpec& s, TaskGraph& graph) : spec(s), g(graph) {}
  const StepSpec& spec;
  TaskGraph& g;
  int p = 1;  // stages
  int V = 1;  // virtual stages
  // per virtual stage x micro-batch
  std::vector<std::uint32_t> fwd_first, fwd_last, bwd_first, bwd_last, send_fwd, send_bwd, cp_fwd, cp_bwd;
  std::vector<std::uint32_t> links;  // per stage: nic_tx, nic_rx, nvl_tx, nvl_rx
  std::uint32_t name_f = 0, name_b = 0, name_bi = 0, name_w = 0, name_sf = 0, name_sb = 0,
                name_dp = 0, name_opt = 0, name_ag = 0, name_cp = 0;
  std::vector<ScheduleItem> order;
  // Scratch reused from task to task and stage to stage (no allocation per task).
  std::vector<std::uint32_t> pieces;       // the pieces of the current pass
  std::vector<double> fr;                  // their fractions of its duration
  std::vector<std::uint32_t> compute_seq;  // this stage's compute tasks in stream order
  std::vector<std::uint32_t> stage_last_compute;  // per stage

  [[nodiscard]] std::size_t idx(int vs, int mb) const {
    return static_cast<std::size_t>(vs) * static_cast<std::size_t>(spec.m) + static_cast<std::size_t>(mb);
  }
  [[nodiscard]] std::uint32_t link(int stage, int which) const {
    return links[static_cast<std::size_t>(stage) * 4 + static_cast<std::size_t>(which)];
  }
  /// A transfer's time, none when the spec frees the links.
  [[nodiscard]] Duration zero_if_free(Duration d) const { return spec.free_links ? Duration{} : d; }
};

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

// The frame every task of a step refers to: the ids per (virtual stage, micro-batch), the
// task names, and each stage's four streams and four links (in stream-id order).
void start_step_graph(Builder& b, int m) {
  TaskGraph& g = b.g;
  const StepSpec& spec = b.spec;
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

  for (int r = 0; r < b.p; ++r) {
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
}

/// One stage while its tasks are added: its spec and streams, where each chunk's first
/// forward and last gradient-producing pass fall in its order, and its overlapped gathers.
struct StageFrame {
  int r = 0;
  const StageSpec* st = nullptr;
  std::uint32_t cs = 0, ps = 0, ds = 0, cps = 0;  // compute, PP, DP and CP streams
  bool has_dp = false;
  std::vector<int> last_grad_item, first_fwd_item;  // per chunk, an index into b.order
  std::vector<std::vector<std::uint32_t>> gathers;  // per chunk, in forward order
};

// Stage r's frame, with its schedule in b.order.
StageFrame stage_frame(Builder& b, int r, int v, int m) {
  StageFrame sf;
  sf.r = r;
  sf.st = &b.spec.stages.at(static_cast<std::size_t>(r));
  sf.cs = static_cast<std::uint32_t>(r) * kStepStreams + kStreamCompute;
  sf.ps = static_cast<std::uint32_t>(r) * kStepStreams + kStreamPp;
  sf.ds = static_cast<std::uint32_t>(r) * kStepStreams + kStreamDp;
  sf.cps = static_cast<std::uint32_t>(r) * kStepStreams + kStreamCp;
  pipeline_order(b.spec.schedule, b.p, v, m, r, b.order);
  // Last backward-producing task of each chunk (where its gradients complete).
  sf.last_grad_item.assign(static_cast<std::size_t>(v), -1);
  sf.first_fwd_item.assign(static_cast<std::size_t>(v), -1);
  for (int i = 0; i < static_cast<int>(b.order.size()); ++i) {
    const auto& it = b.order[static_cast<std::size_t>(i)];
    const auto c = static_cast<std::size_t>(it.chunk);
    if (it.pass == StepPass::backward || it.pass == StepPass::backward_weight) sf.last_grad_item[c] = i;
    if (it.pass == StepPass::forward && sf.first_fwd_item[c] < 0) sf.first_fwd_item[c] = i;
  }
  sf.has_dp = !sf.st->buckets.empty();
  sf.gathers.resize(static_cast<std::size_t>(v));
  return sf;
}

// Parameter all-gathers of this step, overlapped with the first forwards (issued at the start
// on the DP stream in forward order), so before the stage's compute tasks.
void add_overlapped_gathers(Builder& b, StageFrame& sf, int v) {
  const StageSpec& st = *sf.st;
  for (int c = 0; c < v; ++c) {
    const auto& bk = st.buckets[static_cast<std::size_t>(c)];
    // Forward order is the reverse of the backward (bucket) order.
    for (auto it = bk.rbegin(); it != bk.rend(); ++it) {
      if (it->gather.count_ps() <= 0) continue;
      sf.gathers[static_cast<std::size_t>(c)].push_back(
          add_transfer(b, sf.ds, TaskRole::param_gather, sf.r, c, b.name_ag, b.zero_if_free(it->gather).seconds(),
                       b.spec.comm_sm_share, st.dp_inter_node));
    }
  }
}

/// A pass before it is split into pieces: its task, its duration, and the seconds of the CP
/// ring traffic beside it.
struct PassTask {
  TaskSpec task;
  Duration dur;
  double cp_s = 0;
};

// The compute task of schedule item `it` on stage sf.r: role, name, duration, CP seconds and
// the activation memory it allocates or frees.
PassTask pass_task(const Builder& b, const StageFrame& sf, const ScheduleItem& it, const ChunkCost& cc) {
  PassTask pt;
  TaskSpec& t = pt.task;
  t.stream = sf.cs;
  t.stage = sf.r;
  t.micro_batch = it.micro_batch;
  t.chunk = it.chunk;
  t.pool = sf.r;
  t.sm_group = sf.r;
  switch (it.pass) {
    case StepPass::forward:
      t.role = TaskRole::forward;
      t.name = b.name_f;
      pt.dur = cc.forward;
      pt.cp_s = cc.cp_forward_s;
      t.alloc_bytes = cc.activation_bytes;
      break;
    case StepPass::backward:
      t.role = TaskRole::backward;
      t.name = b.name_b;
      pt.dur = cc.backward;
      pt.cp_s = cc.cp_backward_s;
      t.free_bytes = cc.activation_bytes;
      break;
    case StepPass::backward_input:
      t.role = TaskRole::backward_input;
      t.name = b.name_bi;
      pt.dur = cc.backward_input;
      pt.cp_s = cc.cp_backward_input_s;
      t.free_bytes = cc.activation_bytes * (1.0 - cc.weight_keep_fraction);
      break;
    case StepPass::backward_weight:
      t.role = TaskRole::backward_weight;
      t.name = b.name_w;
      pt.dur = cc.backward_weight;
      t.free_bytes = cc.activation_bytes * cc.weight_keep_fraction;
      break;
  }
  return pt;
}

// A PP send of the current pass's output (or input gradient) to `dst` on the pair's link:
// NVLink when the boundary after stage `boundary` stays inside a node, else the NICs.
std::uint32_t add_send(Builder& b, const StageFrame& sf, const ScheduleItem& it, TaskRole role,
                       std::uint32_t name, Duration work, int dst, int boundary) {
  const StepSpec& spec = b.spec;
  const bool inter = spec.pp_inter_node.empty() || spec.pp_inter_node[static_cast<std::size_t>(boundary)] != 0;
  if (!spec.pp_boundary_transfer.empty()) work = spec.pp_boundary_transfer[static_cast<std::size_t>(boundary)];
  const auto sid = add_transfer(b, sf.ps, role, sf.r, it.chunk, name, b.zero_if_free(work).seconds(),
                                spec.comm_sm_share, inter, it.micro_batch, dst);
  b.g.add_dep(b.pieces.back(), sid);
  return sid;
}

// The current pass's PP send and its edge to the pass it needs on this stage (a backward its
// forward, a weight-gradient pass its input-gradient pass); records the ids that the
// cross-stage edges join once every stage is built.
void wire_pass(Builder& b, const StageFrame& sf, const ScheduleItem& it, std::uint32_t first,
               std::uint32_t cp_task) {
  const StepSpec& spec = b.spec;
  const int p = b.p;
  const int r = sf.r;
  const int vs = it.chunk * p + r;
  const std::size_t key = b.idx(vs, it.micro_batch);
  if (it.pass == StepPass::forward) {
    b.fwd_first[key] = first;
    b.cp_fwd[key] = cp_task;
    b.fwd_last[key] = b.pieces.back();
    if (vs + 1 < b.V) {
      b.send_fwd[key] = add_send(b, sf, it, TaskRole::send_forward, b.name_sf, spec.pp_forward, (r + 1) % p, r);
    }
  } else if (it.pass != StepPass::backward_weight) {
    b.bwd_first[key] = first;
    b.bwd_last[key] = b.pieces.back();
    b.cp_bwd[key] = cp_task;
    if (vs > 0) {
      const int dst = (r + p - 1) % p;
      b.send_bwd[key] = add_send(b, sf, it, TaskRole::send_backward, b.name_sb, spec.pp_backward, dst, dst);
    }
    // A backward needs its own forward.
    const auto f = b.fwd_last[key];
    if (f != kNone) b.g.add_dep(f, first);
  } else {
    const auto bi = b.bwd_last[key];
    if (bi != kNone) b.g.add_dep(bi, first);
  }
}

// DP buckets as the last micro-batch's backward produces them: bucket k after piece k of
// the pass that completes the chunk's gradients.
void add_overlapped_reduces(Builder& b, BuiltStep& built, const StageFrame& sf, const ScheduleItem& it) {
  const auto& bk = sf.st->buckets[static_cast<std::size_t>(it.chunk)];
  for (std::size_t k = 0; k < bk.size(); ++k) {
    const auto id = add_transfer(b, sf.ds, TaskRole::dp_reduce, sf.r, it.chunk, b.name_dp,
                                 b.zero_if_free(bk[k].reduce).seconds(), b.spec.comm_sm_share,
                                 sf.st->dp_inter_node);
    b.g.add_dep(b.pieces[std::min(k, b.pieces.size() - 1)], id);
    built.dp_tasks[static_cast<std::size_t>(sf.r)].push_back(id);
  }
}

// Schedule item i of stage sf.r: its compute task in pieces (one per overlapped gather it
// waits for, or per DP bucket it completes), with its CP traffic, PP send and DP reductions.
void add_pass(Builder& b, BuiltStep& built, const StageFrame& sf, int i) {
  const StepSpec& spec = b.spec;
  TaskGraph& g = b.g;
  const StageSpec& st = *sf.st;
  const int r = sf.r;
  const auto& it = b.order[static_cast<std::size_t>(i)];
  const auto c = static_cast<std::size_t>(it.chunk);
  const PassTask pt = pass_task(b, sf, it, st.chunks.at(c));
  auto& fr = b.fr;
  fr.assign(1, 1.0);
  const bool first_forward = it.pass == StepPass::forward && i == sf.first_fwd_item[c];
  if (first_forward && !sf.gathers[c].empty()) {
    fr.assign(sf.gathers[c].size(), 1.0 / static_cast<double>(sf.gathers[c].size()));
  }
  const bool grads_done = i == sf.last_grad_item[c];
  if (grads_done && sf.has_dp && spec.overlap_grad_reduce) {
    fr.clear();
    for (const auto& bk : st.buckets[c]) fr.push_back(bk.params_fraction);
    if (fr.empty()) fr.push_back(1.0);
  }
  auto& compute_seq = b.compute_seq;
  // CP ring traffic that crosses nodes runs beside the pass on the NICs, released by what
  // releases the pass (the previous task on the compute stream here, the incoming PP
  // transfer below). Inside a node it stays on NVLink, priced at the layer level only.
  std::uint32_t cp_task = kNone;
  if (pt.cp_s > 0 && st.cp_inter_node && !spec.free_links) {
    // Its share of the SMs is already in the pass time.
    cp_task = add_transfer(b, sf.cps, TaskRole::cp_exchange, r, it.chunk, b.name_cp, pt.cp_s, 0, true,
                           it.micro_batch);
    if (!compute_seq.empty()) g.add_dep(compute_seq.back(), cp_task);
    built.cp_tasks[static_cast<std::size_t>(r)].push_back(cp_task);
  }
  auto& pieces = b.pieces;
  add_pieces(b, pt.task, pt.dur, fr, pieces);
  const std::uint32_t first = pieces.front();
  // Blocking PP: this task waits for the sends of the previous task.
  if (!compute_seq.empty()) g.add_dep(compute_seq.back(), first);
  compute_seq.push_back(pieces.back());
  if (first_forward) {
    const auto& ag = sf.gathers[c];
    for (std::size_t k = 0; k < ag.size() && k < pieces.size(); ++k) g.add_dep(ag[k], pieces[k]);
  }
  wire_pass(b, sf, it, first, cp_task);
  if (grads_done && sf.has_dp && spec.overlap_grad_reduce) add_overlapped_reduces(b, built, sf, it);
}

// Without overlap, a stage's DP reductions all follow its last compute task.
void add_trailing_reduces(Builder& b, BuiltStep& built, const StageFrame& sf, int v) {
  for (int c = 0; c < v; ++c) {
    for (const auto& bk : sf.st->buckets[static_cast<std::size_t>(c)]) {
      const auto id = add_transfer(b, sf.ds, TaskRole::dp_reduce, sf.r, c, b.name_dp,
                                   b.zero_if_free(bk.reduce).seconds(), b.spec.comm_sm_share,
                                   sf.st->dp_inter_node);
      if (!b.compute_seq.empty()) b.g.add_dep(b.compute_seq.back(), id);
      built.dp_tasks[static_cast<std::size_t>(sf.r)].push_back(id);
    }
  }
}

// Stage r's tasks in the order the replay numbers them: the overlapped gathers, then each
// pass of its schedule with what hangs off it, then the reductions left after the last pass.
void add_stage(Builder& b, BuiltStep& built, int r, int v, int m) {
  StageFrame sf = stage_frame(b, r, v, m);
  if (sf.has_dp && b.spec.overlap_param_gather) add_overlapped_gathers(b, sf, v);
  b.compute_seq.clear();
  for (int i = 0; i < static_cast<int>(b.order.size()); ++i) add_pass(b, built, sf, i);
  b.stage_last_compute[static_cast<std::size_t>(r)] = b.compute_seq.empty() ? kNone : b.compute_seq.back();
  if (sf.has_dp && !b.spec.overlap_grad_reduce) add_trailing_reduces(b, built, sf, v);
}

// Cross-stage edges: a forward needs the previous virtual stage's activation, a backward
// the next virtual stage's gradient.
void add_cross_stage_edges(Builder& b, int m) {
  TaskGraph& g = b.g;
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
}

// Blocking sends: the sender's next compute task waits for the send to finish.
void add_blocking_send_edges(Builder& b) {
  TaskGraph& g = b.g;
  // The task after each producer on the same compute stream: found through the stream order.
  std::vector<std::uint32_t> next_on_stream(g.tasks().size(), kNone);
  std::vector<std::uint32_t> last(static_cast<std::size_t>(b.p) * kStepStreams, kNone);
  for (std::uint32_t i = 0; i < g.tasks().size(); ++i) {
    const auto s = g.tasks()[i].stream;
    if (s == kNoStream || s % kStepStreams != kStreamCompute) continue;
    if (last[s] != kNone) next_on_stream[last[s]] = i;
    last[s] = i;
  }
  const std::size_t n_vm = b.send_fwd.size();
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
// the model-parallel group synchronises the ranks).
void add_optimizers(Builder& b, BuiltStep& built) {
  TaskGraph& g = b.g;
  const int p = b.p;
  auto& opt = built.opt;
  opt.assign(static_cast<std::size_t>(p), 0);
  for (int r = 0; r < p; ++r) {
    const StageSpec& st = b.spec.stages[static_cast<std::size_t>(r)];
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
      const auto lc = b.stage_last_compute[static_cast<std::size_t>(q)];
      if (lc != kNone) g.add_dep(lc, opt[static_cast<std::size_t>(r)]);
      for (auto d : built.dp_tasks[static_cast<std::size_t>(q)]) g.add_dep(d, opt[static_cast<std::size_t>(r)]);
    }
  }
}

// Without overlap, the parameter all-gathers follow the optimizer of their stage.
void add_late_gathers(Builder& b, BuiltStep& built, int v) {
  const StepSpec& spec = b.spec;
  for (int r = 0; r < b.p; ++r) {
    const StageSpec& st = spec.stages[static_cast<std::size_t>(r)];
    if (st.buckets.empty() || spec.overlap_param_gather) continue;
    for (int c = 0; c < v; ++c) {
      for (const auto& bk : st.buckets[static_cast<std::size_t>(c)]) {
        if (bk.gather.count_ps() <= 0) continue;
        const auto id = add_transfer(b, static_cast<std::uint32_t>(r) * kStepStreams + kStreamDp,
                                     TaskRole::param_gather, r, c, b.name_ag, b.zero_if_free(bk.gather).seconds(),
                                     spec.comm_sm_share, st.dp_inter_node);
        b.g.add_dep(built.opt[static_cast<std::size_t>(r)], id);
        built.late_gathers[static_cast<std::size_t>(r)].push_back(id);
      }
    }
  }
}

}  // namespace

// Task ids, and with them each stream's task order, follow the order of the calls below: keep
// it.
void detail::build_step_graph(const StepSpec& spec, TaskGraph& g, BuiltStep& built) {
  g.clear();
  const int p = std::max(spec.p, 1);
  const int v = std::max(spec.v, 1);
  const int m = std::max(spec.m, 1);
  Builder b(spec, g);
  b.p = p;
  b.V = p * v;
  start_step_graph(b, m);
  b.stage_last_compute.assign(static_cast<std::size_t>(p), kNone);
  built.dp_tasks.assign(static_cast<std::size_t>(p), {});
  built.cp_tasks.assign(static_cast<std::size_t>(p), {});
  built.late_gathers.assign(static_cast<std::size_t>(p), {});
  for (int r = 0; r < p; ++r) add_stage(b, built, r, v, m);
  add_cross_stage_edges(b, m);
  if (spec.pp_blocking) add_blocking_send_edges(b);
  add_optimizers(b, built);
  add_late_gathers(b, built, v);
}

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

}  // namespace tetra::sim
