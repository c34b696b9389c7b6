// Event queue and task-graph engine: integer picosecond time (gem5's Tick, ns-3's Time),
// (time, sequence) order with FIFO ties (ns-3, SimCpp20), shared links solved max-min fairly
// between events (SimGrid's LMM solver).

#include "tetra/sim/engine.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>

namespace tetra::sim {

Duration Duration::from_seconds(double seconds) {
  if (!(seconds == seconds) || seconds > kMaxSeconds || seconds < -kMaxSeconds) {
    throw std::range_error("simulated duration out of range: " + std::to_string(seconds) + " s");
  }
  return Duration(static_cast<std::int64_t>(std::llround(seconds * 1e12)));
}

// ---------------------------------------------------------------------------------------------
// EventQueue

namespace {
struct Later {
  template <class E>
  bool operator()(const E& a, const E& b) const noexcept {
    return a.when != b.when ? a.when > b.when : a.seq > b.seq;
  }
};
}  // namespace

void EventQueue::push_heap_entry(Entry e) {
  heap_.push_back(e);
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

EventQueue::Entry EventQueue::pop_heap_entry() {
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  const Entry e = heap_.back();
  heap_.pop_back();
  return e;
}

EventId EventQueue::push_slot(Time when, Slot slot) {
  if (when < now_) throw std::logic_error("event scheduled in the past");
  const std::uint64_t seq = next_seq_++;
  slots_.push_back(slot);
  push_heap_entry(Entry{when, seq});
  return EventId{seq};
}

EventId EventQueue::schedule_at(Time when, Handler h) {
  if (when < now_) throw std::logic_error("event scheduled in the past");
  // Handler slots are reused across clear(): assign in place where one exists already.
  const auto index = handler_count_++;
  if (index < handlers_.size()) {
    handlers_[index] = std::move(h);
  } else {
    handlers_.push_back(std::move(h));
  }
  return push_slot(when, Slot{nullptr, nullptr, static_cast<std::uint32_t>(index), 0});
}

EventId EventQueue::schedule_call_at(Time when, Callback fn, void* ctx, std::uint32_t arg) {
  return push_slot(when, Slot{fn, ctx, arg, 0});
}

void EventQueue::cancel(EventId id) {
  if (id.seq >= next_seq_ || slots_[id.seq].state != 0) return;
  slots_[id.seq].state = kCancelled;
  ++cancelled_live_;
}

bool EventQueue::step() {
  while (!heap_.empty()) {
    const Entry e = pop_heap_entry();
    Slot& slot = slots_[e.seq];
    const bool cancelled = (slot.state & kCancelled) != 0;
    slot.state |= kPopped;
    if (cancelled) {
      --cancelled_live_;
      continue;
    }
    now_ = e.when;
    ++executed_;
    if (slot.fn != nullptr) {
      const Slot call = slot;  // the call may schedule events, which can grow slots_
      call.fn(call.ctx, call.arg);
    } else {
      // Moved out first: the handler may schedule events, which can grow handlers_.
      Handler h = std::move(handlers_[slot.arg]);
      h();
    }
    return true;
  }
  return false;
}

void EventQueue::run() {
  while (step()) {
  }
}

void EventQueue::run_until(Time until) {
  while (!heap_.empty()) {
    // Drop tombstones at the head so the time test sees a live event.
    if ((slots_[heap_.front().seq].state & kCancelled) != 0) {
      const Entry e = pop_heap_entry();
      slots_[e.seq].state |= kPopped;
      --cancelled_live_;
      continue;
    }
    if (heap_.front().when > until) break;
    step();
  }
  if (now_ < until) now_ = until;
}

void EventQueue::clear() {
  heap_.clear();
  // handlers_ keeps its entries (and their storage) for the next run; pending ones are dropped.
  for (const Slot& slot : slots_) {
    if (slot.fn == nullptr && (slot.state & kPopped) == 0) handlers_[slot.arg] = nullptr;
  }
  slots_.clear();
  handler_count_ = 0;
  cancelled_live_ = 0;
  next_seq_ = 0;
  executed_ = 0;
  now_ = Time::zero();
}

// ---------------------------------------------------------------------------------------------
// TaskGraph

const char* to_string(TaskRole role) noexcept {
  switch (role) {
    case TaskRole::forward: return "F";
    case TaskRole::backward: return "B";
    case TaskRole::backward_input: return "B";
    case TaskRole::backward_weight: return "W";
    case TaskRole::send_forward: return "send-forward";
    case TaskRole::send_backward: return "send-backward";
    case TaskRole::dp_reduce: return "dp-reduce";
    case TaskRole::optimizer: return "optimizer";
    case TaskRole::param_gather: return "param-gather";
    case TaskRole::cp_exchange: return "cp-exchange";
    case TaskRole::op: return "op";
  }
  return "?";
}

std::uint32_t TaskGraph::add_stream(std::string name, std::int32_t group) {
  stream_names_.push_back(std::move(name));
  stream_groups_.push_back(group);
  return static_cast<std::uint32_t>(stream_names_.size() - 1);
}

std::uint32_t TaskGraph::add_link(std::string name, bool unbounded) {
  link_names_.push_back(std::move(name));
  link_unbounded_.push_back(unbounded ? 1 : 0);
  return static_cast<std::uint32_t>(link_names_.size() - 1);
}

std::uint32_t TaskGraph::intern(const std::string& name) {
  for (std::size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<std::uint32_t>(i);
  }
  names_.push_back(name);
  return static_cast<std::uint32_t>(names_.size() - 1);
}

std::uint32_t TaskGraph::add_task(const TaskSpec& spec, const std::vector<std::uint32_t>& links) {
  TaskSpec t = spec;
  t.link_first = static_cast<std::uint32_t>(links_.size());
  t.link_count = static_cast<std::uint32_t>(links.size());
  links_.insert(links_.end(), links.begin(), links.end());
  tasks_.push_back(t);
  return static_cast<std::uint32_t>(tasks_.size() - 1);
}

void TaskGraph::add_dep(std::uint32_t before, std::uint32_t after) {
  dep_from_.push_back(before);
  dep_to_.push_back(after);
}

void TaskGraph::clear() {
  tasks_.clear();
  links_.clear();
  dep_from_.clear();
  dep_to_.clear();
  names_.clear();
  stream_names_.clear();
  stream_groups_.clear();
  link_names_.clear();
  link_unbounded_.clear();
}

std::string TaskGraph::describe(std::uint32_t task) const {
  const TaskSpec& t = tasks_.at(task);
  std::ostringstream os;
  if (t.stage >= 0) os << "stage " << t.stage << ", ";
  if (t.micro_batch >= 0) os << "micro-batch " << t.micro_batch << ", ";
  if (t.chunk >= 0) os << "chunk " << t.chunk << ", ";
  os << "task " << (t.name < names_.size() ? names_[t.name] : std::string(to_string(t.role)));
  return os.str();
}

namespace {
struct CycleFound {
  std::size_t vertex;
};
struct BackEdgeVisitor : boost::default_dfs_visitor {
  template <class Edge, class Graph>
  void back_edge(Edge e, const Graph& g) const {
    throw CycleFound{boost::target(e, g)};
  }
};
}  // namespace

void TaskGraph::check_acyclic() const {
  using G = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  G g(tasks_.size());
  for (std::size_t i = 0; i < dep_from_.size(); ++i) boost::add_edge(dep_from_[i], dep_to_[i], g);
  // Stream order edges: consecutive tasks of one stream.
  std::vector<std::uint32_t> last(stream_names_.size(), kNoStream);
  for (std::uint32_t i = 0; i < tasks_.size(); ++i) {
    const auto s = tasks_[i].stream;
    if (s == kNoStream) continue;
    if (last[s] != kNoStream) boost::add_edge(last[s], i, g);
    last[s] = i;
  }
  try {
    boost::depth_first_search(g, boost::visitor(BackEdgeVisitor{}));
  } catch (const CycleFound& c) {
    throw GraphError("dependency cycle in the step's task graph at " +
                     describe(static_cast<std::uint32_t>(c.vertex)));
  }
}

// ---------------------------------------------------------------------------------------------
// Engine

void Engine::run(EventQueue& queue, const TaskGraph& graph, int pools, bool record_memory) {
  q_ = &queue;
  g_ = &graph;
  queue.clear();
  const auto& tasks = graph.tasks();
  const std::size_t n = tasks.size();
  // CSR successors.
  succ_first_.assign(n + 1, 0);
  for (auto f : graph.dep_from()) ++succ_first_[f + 1];
  for (std::size_t i = 0; i < n; ++i) succ_first_[i + 1] += succ_first_[i];
  succ_.assign(graph.num_deps(), 0);
  {
    std::vector<std::uint32_t> fill(succ_first_.begin(), succ_first_.end() - 1);
    for (std::size_t e = 0; e < graph.num_deps(); ++e) {
      succ_[fill[graph.dep_from()[e]]++] = graph.dep_to()[e];
    }
  }
  pending_deps_.assign(n, 0);
  for (auto t : graph.dep_to()) ++pending_deps_[t];
  dep_done_.assign(n, 0);
  // Streams in CSR form, in task order.
  const std::size_t ns = graph.stream_names().size();
  stream_first_.assign(ns + 1, 0);
  for (const auto& t : tasks) {
    if (t.stream != kNoStream) ++stream_first_[t.stream + 1];
  }
  for (std::size_t s = 0; s < ns; ++s) stream_first_[s + 1] += stream_first_[s];
  stream_tasks_.assign(stream_first_.back(), 0);
  {
    std::vector<std::uint32_t> fill(stream_first_.begin(), stream_first_.end() - 1);
    for (std::uint32_t i = 0; i < n; ++i) {
      if (tasks[i].stream != kNoStream) stream_tasks_[fill[tasks[i].stream]++] = i;
    }
  }
  stream_head_.assign(stream_first_.begin(), stream_first_.end() - 1);
  stream_busy_.assign(ns, 0);
  timing_.assign(n, TaskTiming{});
  pool_now_.assign(static_cast<std::size_t>(std::max(pools, 0)), 0.0);
  pool_peak_.assign(pool_now_.size(), 0.0);
  record_ = record_memory;
  pool_samples_.resize(record_ ? pool_now_.size() : 0);
  for (auto& v : pool_samples_) v.clear();
  done_ = 0;
  makespan_ = Time::zero();
  flow_tasks_.clear();
  flow_left_.clear();
  flow_rates_.clear();
  link_flows_.resize(graph.link_names().size());
  for (auto& v : link_flows_) v.clear();
  link_seen_.assign(graph.link_names().size(), 0);
  flow_seen_.assign(n, 0);
  flow_pos_.assign(n, 0);
  capacity_.assign(graph.link_names().size(), 1.0);
  for (std::size_t l = 0; l < capacity_.size(); ++l) {
    if (graph.link_unbounded()[l]) capacity_[l] = std::numeric_limits<double>::infinity();
  }
  flow_last_ = Time::zero();
  flow_event_live_ = false;
  std::int32_t groups = 0;
  for (const auto& t : tasks) groups = std::max(groups, t.sm_group + 1);
  sm_taken_.assign(static_cast<std::size_t>(groups), 0.0);
  sm_running_.resize(static_cast<std::size_t>(groups));
  for (auto& v : sm_running_) v.clear();

  for (std::uint32_t i = 0; i < n; ++i) {
    if (pending_deps_[i] == 0) start_ready(i);
  }
  queue.run();
  if (done_ != n) {
    graph.check_acyclic();
    // No cycle: report the first task (in stream order) that never started.
    for (std::uint32_t s = 0; s < ns; ++s) {
      if (stream_head_[s] < stream_first_[s + 1]) {
        throw GraphError("task can never start: " + graph.describe(stream_tasks_[stream_head_[s]]));
      }
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!dep_done_[i]) throw GraphError("task can never start: " + graph.describe(i));
    }
    throw GraphError("step did not complete");
  }
}

void Engine::on_finish(void* e, std::uint32_t task) { static_cast<Engine*>(e)->finish(task); }
void Engine::on_compute_done(void* e, std::uint32_t task) { static_cast<Engine*>(e)->compute_done(task); }
void Engine::on_flow_join(void* e, std::uint32_t task) { static_cast<Engine*>(e)->flow_join(task); }
void Engine::on_flows_complete(void* e, std::uint32_t) { static_cast<Engine*>(e)->flows_complete(); }

void Engine::start_ready(std::uint32_t task) {
  dep_done_[task] = 1;
  timing_[task].ready = q_->now();
  const auto s = g_->tasks()[task].stream;
  if (s == kNoStream) {
    begin(task);
  } else {
    try_stream(s);
  }
}

void Engine::try_stream(std::uint32_t s) {
  if (stream_busy_[s]) return;
  const auto h = stream_head_[s];
  if (h >= stream_first_[s + 1]) return;
  const auto task = stream_tasks_[h];
  if (!dep_done_[task]) return;
  stream_busy_[s] = 1;
  begin(task);
}

void Engine::begin(std::uint32_t task) {
  const TaskSpec& t = g_->tasks()[task];
  timing_[task].start = q_->now();
  if (t.pool >= 0 && t.alloc_bytes != 0) {
    auto p = static_cast<std::size_t>(t.pool);
    pool_now_[p] += t.alloc_bytes;
    pool_peak_[p] = std::max(pool_peak_[p], pool_now_[p]);
    if (record_) pool_samples_[p].push_back({q_->now(), pool_now_[p]});
  }
  const bool transfer = t.link_count != 0 && t.work_s > 0;
  if (t.sm_group >= 0 && t.sm_share > 0) sm_change(t.sm_group, t.sm_share);
  if (!transfer && t.sm_group >= 0 && t.sm_share <= 0 && t.duration.count_ps() > 0) {
    // Compute sharing its GPU with communication kernels: rate 1 − taken.
    const auto g = static_cast<std::size_t>(t.sm_group);
    const double rate = std::max(0.05, 1.0 - sm_taken_[g]);
    const double left = t.duration.seconds();
    const EventId done = q_->schedule_call_in(
        rate >= 1.0 ? t.duration : Duration::from_seconds(left / rate), &Engine::on_compute_done,
        this, task);
    sm_running_[g].push_back(Running{task, left, rate, q_->now(), done});
    return;
  }
  if (!transfer) {
    q_->schedule_call_in(t.duration, &Engine::on_finish, this, task);
  } else {
    q_->schedule_call_in(t.duration, &Engine::on_flow_join, this, task);
  }
}

void Engine::compute_done(std::uint32_t task) {
  auto& v = sm_running_[static_cast<std::size_t>(g_->tasks()[task].sm_group)];
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i].task == task) {
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  finish(task);
}

void Engine::sm_change(std::int32_t group, double delta) {
  const auto g = static_cast<std::size_t>(group);
  sm_taken_[g] += delta;
  if (sm_taken_[g] < 1e-12) sm_taken_[g] = 0;
  const double rate = std::max(0.05, 1.0 - sm_taken_[g]);
  for (auto& r : sm_running_[g]) {
    if (r.rate == rate) continue;
    r.left_s -= r.rate * (q_->now() - r.since).seconds();
    r.left_s = std::max(r.left_s, 0.0);
    r.since = q_->now();
    r.rate = rate;
    q_->cancel(r.done);
    const auto task = r.task;
    r.done = q_->schedule_call_in(Duration::from_seconds(r.left_s / rate), &Engine::on_compute_done, this, task);
  }
}

void Engine::finish(std::uint32_t task) {
  const TaskSpec& t = g_->tasks()[task];
  timing_[task].end = q_->now();
  makespan_ = std::max(makespan_, q_->now());
  ++done_;
  if (t.sm_group >= 0 && t.sm_share > 0) sm_change(t.sm_group, -t.sm_share);
  if (t.pool >= 0 && t.free_bytes != 0) {
    auto p = static_cast<std::size_t>(t.pool);
    pool_now_[p] -= t.free_bytes;
    if (record_) pool_samples_[p].push_back({q_->now(), pool_now_[p]});
  }
  if (t.stream != kNoStream) {
    stream_busy_[t.stream] = 0;
    ++stream_head_[t.stream];
  }
  for (auto k = succ_first_[task]; k < succ_first_[task + 1]; ++k) {
    const auto next = succ_[k];
    if (--pending_deps_[next] == 0) start_ready(next);
  }
  if (t.stream != kNoStream) try_stream(t.stream);
}

// Flows: remaining work in seconds at full rate; rates from the max-min solver.

void Engine::flows_advance() {
  const double dt = (q_->now() - flow_last_).seconds();
  if (dt > 0) {
    for (std::size_t i = 0; i < flow_tasks_.size(); ++i) flow_left_[i] -= flow_rates_[i] * dt;
  }
  flow_last_ = q_->now();
}

void Engine::flow_join(std::uint32_t task) {
  flows_advance();
  flow_pos_[task] = static_cast<std::uint32_t>(flow_tasks_.size());
  flow_tasks_.push_back(task);
  const TaskSpec& t = g_->tasks()[task];
  flow_left_.push_back(t.work_s);
  flow_rates_.push_back(0.0);
  const auto& links = g_->task_links();
  seed_links_.clear();
  for (std::uint32_t k = 0; k < t.link_count; ++k) {
    const auto l = links[t.link_first + k];
    link_flows_[l].push_back(task);
    seed_links_.push_back(l);
  }
  flows_update();
}

void Engine::flows_solve_component() {
  // The flows reachable from the seed links through shared links, in join order.
  const auto& links = g_->task_links();
  comp_links_.clear();
  comp_flows_.clear();
  for (const auto l : seed_links_) {
    if (!link_seen_[l]) {
      link_seen_[l] = 1;
      comp_links_.push_back(l);
    }
  }
  for (std::size_t i = 0; i < comp_links_.size(); ++i) {
    for (const auto task : link_flows_[comp_links_[i]]) {
      if (flow_seen_[task]) continue;
      flow_seen_[task] = 1;
      comp_flows_.push_back(flow_pos_[task]);
      const TaskSpec& t = g_->tasks()[task];
      for (std::uint32_t k = 0; k < t.link_count; ++k) {
        const auto l = links[t.link_first + k];
        if (!link_seen_[l]) {
          link_seen_[l] = 1;
          comp_links_.push_back(l);
        }
      }
    }
  }
  for (const auto l : comp_links_) link_seen_[l] = 0;
  for (const auto pos : comp_flows_) flow_seen_[flow_tasks_[pos]] = 0;
  if (comp_flows_.empty()) return;
  if (comp_flows_.size() == 1) {
    // Alone on its links: the slowest link's capacity (what progressive filling gives).
    const TaskSpec& t = g_->tasks()[flow_tasks_[comp_flows_[0]]];
    double rate = std::numeric_limits<double>::infinity();
    for (std::uint32_t k = 0; k < t.link_count; ++k) rate = std::min(rate, capacity_[links[t.link_first + k]]);
    flow_rates_[comp_flows_[0]] = rate;
    return;
  }
  std::sort(comp_flows_.begin(), comp_flows_.end());
  flow_specs_.resize(comp_flows_.size());
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) {
    const TaskSpec& t = g_->tasks()[flow_tasks_[comp_flows_[i]]];
    auto& r = flow_specs_[i].resources;
    r.assign(links.begin() + t.link_first, links.begin() + t.link_first + t.link_count);
    flow_specs_[i].bound = -1;
  }
  costmodel::max_min_rates(capacity_, std::span<const costmodel::MaxMinFlow>(flow_specs_.data(), comp_flows_.size()),
                           comp_rates_, mm_);
  for (std::size_t i = 0; i < comp_flows_.size(); ++i) flow_rates_[comp_flows_[i]] = comp_rates_[i];
}

void Engine::flows_update() {
  // Re-solve the rates of the flows connected to the seed links and schedule the next
  // completion.
  flows_solve_component();
  if (flow_event_live_) {
    q_->cancel(flow_event_);
    flow_event_live_ = false;
  }
  if (flow_tasks_.empty()) return;
  double soonest = std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < flow_tasks_.size(); ++i) {
    const double r = flow_rates_[i];
    const double left = std::max(flow_left_[i], 0.0);
    const double t = (r == std::numeric_limits<double>::infinity()) ? 0.0
                     : (r > 0 ? left / r : std::numeric_limits<double>::infinity());
    soonest = std::min(soonest, t);
  }
  if (soonest == std::numeric_limits<double>::infinity()) {
    throw GraphError("transfer can never finish: " + g_->describe(flow_tasks_.front()));
  }
  flow_event_ = q_->schedule_call_in(Duration::from_seconds(soonest), &Engine::on_flows_complete, this, 0);
  flow_event_live_ = true;
}

void Engine::flows_complete() {
  flow_event_live_ = false;
  flows_advance();
  // Every flow whose remaining work is within rounding of zero completes now, in join order.
  std::size_t keep = 0;
  finished_.clear();
  seed_links_.clear();
  const auto& links = g_->task_links();
  for (std::size_t i = 0; i < flow_tasks_.size(); ++i) {
    const double r = flow_rates_[i];
    const bool fin = r == std::numeric_limits<double>::infinity() ||
                     flow_left_[i] <= 1e-12 * std::max(1.0, r) + 1e-15;
    const auto task = flow_tasks_[i];
    if (fin) {
      finished_.push_back(task);
      const TaskSpec& t = g_->tasks()[task];
      for (std::uint32_t k = 0; k < t.link_count; ++k) {
        const auto l = links[t.link_first + k];
        auto& on = link_flows_[l];
        on.erase(std::find(on.begin(), on.end(), task));
        seed_links_.push_back(l);
      }
    } else {
      flow_tasks_[keep] = task;
      flow_left_[keep] = flow_left_[i];
      flow_rates_[keep] = flow_rates_[i];
      flow_pos_[task] = static_cast<std::uint32_t>(keep);
      ++keep;
    }
  }
  flow_tasks_.resize(keep);
  flow_left_.resize(keep);
  flow_rates_.resize(keep);
  flows_update();
  // finish() may start transfers that re-enter the flow code: iterate over a copy.
  done_batch_.assign(finished_.begin(), finished_.end());
  for (auto task : done_batch_) finish(task);
}

}  // namespace tetra::sim
