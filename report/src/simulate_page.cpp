// The simulate page: per-stage memory bars (split dense / routed experts on a MoE model) and
// the step's timeline, one row per stream, every exchange kind in the legend.

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "page_parts.hpp"

namespace tetra::report {

namespace {

using detail::Axis;
using detail::Chart;
using detail::dv;
using detail::fixed;
using detail::LegendEntry;
using detail::ref_attr;

/// What a trace category is called, which exchange it belongs to ("" for compute) and its
/// colour: fixed, so that a kind looks the same on every page.
struct Kind {
  const char* label;
  const char* exchange;
  const char* colour;
};

const Kind& kind_of(const std::string& cat) {
  static const std::map<std::string, Kind> kinds{
      {"F", {"forward (F)", "", "#0072B2"}},
      {"B", {"backward (B)", "", "#56B4E9"}},
      {"W", {"weight gradient (W)", "", "#88CCEE"}},
      {"optimizer", {"optimizer", "", "#222222"}},
      {"tp", {"TP collective", "TP", "#E69F00"}},
      {"cp", {"CP collective", "CP", "#D55E00"}},
      {"cp-exchange", {"CP ring traffic", "CP", "#AA4499"}},
      {"ep", {"EP dispatch / combine", "EP", "#CC79A7"}},
      {"send-forward", {"PP send activation", "PP", "#009E73"}},
      {"send-backward", {"PP send gradient", "PP", "#44AA99"}},
      {"dp-reduce", {"DP gradient reduce", "DP", "#882255"}},
      {"param-gather", {"DP parameter gather", "DP", "#999933"}}};
  static const Kind other{"other", "", "#999999"};
  const auto it = kinds.find(cat);
  return it != kinds.end() ? it->second : other;
}

std::string simulate_memory(const SimulatePage& page) {
  struct Part {
    const char* key;
    const char* label;
    const char* colour;
    double value;
  };
  std::vector<double> ys{page.capacity_gib};
  for (const StageMemory& s : page.memory) ys.push_back(s.reserved_gib);
  const bool moe = std::any_of(page.memory.begin(), page.memory.end(),
                               [](const StageMemory& s) { return s.expert_states_gib.has_value(); });
  const double n = static_cast<double>(std::max<std::size_t>(1, page.memory.size()));
  Axis ax{"pipeline stage", -0.5, n - 0.5, false, {}};
  for (std::size_t i = 0; i < page.memory.size(); ++i) ax.ticks.push_back(static_cast<double>(i));
  Chart mem("simulate-memory", "Memory of one GPU per pipeline stage, GiB", ax, detail::fit_axis("GiB", ys, true),
            1000, 480);
  mem.set_margins(78, 290);
  const double slot = (mem.right() - mem.left()) / n;
  const double bar = moe ? std::min(60.0, slot * 0.36) : std::min(90.0, slot * 0.6);
  std::map<std::string, std::string> used;  // legend: label -> colour, in first-drawn order below
  std::vector<std::string> order;
  auto stack = [&](const StageMemory& s, double cx, const std::vector<Part>& parts) {
    double acc = 0;
    for (const Part& p : parts) {
      if (p.value <= 0) continue;
      if (used.emplace(p.label, p.colour).second) order.push_back(p.label);
      mem.marks() << "<rect x=\"" << cx - bar / 2 << "\" y=\"" << mem.py(acc + p.value) << "\" width=\"" << bar
                  << "\" height=\"" << mem.py(acc) - mem.py(acc + p.value) << "\" fill=\"" << p.colour
                  << "\" stroke=\"#fff\" stroke-width=\"0.5\"><title>stage " << s.stage << ' ' << p.label << ": "
                  << fixed(p.value, 2) << " GiB</title></rect>\n";
      acc += p.value;
    }
    if (s.reserved_gib > acc + 1e-9) {  // allocator fragmentation up to the reserved peak
      if (used.emplace("fragmentation", "#ddd").second) order.push_back("fragmentation");
      mem.marks() << "<rect x=\"" << cx - bar / 2 << "\" y=\"" << mem.py(s.reserved_gib) << "\" width=\"" << bar
                  << "\" height=\"" << mem.py(acc) - mem.py(s.reserved_gib)
                  << "\" fill=\"#ddd\" stroke=\"#999\" stroke-width=\"0.5\"><title>stage " << s.stage
                  << " fragmentation: " << fixed(s.reserved_gib - acc, 2) << " GiB</title></rect>\n";
    }
  };
  for (const StageMemory& s : page.memory) {
    const double cx = mem.px(s.stage);
    mem.marks() << "<g class=\"stage-bar\"" << ref_attr(s.ref) << dv("reserved_gib", s.reserved_gib)
                << dv("params_gib", s.params_gib) << dv("fp8_cache_gib", s.fp8_cache_gib)
                << dv("grads_gib", s.grads_gib) << dv("optimizer_gib", s.optimizer_gib)
                << dv("activations_gib", s.activations_gib) << dv("buffers_gib", s.buffers_gib)
                << (s.expert_states_gib ? dv("expert_states_gib", *s.expert_states_gib) : "")
                << (s.expert_activations_gib ? dv("expert_activations_gib", *s.expert_activations_gib) : "") << ">\n";
    const double left = moe ? cx - bar / 2 - 3 : cx;
    stack(s, left, {{"params_gib", "parameters", "#0072B2", s.params_gib},
                    {"fp8_cache_gib", "FP8 weight cache", "#56B4E9", s.fp8_cache_gib},
                    {"grads_gib", "gradients", "#009E73", s.grads_gib},
                    {"optimizer_gib", "optimizer", "#E69F00", s.optimizer_gib},
                    {"activations_gib", "activations", "#CC79A7", s.activations_gib},
                    {"buffers_gib", "buffers", "#999999", s.buffers_gib}});
    if (moe) {
      const double states = s.params_gib + s.fp8_cache_gib + s.grads_gib + s.optimizer_gib;
      const double es = s.expert_states_gib.value_or(0), ea = s.expert_activations_gib.value_or(0);
      mem.marks() << "<g class=\"expert-split\">\n";
      stack(s, cx + bar / 2 + 3,
            {{"", "dense weights, gradients, optimizer", "#5D6D7E", states - es},
             {"expert_states_gib", "expert weights, gradients, optimizer", "#D55E00", es},
             {"", "dense activations", "#AEB6BF", s.activations_gib - ea},
             {"expert_activations_gib", "expert activations", "#F5B48C", ea},
             {"buffers_gib", "buffers", "#999999", s.buffers_gib}});
      mem.marks() << "</g>\n";
    }
    mem.marks() << "</g>\n";
    mem.overlay() << "<text class=\"ref-text\" x=\"" << cx << "\" y=\"" << mem.py(s.reserved_gib) - 4
                  << "\" text-anchor=\"middle\" fill=\"#222\">" << fixed(s.reserved_gib, 1) << " GiB</text>\n";
  }
  detail::hline(mem, page.capacity_gib, detail::kCapacity, "capacity " + number(page.capacity_gib) + " GiB");
  if (page.usable_gib) {
    detail::hline(mem, *page.usable_gib, detail::kMargin, "planning margin " + number(*page.usable_gib) + " GiB");
  }
  std::vector<LegendEntry> legend;
  for (const std::string& label : order) legend.push_back({label, used[label], "box"});
  legend.push_back({"capacity", detail::kCapacity, "line"});
  if (page.usable_gib) legend.push_back({"planning margin", detail::kMargin, "line"});
  std::ostringstream o;
  o << "<h2>Memory per stage</h2>\n<p class=\"note\">Peak reserved memory of one GPU of each pipeline stage at the "
       "simulated number of micro-batches in flight, by what holds it"
    << (moe ? ". The model has routed experts: the left bar of each stage is by part, the right one the same "
              "total split into the dense layers' and the experts' share"
            : "")
    << ".</p>\n<div" << ref_attr(page.memory_ref) << dv("capacity_gib", page.capacity_gib)
    << (page.usable_gib ? dv("usable_gib", *page.usable_gib) : "") << ">\n"
    << mem.svg(legend) << "</div>\n";
  return o.str();
}

/// The lanes of a stage that get a row: the compute stream and the streams with traffic.
std::vector<const Lane*> rows_of(const StageTimeline& st) {
  std::vector<const Lane*> rows;
  for (std::size_t i = 0; i < st.lanes.size(); ++i) {
    const Lane& l = st.lanes[i];
    if (i == 0 || !l.slices.empty()) rows.push_back(&l);
  }
  return rows;
}

/// The timeline's legend: the kinds drawn, then every exchange of the layout, said to carry
/// no traffic where it has none.
std::vector<LegendEntry> timeline_legend(const SimulatePage& page, const std::vector<std::string>& drawn,
                                         bool banded) {
  std::vector<LegendEntry> legend;
  std::map<std::string, bool> shown;  // exchange -> has an entry
  for (const std::string& k : drawn) {
    legend.push_back({kind_of(k).label, kind_of(k).colour, "box"});
    shown[kind_of(k).exchange] = true;
  }
  for (const Exchange& e : page.exchanges) {
    if (shown[e.name]) continue;
    legend.push_back({e.name + ": no traffic (" + (e.degree > 1 ? "not in this step" : "size 1") + ")", "#eeeeee", "box"});
  }
  legend.push_back({"bubble (compute idle)", "#f3d9d9", "box"});
  if (banded) legend.push_back({"step-time band", "#555", "band"});
  return legend;
}

/// The simulate page's pipeline timeline: one row per stream of each stage.
std::string simulate_timeline(const SimulatePage& page) {
  constexpr double kWidth = 1300, kLane = 13, kLaneGap = 3, kStageGap = 14;
  std::size_t rows = 0;
  for (const StageTimeline& st : page.timeline) rows += std::max<std::size_t>(rows_of(st).size(), 3);
  const double plot_h = static_cast<double>(rows) * (kLane + kLaneGap) +
                        static_cast<double>(page.timeline.size()) * kStageGap + 8;
  const bool banded = page.band.present();
  Axis tx = detail::fit_axis("time in the step, s", {0.0, page.step_time_s}, true);
  tx.lo = 0;
  tx.hi = std::max(page.step_time_s, banded ? *page.band.step_time_high_s : 0.0);
  if (!(tx.hi > 0)) tx.hi = 1;
  Axis ty{"", 0, plot_h, false, {}, false};
  Chart tl("simulate-timeline", "One step, per stage and stream", tx, ty, kWidth, plot_h + 36 + 52);
  tl.set_margins(170, 280);
  const double plot_px = tl.right() - tl.left();
  const double gap_s = (tx.hi - tx.lo) / plot_px * 0.5;
  std::vector<std::string> drawn;  // kinds, in first-drawn order
  bool binned = false;
  double y = tl.top() + 6;
  for (const StageTimeline& st : page.timeline) {
    const double stage_top = y;
    const std::vector<const Lane*> lanes = rows_of(st);
    tl.overlay() << "<text class=\"stage-label\"" << ref_attr(st.ref) << dv("busy_s", st.busy_s) << dv("idle_s", st.idle_s)
                 << " x=\"8\" y=\"" << y + kLane - 2 << "\">stage " << st.stage << "</text>\n"
                 << "<text class=\"lane-label\" x=\"8\" y=\"" << y + 2 * kLane + 2 << "\">busy "
                 << detail::seconds(st.busy_s) << "</text>\n<text class=\"lane-label\" x=\"8\" y=\""
                 << y + 3 * kLane + 4 << "\">idle " << detail::seconds(st.idle_s) << "</text>\n";
    for (const Lane* lane : lanes) {
      if (lane == &st.lanes.front()) {  // the compute stream: what no slice covers is bubble
        tl.marks() << "<rect class=\"bubble\" x=\"" << tl.left() << "\" y=\"" << y << "\" width=\""
                   << tl.px(page.step_time_s) - tl.left() << "\" height=\"" << kLane << "\" fill=\"#f3d9d9\"/>\n";
      }
      tl.overlay() << "<text class=\"lane-label\" x=\"" << tl.left() - 6 << "\" y=\"" << y + kLane - 3
                   << "\" text-anchor=\"end\">" << escape(lane->name) << "</text>\n";
      std::vector<Slice> slices = merge_slices(lane->slices, gap_s);
      if (static_cast<double>(slices.size()) > plot_px / 4) {  // sub-pixel stripes: bin into 2-pixel columns
        binned = true;
        slices = bin_slices(lane->slices, tx.lo, tx.hi, static_cast<std::size_t>(plot_px / 2));
      }
      for (const Slice& s : slices) {
        if (std::find(drawn.begin(), drawn.end(), s.kind) == drawn.end()) drawn.push_back(s.kind);
        const double x0 = tl.px(s.start_s), x1 = tl.px(s.end_s);
        tl.marks() << "<rect x=\"" << x0 << "\" y=\"" << y << "\" width=\"" << std::max(0.5, x1 - x0)
                   << "\" height=\"" << kLane << "\" fill=\"" << kind_of(s.kind).colour << "\"/>\n";
      }
      y += kLane + kLaneGap;
    }
    y = stage_top + static_cast<double>(std::max<std::size_t>(lanes.size(), 3)) * (kLane + kLaneGap) + kStageGap;
  }
  if (banded) {  // where the step may end
    const double x0 = tl.px(*page.band.step_time_low_s), x1 = tl.px(*page.band.step_time_high_s);
    tl.marks() << "<rect class=\"band\" x=\"" << x0 << "\" y=\"" << tl.top() << "\" width=\"" << std::max(1.0, x1 - x0)
               << "\" height=\"" << tl.bottom() - tl.top() << "\" fill=\"#555\" fill-opacity=\"0.15\"/>\n";
  }
  std::ostringstream o;
  o << "<h2>Pipeline timeline</h2>\n<p class=\"note\">The simulated step of each pipeline stage: the compute stream "
       "(forward F, backward B, split backward B/W, optimizer) and each communication stream that carries "
       "traffic; TP and CP collectives and the EP dispatch and combine inside a pass are repeated per layer "
       "and shown joined. Pale red on the "
       "compute row is idle time (the pipeline bubble and waits for communication).</p>\n";
  if (binned) {
    o << "<p class=\"note\" id=\"timeline-binned\">" << page.micro_batches
      << " micro-batches are more slices than the width shows: rows with too many are drawn in 2-pixel columns, "
         "each in the colour of the kind busy longest in it and left empty when less than half busy.</p>\n";
  }
  o << tl.svg(timeline_legend(page, drawn, banded));
  return o.str();
}

}  // namespace

std::string simulate_html(const SimulatePage& page) {
  const std::string sub = page.layout.empty() ? "" : "layout <code id=\"simulate-layout\">" + escape(page.layout) + "</code>";
  return detail::head(page.title, sub) + detail::facts_table(page.facts) + simulate_memory(page) +
         simulate_timeline(page) + detail::tail();
}

}  // namespace tetra::report
