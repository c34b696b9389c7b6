// Chrome trace JSON (the Trace Event Format that chrome://tracing and Perfetto open):
// one process per pipeline stage, one thread per stream, "X" complete events in µs, and a
// "C" counter track of the stage's memory.

#include <nlohmann/json.hpp>

#include "tetra/base/units.hpp"
#include "tetra/sim/simulator.hpp"

namespace tetra::sim {

namespace {
constexpr int kTidCompute = 1, kTidTp = 2, kTidCp = 3, kTidPp = 4, kTidDp = 5, kTidCpLinks = 6;
constexpr std::size_t kMaxCommSlices = 2000000;  // beyond this, per-layer TP/CP slices are dropped

double us(Time t) { return static_cast<double>(t.count_ps()) * 1e-6; }
double us_s(double s) { return s * 1e6; }

const PassTime* pass_of(const LayerTimes& lt, TaskRole role) {
  switch (role) {
    case TaskRole::forward: return &lt.forward;
    case TaskRole::backward: return &lt.backward;
    case TaskRole::backward_input: return &lt.backward_input;
    case TaskRole::backward_weight: return &lt.backward_weight;
    default: return nullptr;
  }
}
}  // namespace

std::string Simulator::chrome_trace() const {
  using J = nlohmann::ordered_json;
  J events = J::array();
  const auto& tasks = graph_.tasks();
  const auto& tm = engine_.timings();
  for (int r = 0; r < p_; ++r) {
    events.push_back(J{{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"tid", 0},
                       {"args", J{{"name", "stage " + std::to_string(r)}}}});
    events.push_back(J{{"name", "process_sort_index"}, {"ph", "M"}, {"pid", r}, {"tid", 0},
                       {"args", J{{"sort_index", r}}}});
    const std::pair<int, const char*> threads[] = {
        {kTidCompute, "compute"}, {kTidTp, "tp comm"},   {kTidCp, "cp comm"},
        {kTidPp, "pp send"},      {kTidDp, "dp comm"},   {kTidCpLinks, "cp traffic"}};
    for (const auto& [tid, name] : threads) {
      events.push_back(J{{"name", "thread_name"}, {"ph", "M"}, {"pid", r}, {"tid", tid},
                         {"args", J{{"name", name}}}});
      events.push_back(J{{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", r}, {"tid", tid},
                         {"args", J{{"sort_index", tid}}}});
    }
  }
  std::size_t comm_slices = 0;
  for (std::uint32_t i = 0; i < tasks.size(); ++i) {
    const TaskSpec& t = tasks[i];
    if (t.stream == kNoStream) continue;
    const auto kind = t.stream % kStepStreams;
    const int tid = kind == kStreamCompute ? kTidCompute
                    : kind == kStreamPp    ? kTidPp
                    : kind == kStreamCp    ? kTidCpLinks
                                           : kTidDp;
    J args = J::object();
    if (t.micro_batch >= 0) args["micro_batch"] = t.micro_batch;
    if (t.chunk >= 0) args["chunk"] = t.chunk;
    std::string name = graph_.names()[t.name];
    events.push_back(J{{"name", name}, {"cat", to_string(t.role)}, {"ph", "X"}, {"ts", us(tm[i].start)},
                       {"dur", us(tm[i].end) - us(tm[i].start)}, {"pid", t.stage}, {"tid", tid},
                       {"args", args}});
    // TP / CP communication inside the pass: the layer-level pattern, once per layer, from
    // the start of the task (pieces of a split task restart the pattern only on the first).
    const PassTime* pt = pass_of(layer_, t.role);
    if (pt == nullptr || pt->comm.empty() || t.chunk < 0) continue;
    const bool first_piece = i == 0 || tasks[i - 1].stream != t.stream || tasks[i - 1].role != t.role ||
                             tasks[i - 1].micro_batch != t.micro_batch || tasks[i - 1].chunk != t.chunk;
    if (!first_piece) continue;
    const int vs = t.chunk * p_ + t.stage;
    const int layers = chunk_layers_[static_cast<std::size_t>(vs)];
    for (int l = 0; l < layers && comm_slices < kMaxCommSlices; ++l) {
      const double base = us(tm[i].start) + us_s(l * pt->seconds);
      for (const auto& c : pt->comm) {
        if (c.axis != CommAxis::tp && c.axis != CommAxis::cp) continue;
        events.push_back(J{{"name", c.name}, {"cat", c.axis == CommAxis::tp ? "tp" : "cp"}, {"ph", "X"},
                           {"ts", base + us_s(c.start_s)}, {"dur", us_s(c.end_s - c.start_s)},
                           {"pid", t.stage}, {"tid", c.axis == CommAxis::tp ? kTidTp : kTidCp},
                           {"args", J{{"layer", l}}}});
        ++comm_slices;
      }
    }
  }
  // Memory counter: the reserved bytes at the live activations of each sample, GiB.
  const auto& samples = engine_.pool_samples();
  for (int r = 0; r < p_ && static_cast<std::size_t>(r) < samples.size(); ++r) {
    if (static_cast<std::size_t>(r) >= stage_memory_.size()) break;
    const costmodel::StageMemory& sm = stage_memory_[static_cast<std::size_t>(r)];
    events.push_back(J{{"name", "memory"}, {"ph", "C"}, {"ts", 0.0}, {"pid", r},
                       {"args", J{{"GiB", costmodel::reserved_with_activations(sm, 0.0) / units::kGiB}}}});
    for (const auto& s : samples[static_cast<std::size_t>(r)]) {
      events.push_back(J{{"name", "memory"}, {"ph", "C"}, {"ts", us(s.time)}, {"pid", r},
                         {"args", J{{"GiB", costmodel::reserved_with_activations(sm, s.bytes) / units::kGiB}}}});
    }
  }
  J doc = J::object();
  doc["traceEvents"] = std::move(events);
  doc["displayTimeUnit"] = "ms";
  return doc.dump();
}

}  // namespace tetra::sim
