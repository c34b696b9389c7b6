// Chrome trace JSON (the Trace Event Format that chrome://tracing and Perfetto open), written
// event by event: one process per pipeline stage, one thread per stream, "X" complete events
// in µs, and a "C" counter track of the stage's memory. The aggregated detail folds each
// stage's steady state into one slice per (thread, kind, name) (trace.hpp).

#include "tetra/sim/trace.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "tetra/base/units.hpp"
#include "tetra/sim/simulator.hpp"

namespace tetra::sim {

const char* to_string(TraceDetail detail) noexcept {
  switch (detail) {
    case TraceDetail::full: return "full";
    case TraceDetail::aggregated: return "aggregated";
    case TraceDetail::automatic: return "auto";
  }
  return "?";
}

std::optional<TraceDetail> parse_trace_detail(std::string_view word) noexcept {
  for (TraceDetail d : {TraceDetail::full, TraceDetail::aggregated, TraceDetail::automatic}) {
    if (word == to_string(d)) return d;
  }
  return std::nullopt;
}

namespace {

constexpr int kTidCompute = 1, kTidTp = 2, kTidCp = 3, kTidPp = 4, kTidDp = 5, kTidCpLinks = 6, kTidEp = 7;
constexpr std::size_t kMaxCommSlices = 2000000;  // beyond this, per-layer TP/CP/EP slices are dropped
/// Mean bytes of one event of a full trace (123 on the 768-micro-batch 405B trace of docs/cli.md),
/// for the size estimate of TraceDetail::automatic.
constexpr std::size_t kBytesPerEvent = 125;

/// A stage's threads in the order viewers list them (thread_sort_index).
struct Thread {
  int tid;
  const char* name;
};
constexpr Thread kThreads[] = {{kTidCompute, "compute"}, {kTidTp, "tp comm"}, {kTidCp, "cp comm"},
                               {kTidEp, "ep comm"},      {kTidPp, "pp send"}, {kTidDp, "dp comm"},
                               {kTidCpLinks, "cp traffic"}};

double us(Time t) { return static_cast<double>(t.count_ps()) * 1e-6; }

/// What a trace is written from: the last recorded run of a Simulator.
struct Source {
  const TaskGraph& graph;
  const std::vector<TaskTiming>& timings;
  const LayerTimes& dense;
  const LayerTimes& moe;
  const LayerTimes& embedding;
  const LayerTimes& head;
  const std::vector<std::string>& blocks;  ///< per virtual stage (Simulator::trace_blocks_)
  int p;
  const std::vector<std::vector<MemorySample>>& samples;
  const std::vector<costmodel::StageMemory>& memory;
};

/// One "X" slice. A pass's per-layer communication has `block` set: "layer" (numbered by
/// `layer`), "embedding" or "head".
struct Slice {
  std::string_view name;
  const char* cat = "";
  double ts = 0, dur = 0;  // µs
  int pid = 0, tid = 0;
  int micro_batch = -1, chunk = -1, layer = -1;
  const char* block = nullptr;
};

/// What a steady-state slice of an aggregated trace stands for.
struct Folded {
  std::uint64_t slices = 0;
  int micro_batch_first = -1, micro_batch_last = -1;
  double min_dur = 0, max_dur = 0;
};

/// Trace events as JSON text, each written to the stream as it comes.
class EventWriter {
 public:
  explicit EventWriter(std::ostream& out) : out_(out) { out_ << "{\"traceEvents\":[\n"; }
  void finish() { out_ << "\n],\"displayTimeUnit\":\"ms\"}\n"; }

  /// A "M" event: `what` (process_name, thread_sort_index, ...) with args {key: text or number}.
  void metadata(int pid, int tid, const char* what, const char* key, std::string_view text, int number) {
    begin();
    b_ += "{\"name\":";
    str(what);
    b_ += ",\"ph\":\"M\",\"pid\":";
    num(pid);
    b_ += ",\"tid\":";
    num(tid);
    b_ += ",\"args\":{";
    str(key);
    b_ += ':';
    if (text.empty()) {
      num(number);
    } else {
      str(text);
    }
    b_ += "}}";
    end();
  }

  void slice(const Slice& s, const Folded* folded = nullptr) {
    begin();
    b_ += "{\"name\":";
    str(s.name);
    b_ += ",\"cat\":";
    str(s.cat);
    b_ += ",\"ph\":\"X\",\"ts\":";
    num(s.ts);
    b_ += ",\"dur\":";
    num(s.dur);
    b_ += ",\"pid\":";
    num(s.pid);
    b_ += ",\"tid\":";
    num(s.tid);
    b_ += ",\"args\":{";
    if (folded != nullptr) {
      args_folded(*folded);
    } else if (s.block != nullptr) {
      b_ += s.layer >= 0 ? "\"layer\":" : "\"block\":";
      s.layer >= 0 ? num(s.layer) : str(s.block);
    } else {
      const char* sep = "";
      if (s.micro_batch >= 0) {
        b_ += "\"micro_batch\":";
        num(s.micro_batch);
        sep = ",";
      }
      if (s.chunk >= 0) {
        b_ += sep;
        b_ += "\"chunk\":";
        num(s.chunk);
      }
    }
    b_ += "}}";
    end();
  }

  void counter(int pid, double ts, double gib) {
    begin();
    b_ += "{\"name\":\"memory\",\"ph\":\"C\",\"ts\":";
    num(ts);
    b_ += ",\"pid\":";
    num(pid);
    b_ += ",\"args\":{\"GiB\":";
    num(gib);
    b_ += "}}";
    end();
  }

 private:
  void begin() { b_.assign(first_ ? "" : ",\n"); }
  void end() {
    out_.write(b_.data(), static_cast<std::streamsize>(b_.size()));
    first_ = false;
  }
  void args_folded(const Folded& f) {
    b_ += "\"aggregated_slices\":";
    num(f.slices);
    if (f.micro_batch_first >= 0) {
      b_ += ",\"micro_batch_first\":";
      num(f.micro_batch_first);
      b_ += ",\"micro_batch_last\":";
      num(f.micro_batch_last);
    }
    b_ += ",\"min_dur_us\":";
    num(f.min_dur);
    b_ += ",\"max_dur_us\":";
    num(f.max_dur);
  }
  template <class T>
  void num(T x) {
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, x);  // shortest round-trip form
    b_.append(buf, r.ptr);
  }
  void str(std::string_view s) {
    b_ += '"';
    for (const char c : s) {
      if (c == '"' || c == '\\') {
        b_ += '\\';
        b_ += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char esc[8];
        std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
        b_ += esc;
      } else {
        b_ += c;
      }
    }
    b_ += '"';
  }

  std::ostream& out_;
  std::string b_;  // the event being written
  bool first_ = true;
};

const PassTime* pass_of(const LayerTimes& lt, TaskRole role) {
  switch (role) {
    case TaskRole::forward: return &lt.forward;
    case TaskRole::backward: return &lt.backward;
    case TaskRole::backward_input: return &lt.backward_input;
    case TaskRole::backward_weight: return &lt.backward_weight;
    default: return nullptr;
  }
}

const LayerTimes& block_times(const Source& src, char block) {
  switch (block) {
    case 'e': return src.embedding;
    case 'h': return src.head;
    case 'm': return src.moe;
    default: return src.dense;
  }
}

/// Calls sink(slice) for the TP / CP / EP communication of compute task `t` (starting at
/// `start` µs): each block of its chunk in pass order (forward as Simulator::trace_blocks_,
/// backward reversed) repeats its recorded pattern from where the block begins. At most
/// `budget` slices; returns how many.
template <class Sink>
std::size_t pass_comm(const Source& src, const TaskSpec& t, double start, std::size_t budget, Sink&& sink) {
  const auto vs = static_cast<std::size_t>(t.chunk * src.p + t.stage);
  if (vs >= src.blocks.size()) return 0;
  const std::string& blocks = src.blocks[vs];
  const bool reverse = t.role != TaskRole::forward;
  const auto layer_blocks = static_cast<int>(std::count_if(blocks.begin(), blocks.end(), [](char b) { return b == 'd' || b == 'm'; }));
  int layer = reverse ? layer_blocks : -1;
  double base = start;
  std::size_t n = 0;
  for (std::size_t k = 0; k < blocks.size(); ++k) {
    const char b = blocks[reverse ? blocks.size() - 1 - k : k];
    const bool is_layer = b == 'd' || b == 'm';
    if (is_layer) layer += reverse ? -1 : 1;
    const PassTime* pt = pass_of(block_times(src, b), t.role);
    if (pt == nullptr) return n;
    for (const CommInterval& c : pt->comm) {
      if (c.axis != CommAxis::tp && c.axis != CommAxis::cp && c.axis != CommAxis::ep) continue;
      if (n == budget) return n;
      Slice s;
      s.name = c.name;
      s.cat = c.axis == CommAxis::tp ? "tp" : c.axis == CommAxis::cp ? "cp" : "ep";
      s.tid = c.axis == CommAxis::tp ? kTidTp : c.axis == CommAxis::cp ? kTidCp : kTidEp;
      s.ts = base + c.start_s * 1e6;
      s.dur = (c.end_s - c.start_s) * 1e6;
      s.pid = t.stage;
      s.micro_batch = t.micro_batch;
      s.chunk = t.chunk;
      s.layer = is_layer ? layer : -1;
      s.block = is_layer ? "layer" : b == 'e' ? "embedding" : "head";
      sink(s);
      ++n;
    }
    base += pt->seconds * 1e6;
  }
  return n;
}

/// Whether task i is the first piece of its pass (a pass split around parameter gathers
/// restarts its pattern only on the first).
bool first_piece(const std::vector<TaskSpec>& tasks, std::uint32_t i) {
  const TaskSpec& t = tasks[i];
  const TaskSpec* prev = i == 0 ? nullptr : &tasks[i - 1];
  return prev == nullptr || prev->stream != t.stream || prev->role != t.role ||
         prev->micro_batch != t.micro_batch || prev->chunk != t.chunk;
}

/// A stage's steady state in an aggregated trace: the compute tasks after its last one of the
/// first kTraceKeptMicroBatches micro-batches and before its first one of the last, and the
/// time they span. Other streams' slices inside that span belong to it.
struct Steady {
  bool any = false;
  std::uint32_t after = 0, before = 0;  // task indexes; compute tasks strictly between
  Time start, end;
  [[nodiscard]] bool holds(std::uint32_t task, bool compute, const TaskTiming& tm) const {
    if (!any) return false;
    return compute ? task > after && task < before : tm.start >= start && tm.end <= end;
  }
};

std::vector<Steady> steady_states(const Source& src) {
  const auto& tasks = src.graph.tasks();
  int m = 0;  // micro-batches replayed (an extrapolated step replays fewer than it has)
  for (const TaskSpec& t : tasks) m = std::max(m, t.micro_batch + 1);
  std::vector<Steady> out(static_cast<std::size_t>(src.p));
  std::vector<char> head(out.size(), 0), tail(out.size(), 0);
  auto compute_of = [&](const TaskSpec& t) {
    return t.stream != kNoStream && t.stream % kStepStreams == kStreamCompute && t.micro_batch >= 0 &&
           static_cast<std::size_t>(t.stage) < out.size();
  };
  for (std::uint32_t i = 0; i < tasks.size(); ++i) {
    const TaskSpec& t = tasks[i];
    if (!compute_of(t)) continue;
    const auto r = static_cast<std::size_t>(t.stage);
    if (t.micro_batch < kTraceKeptMicroBatches) {
      out[r].after = i;
      head[r] = 1;
    }
    if (t.micro_batch >= m - kTraceKeptMicroBatches && tail[r] == 0) {
      out[r].before = i;
      tail[r] = 1;
    }
  }
  for (std::uint32_t i = 0; i < tasks.size(); ++i) {
    const TaskSpec& t = tasks[i];
    if (!compute_of(t)) continue;
    Steady& st = out[static_cast<std::size_t>(t.stage)];
    const auto r = static_cast<std::size_t>(t.stage);
    if (head[r] == 0 || tail[r] == 0 || i <= st.after || i >= st.before) continue;
    if (!st.any) st.start = src.timings[i].start;
    st.any = true;
    st.end = std::max(st.end, src.timings[i].end);
  }
  return out;
}

/// Calls sink(slice, steady) for every slice in task order: each task that has a stream,
/// then, after the first piece of each pass, its TP / CP / EP pattern. `steady`: the slice
/// lies in its stage's steady state (never when `steady` is empty).
template <class Sink>
void for_each_slice(const Source& src, const std::vector<Steady>& steady, Sink&& sink) {
  const auto& tasks = src.graph.tasks();
  std::size_t comm = 0;
  for (std::uint32_t i = 0; i < tasks.size(); ++i) {
    const TaskSpec& t = tasks[i];
    if (t.stream == kNoStream) continue;
    const auto kind = t.stream % kStepStreams;
    const TaskTiming& tm = src.timings[i];
    Slice s;
    s.name = src.graph.names()[t.name];
    s.cat = to_string(t.role);
    s.ts = us(tm.start);
    s.dur = us(tm.end) - us(tm.start);
    s.pid = t.stage;
    s.tid = kind == kStreamCompute ? kTidCompute : kind == kStreamPp ? kTidPp : kind == kStreamCp ? kTidCpLinks : kTidDp;
    s.micro_batch = t.micro_batch;
    s.chunk = t.chunk;
    const auto r = static_cast<std::size_t>(t.stage);
    const bool in = r < steady.size() && steady[r].holds(i, kind == kStreamCompute, tm);
    sink(s, in);
    if (kind != kStreamCompute || t.chunk < 0 || !first_piece(tasks, i)) continue;
    comm += pass_comm(src, t, s.ts, kMaxCommSlices - comm, [&](const Slice& c) { sink(c, in); });
  }
}

/// The steady state's slices of an aggregated trace, summed per (stage, thread, kind, name)
/// and written end to end on their thread from where the first of them began: the slices of
/// one thread never overlap, so the sums fit in the span they came from.
class Folder {
 public:
  void add(const Slice& s) {
    Sum& x = sums_[Key{s.pid, s.tid, s.cat, s.name}];
    if (x.f.slices == 0) {
      x.first_ts = s.ts;
      x.f.min_dur = x.f.max_dur = s.dur;
    }
    x.first_ts = std::min(x.first_ts, s.ts);
    x.total += s.dur;
    x.f.min_dur = std::min(x.f.min_dur, s.dur);
    x.f.max_dur = std::max(x.f.max_dur, s.dur);
    if (s.micro_batch >= 0) {
      x.f.micro_batch_first = x.f.micro_batch_first < 0 ? s.micro_batch : std::min(x.f.micro_batch_first, s.micro_batch);
      x.f.micro_batch_last = std::max(x.f.micro_batch_last, s.micro_batch);
    }
    ++x.f.slices;
  }

  void write(EventWriter& w) const {
    std::map<std::pair<int, int>, std::vector<std::pair<double, const std::pair<const Key, Sum>*>>> threads;
    for (const auto& kv : sums_) threads[{std::get<0>(kv.first), std::get<1>(kv.first)}].emplace_back(kv.second.first_ts, &kv);
    for (auto& [thread, sums] : threads) {
      std::sort(sums.begin(), sums.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      double at = sums.front().first;
      for (const auto& [first_ts, kv] : sums) {
        Slice s;
        s.pid = thread.first;
        s.tid = thread.second;
        s.cat = std::get<2>(kv->first);
        s.name = std::get<3>(kv->first);
        s.ts = at;
        s.dur = kv->second.total;
        w.slice(s, &kv->second.f);
        at += s.dur;
      }
    }
  }

 private:
  using Key = std::tuple<int, int, const char*, std::string_view>;  // cat: a to_string literal
  struct Sum {
    double first_ts = 0;
    double total = 0;
    Folded f;
  };
  struct Less {
    bool operator()(const Key& a, const Key& b) const {
      return std::tuple(std::get<0>(a), std::get<1>(a), std::string_view(std::get<2>(a)), std::get<3>(a)) <
             std::tuple(std::get<0>(b), std::get<1>(b), std::string_view(std::get<2>(b)), std::get<3>(b));
    }
  };
  std::map<Key, Sum, Less> sums_;
};

/// The threads of every stage, in order: the EP thread only where a MoE layer exchanges.
std::vector<TraceStream> streams(const Source& src) {
  bool ep = false;
  for (const PassTime* pt : {&src.moe.forward, &src.moe.backward, &src.moe.backward_input}) {
    ep = ep || std::any_of(pt->comm.begin(), pt->comm.end(), [](const CommInterval& c) { return c.axis == CommAxis::ep; });
  }
  std::vector<TraceStream> out;
  for (const Thread& t : kThreads) {
    if (t.tid != kTidEp || ep) out.push_back({t.tid, t.name});
  }
  return out;
}

/// Process and thread names of every stage.
void write_threads(EventWriter& w, const Source& src) {
  const std::vector<TraceStream> threads = streams(src);
  for (int r = 0; r < src.p; ++r) {
    w.metadata(r, 0, "process_name", "name", "stage " + std::to_string(r), 0);
    w.metadata(r, 0, "process_sort_index", "sort_index", "", r);
    int sort = 0;
    for (const TraceStream& t : threads) {
      w.metadata(r, t.id, "thread_name", "name", t.name, 0);
      w.metadata(r, t.id, "thread_sort_index", "sort_index", "", ++sort);
    }
  }
}

/// Memory counter: the reserved bytes at the live activations of each sample, GiB. Inside a
/// stage's steady state (aggregated traces) one sample at its start holds its peak.
void write_memory(EventWriter& w, const Source& src, const std::vector<Steady>& steady) {
  for (int r = 0; r < src.p && static_cast<std::size_t>(r) < src.samples.size(); ++r) {
    if (static_cast<std::size_t>(r) >= src.memory.size()) break;
    const costmodel::StageMemory& sm = src.memory[static_cast<std::size_t>(r)];
    auto gib = [&](double bytes) { return costmodel::reserved_with_activations(sm, bytes) / units::kGiB; };
    const Steady* st = static_cast<std::size_t>(r) < steady.size() && steady[static_cast<std::size_t>(r)].any
                           ? &steady[static_cast<std::size_t>(r)] : nullptr;
    double peak = -1;
    bool peak_written = false;
    w.counter(r, 0.0, gib(0.0));
    for (const MemorySample& s : src.samples[static_cast<std::size_t>(r)]) {
      if (st != nullptr && s.time >= st->start && s.time <= st->end) {
        peak = std::max(peak, s.bytes);
        continue;
      }
      if (peak >= 0 && !peak_written) {
        w.counter(r, us(st->start), gib(peak));
        peak_written = true;
      }
      w.counter(r, us(s.time), gib(s.bytes));
    }
    if (peak >= 0 && !peak_written) w.counter(r, us(st->start), gib(peak));
  }
}

}  // namespace

TraceDetail Simulator::trace_detail(TraceDetail requested) const {
  if (requested != TraceDetail::automatic) return requested;
  const Source src{graph_, engine_.timings(), layer_, moe_layer_, embedding_, head_,
                   trace_blocks_, p_, engine_.pool_samples(), stage_memory_};
  std::size_t events = 4 + 2 * std::size(kThreads);  // metadata per stage
  events *= static_cast<std::size_t>(p_);
  for (const auto& s : src.samples) events += s.size() + 1;
  for_each_slice(src, {}, [&](const Slice&, bool) { ++events; });
  return events * kBytesPerEvent > kTraceAutoBytes ? TraceDetail::aggregated : TraceDetail::full;
}

void Simulator::write_chrome_trace(std::ostream& out, TraceDetail detail) const {
  const Source src{graph_, engine_.timings(), layer_, moe_layer_, embedding_, head_,
                   trace_blocks_, p_, engine_.pool_samples(), stage_memory_};
  const bool fold = trace_detail(detail) == TraceDetail::aggregated;
  EventWriter w(out);
  write_threads(w, src);
  const std::vector<Steady> steady = fold ? steady_states(src) : std::vector<Steady>{};
  Folder folder;
  for_each_slice(src, steady, [&](const Slice& s, bool in) {
    if (in) {
      folder.add(s);
    } else {
      w.slice(s);
    }
  });
  folder.write(w);
  write_memory(w, src, steady);
  w.finish();
}

std::vector<TraceStream> Simulator::trace_streams() const {
  const Source src{graph_, engine_.timings(), layer_, moe_layer_, embedding_, head_,
                   trace_blocks_, p_, engine_.pool_samples(), stage_memory_};
  return streams(src);
}

void Simulator::for_each_trace_slice(const std::function<void(const TraceSlice&)>& visit) const {
  const Source src{graph_, engine_.timings(), layer_, moe_layer_, embedding_, head_,
                   trace_blocks_, p_, engine_.pool_samples(), stage_memory_};
  for_each_slice(src, {}, [&](const Slice& s, bool) {
    const double start = s.ts * 1e-6;  // the trace's microseconds, as a reader of it gets them
    visit(TraceSlice{s.pid, s.tid, start, start + s.dur * 1e-6, s.cat});
  });
}

}  // namespace tetra::sim
