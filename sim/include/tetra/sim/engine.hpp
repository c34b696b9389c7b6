#pragma once
/// The discrete-event engine: an explicitly passed event queue with a total, deterministic
/// order ((time, sequence) with FIFO ties, as ns-3 and SimCpp20), and a task-graph runner on
/// top of it that both levels of the simulator use (docs/architecture.md, "Data flow" step 4):
/// tasks on FIFO streams (a CUDA stream's order), data dependencies between tasks, and
/// transfers whose concurrent flows share link bandwidth max-min fairly, solved analytically
/// between events (as SimGrid's LMM solver; costmodel/maxmin.hpp).

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tetra/costmodel/maxmin.hpp"
#include "tetra/sim/time.hpp"

namespace tetra::sim {

/// A scheduled callback. Captures should stay within 16 bytes and be trivially copyable
/// (e.g. `[this, id]`) so that std::function stores them without allocating.
using Handler = std::function<void()>;

/// A plain scheduled call, `fn(ctx, arg)`: no type erasure, nothing to construct or move
/// (the engine's own events).
using Callback = void (*)(void* ctx, std::uint32_t arg);

/// Handle of a scheduled event, for cancellation.
struct EventId {
  std::uint64_t seq = 0;
};

/// Binary heap keyed by (time, insertion sequence): events at equal times run in the order
/// they were scheduled (ns-3 / SimCpp20 FIFO ties). Cancellation is lazy (a tombstone is
/// skipped when popped). No global state: components receive an EventQueue& when wired.
class EventQueue {
 public:
  /// Schedules `h` at absolute time `when` (must not be before now()).
  EventId schedule_at(Time when, Handler h);
  /// Schedules `h` after `delay` (≥ 0) from now().
  EventId schedule_in(Duration delay, Handler h) { return schedule_at(now_ + delay, std::move(h)); }
  /// Schedules the plain call `fn(ctx, arg)` at `when` (same order rules as a Handler).
  EventId schedule_call_at(Time when, Callback fn, void* ctx, std::uint32_t arg);
  /// Schedules `fn(ctx, arg)` after `delay` (≥ 0) from now().
  EventId schedule_call_in(Duration delay, Callback fn, void* ctx, std::uint32_t arg) {
    return schedule_call_at(now_ + delay, fn, ctx, arg);
  }
  /// Marks an event as cancelled; it is dropped when it reaches the head. Cancelling an event
  /// that already ran is a no-op.
  void cancel(EventId id);
  /// Runs the next live event; false when none is left.
  bool step();
  /// Runs events until none is left.
  void run();
  /// Runs events with time ≤ `until`; now() ends at `until` if events remain beyond it.
  void run_until(Time until);
  [[nodiscard]] Time now() const noexcept { return now_; }
  /// Live events executed since construction or the last clear().
  [[nodiscard]] std::uint64_t executed() const noexcept { return executed_; }
  [[nodiscard]] bool empty() const noexcept { return heap_.size() == cancelled_live_; }
  /// Drops every pending event, resets time and the executed count to zero (keeps capacity).
  void clear();

 private:
  /// Heap entries are plain (time, sequence) pairs, cheap to sift; the handlers live in a
  /// slot array indexed by sequence so that a push or pop moves no std::function.
  struct Entry {
    Time when;
    std::uint64_t seq;
  };
  /// What an event runs, by seq: `fn(ctx, arg)`, or handlers_[arg] when fn is null.
  struct Slot {
    Callback fn;
    void* ctx;
    std::uint32_t arg;
    std::uint8_t state;  // kCancelled, kPopped (cancel after run: no-op)
  };
  static constexpr std::uint8_t kCancelled = 1;
  static constexpr std::uint8_t kPopped = 2;
  void push_heap_entry(Entry e);
  Entry pop_heap_entry();
  EventId push_slot(Time when, Slot slot);
  std::vector<Entry> heap_;
  std::vector<Slot> slots_;        // by seq
  std::vector<Handler> handlers_;  // type-erased handlers; the first handler_count_ are used
  std::size_t handler_count_ = 0;
  std::size_t cancelled_live_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t executed_ = 0;
  Time now_ = Time::zero();
};

/// What a task of the graph is, for labels, error messages and traces.
enum class TaskRole : std::uint8_t {
  forward,         ///< F: forward of one micro-batch through one model chunk
  backward,        ///< B: full backward (input and weight gradients)
  backward_input,  ///< B of a split backward (input gradient only)
  backward_weight, ///< W of a split backward (weight gradient)
  send_forward,    ///< PP activation transfer to the next stage
  send_backward,   ///< PP gradient transfer to the previous stage
  dp_reduce,       ///< DP gradient bucket reduce-scatter / all-reduce
  optimizer,       ///< optimizer step
  param_gather,    ///< DP parameter all-gather
  cp_exchange,     ///< CP ring traffic of one pass of a chunk on the stage's links
  op,              ///< one op of the layer-level DAG
};

[[nodiscard]] const char* to_string(TaskRole role) noexcept;

/// No stream: a transfer that starts as soon as its dependencies are done.
inline constexpr std::uint32_t kNoStream = 0xffffffffu;

/// One task of a graph. A compute task occupies its stream for `duration`. A transfer
/// (`links` non-empty) first waits `duration` (its latency), then moves `work_s` seconds'
/// worth of data at full rate over every link it crosses; concurrent transfers on a link
/// share it max-min fairly. Memory: `alloc_bytes` is added to pool `pool` when the task
/// starts, `free_bytes` removed when it ends.
struct TaskSpec {
  std::uint32_t stream = kNoStream;
  TaskRole role = TaskRole::op;
  Duration duration;
  double work_s = 0;                 ///< transfer only: seconds at full link rate
  std::uint32_t link_first = 0;      ///< range into TaskGraph::task_links()
  std::uint32_t link_count = 0;
  std::int32_t stage = -1;           ///< pipeline rank (labels, traces)
  std::int32_t micro_batch = -1;
  std::int32_t chunk = -1;
  std::uint32_t name = 0;            ///< index into TaskGraph::names()
  std::int32_t pool = -1;            ///< memory pool (one per stage), -1 none
  double alloc_bytes = 0;
  double free_bytes = 0;
  /// SM sharing on one GPU (`sm_group`, -1 none): a communication task occupies `sm_share` of
  /// the GPU's SMs while it runs (NCCL runs one thread block per channel); a compute task
  /// with `sm_group` set is slowed to rate 1 − Σ shares of the communication running beside
  /// it. A compute task is one whose `sm_share` is 0 and that is not a transfer.
  std::int32_t sm_group = -1;
  double sm_share = 0;
};

/// Error in a task graph: a dependency cycle, or a task that can never start. The message
/// names the stage, micro-batch and task (a schedule bug, not a user error).
class GraphError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// A static DAG of tasks over streams and links, built once, then run by Engine.
/// Tasks on one stream run in the order they were added (add_task order).
class TaskGraph {
 public:
  /// A FIFO stream; `group` is the process it belongs to in a trace (the stage).
  std::uint32_t add_stream(std::string name, std::int32_t group);
  /// A shared link of capacity 1.0 ("full rate"); `unbounded` makes transfers over it free.
  std::uint32_t add_link(std::string name, bool unbounded = false);
  /// Interns a task name.
  std::uint32_t intern(const std::string& name);
  /// Adds a task; `links` are the links a transfer crosses. Returns its id.
  std::uint32_t add_task(const TaskSpec& spec, const std::vector<std::uint32_t>& links = {});
  /// `after` starts only once `before` has ended.
  void add_dep(std::uint32_t before, std::uint32_t after);
  /// Removes every task, dependency, stream and link (keeps capacity).
  void clear();

  /// Throws GraphError naming a task on a cycle of (dependency + stream order) edges.
  /// Uses Boost.Graph (depth-first search for a back edge).
  void check_acyclic() const;
  /// "stage 2, micro-batch 3, chunk 0, task B" — for errors.
  [[nodiscard]] std::string describe(std::uint32_t task) const;

  [[nodiscard]] const std::vector<TaskSpec>& tasks() const noexcept { return tasks_; }
  [[nodiscard]] const std::vector<std::uint32_t>& task_links() const noexcept { return links_; }
  [[nodiscard]] const std::vector<std::string>& names() const noexcept { return names_; }
  [[nodiscard]] const std::vector<std::string>& stream_names() const noexcept {
    return stream_names_;
  }
  [[nodiscard]] const std::vector<std::int32_t>& stream_groups() const noexcept {
    return stream_groups_;
  }
  [[nodiscard]] const std::vector<std::string>& link_names() const noexcept { return link_names_; }
  [[nodiscard]] const std::vector<char>& link_unbounded() const noexcept { return link_unbounded_; }
  /// Successor lists in CSR form (built lazily by Engine).
  [[nodiscard]] std::size_t num_deps() const noexcept { return dep_from_.size(); }
  [[nodiscard]] const std::vector<std::uint32_t>& dep_from() const noexcept { return dep_from_; }
  [[nodiscard]] const std::vector<std::uint32_t>& dep_to() const noexcept { return dep_to_; }

 private:
  std::vector<TaskSpec> tasks_;
  std::vector<std::uint32_t> links_;
  std::vector<std::uint32_t> dep_from_, dep_to_;
  std::vector<std::string> names_;
  std::vector<std::string> stream_names_;
  std::vector<std::int32_t> stream_groups_;
  std::vector<std::string> link_names_;
  std::vector<char> link_unbounded_;
};

/// When a task ran. `ready` is when its dependencies were all done (≤ start).
struct TaskTiming {
  Time ready;
  Time start;
  Time end;
};

/// One sample of a memory pool's timeline: the pool holds `bytes` from `time` on.
struct MemorySample {
  Time time;
  double bytes = 0;
};

/// Runs a TaskGraph on an EventQueue. Reusable: run() resets its state, and its buffers
/// keep their capacity between runs (no allocation storms when a search runs many graphs).
class Engine {
 public:
  /// Runs `graph` to completion from time zero. `pools` memory pools are tracked (peaks);
  /// with `record_memory` every change is kept as a sample (for traces).
  /// Throws GraphError when a task can never start (after checking for cycles).
  void run(EventQueue& queue, const TaskGraph& graph, int pools = 0, bool record_memory = false);

  [[nodiscard]] const std::vector<TaskTiming>& timings() const noexcept { return timing_; }
  [[nodiscard]] const std::vector<double>& pool_peak_bytes() const noexcept { return pool_peak_; }
  [[nodiscard]] const std::vector<std::vector<MemorySample>>& pool_samples() const noexcept {
    return pool_samples_;
  }
  /// Time the last task ended.
  [[nodiscard]] Time makespan() const noexcept { return makespan_; }

 private:
  void start_ready(std::uint32_t task);
  void try_stream(std::uint32_t stream);
  void begin(std::uint32_t task);
  void finish(std::uint32_t task);
  void flow_join(std::uint32_t task);
  void flows_update();
  void flows_solve_component();
  void flows_advance();
  void flows_complete();
  void sm_change(std::int32_t group, double delta);
  void compute_done(std::uint32_t task);
  // Event trampolines (EventQueue::Callback): ctx is the Engine.
  static void on_finish(void* e, std::uint32_t task);
  static void on_compute_done(void* e, std::uint32_t task);
  static void on_flow_join(void* e, std::uint32_t task);
  static void on_flows_complete(void* e, std::uint32_t unused);

  EventQueue* q_ = nullptr;
  const TaskGraph* g_ = nullptr;
  std::vector<std::uint32_t> succ_first_, succ_;  // CSR successors
  std::vector<std::uint32_t> pending_deps_;
  std::vector<char> dep_done_;                     // all deps done
  std::vector<std::uint32_t> stream_first_, stream_tasks_, stream_head_;
  std::vector<char> stream_busy_;
  std::vector<TaskTiming> timing_;
  std::vector<double> pool_now_, pool_peak_;
  std::vector<std::vector<MemorySample>> pool_samples_;
  bool record_ = false;
  std::size_t done_ = 0;
  Time makespan_;
  // flows
  std::vector<std::uint32_t> flow_tasks_;
  std::vector<double> flow_left_;
  std::vector<costmodel::MaxMinFlow> flow_specs_;  // the sub-problem being solved
  std::vector<double> flow_rates_;
  std::vector<double> capacity_;
  costmodel::MaxMinWorkspace mm_;
  // Incremental re-solve: only the flows sharing a link, directly or through other flows,
  // with a joining or leaving flow can change rate (max-min fairness splits into the
  // connected components of the flow-link graph).
  std::vector<std::vector<std::uint32_t>> link_flows_;  // per link: active flow tasks, join order
  std::vector<std::uint32_t> flow_pos_;                 // per task: index in flow_tasks_
  std::vector<char> link_seen_, flow_seen_;
  std::vector<std::uint32_t> seed_links_, comp_links_, comp_flows_;
  std::vector<double> comp_rates_;
  std::vector<std::uint32_t> finished_, done_batch_;
  Time flow_last_;
  EventId flow_event_{};
  bool flow_event_live_ = false;
  // SM sharing: per group the share taken by running communication, and the running
  // compute tasks whose rate depends on it.
  struct Running {
    std::uint32_t task;
    double left_s;   // work left at `since`, seconds at full rate
    double rate;
    Time since;
    EventId done;
  };
  std::vector<double> sm_taken_;
  std::vector<std::vector<Running>> sm_running_;
};

}  // namespace tetra::sim
