// The three pages: a shared skeleton (inline CSS, summary facts), then each command's plots
// and tables. Marks and cells carry their numbers in data-v-* attributes (report.hpp).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "chart.hpp"
#include "tetra/report/report.hpp"

namespace tetra::report {

namespace {

using detail::Axis;
using detail::Chart;
using detail::LegendEntry;
using detail::palette;

constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222;
       margin: 24px 32px; max-width: 1340px; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 17px; margin: 28px 0 6px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
p.note { color: #555; margin: 4px 0 10px; max-width: 960px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid #e6e6e6; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; font-weight: 600; }
td.text, th.text { text-align: left; }
table.facts th { text-align: left; background: none; font-weight: 500; color: #555; }
table.facts td { text-align: left; }
tr.pareto td { background: #fff6df; }
svg.chart { display: block; margin: 6px 0 4px; background: #fff; }
svg .title { font-size: 15px; font-weight: 600; fill: #222; }
svg .tick { font-size: 12px; fill: #444; }
svg .label { font-size: 13px; fill: #222; }
svg .legend-text { font-size: 12px; fill: #222; }
svg .grid { stroke: #e8e8e8; stroke-width: 1; }
svg .frame { fill: none; stroke: #888; stroke-width: 1; }
svg .ref { stroke-width: 1.5; stroke-dasharray: 6 4; }
svg .ref-text { font-size: 11px; }
svg .lane-label { font-size: 11px; fill: #333; }
svg .stage-label { font-size: 12px; font-weight: 600; fill: #222; }
)";

/// ` data-v-key="value"`.
std::string dv(const std::string& key, double value) { return " data-v-" + key + "=\"" + number(value) + "\""; }
std::string ref_attr(const std::string& ref) { return " data-ref=\"" + escape(ref) + "\""; }

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

/// Thousands separated by thin spaces: "12 345 678".
std::string grouped(double x) {
  std::string s = fixed(x, 0);
  const bool neg = !s.empty() && s[0] == '-';
  std::string digits = neg ? s.substr(1) : s;
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += "\u2009";
    out += digits[i];
  }
  return (neg ? "-" : "") + out;
}

std::string head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + escape(title) +
         "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<h1>" + escape(title) + "</h1>\n";
}

std::string tail() { return "</body>\n</html>\n"; }

/// A value as shown in a table: exact JSON number for small magnitudes, grouped otherwise.
std::string shown(double v) {
  if (std::abs(v) >= 1e5) return grouped(v);
  return number(v);
}

std::string facts_table(const std::vector<Fact>& facts) {
  std::ostringstream o;
  o << "<table class=\"facts\">\n";
  for (const Fact& f : facts) {
    o << "<tr><th>" << escape(f.label) << "</th><td" << ref_attr(f.ref) << dv(f.key, f.value) << ">"
      << escape(shown(f.value)) << (f.unit.empty() ? "" : " " + escape(f.unit)) << "</td></tr>\n";
  }
  o << "</table>\n";
  return o.str();
}

constexpr const char* kCapacity = "#B22222";  // limits: firebrick and purple, apart from the data colours
constexpr const char* kMargin = "#6A3D9A";

/// A dashed vertical reference line across the plot; its legend entry names it (points crowd
/// near such limits, so a label inside the plot would cover them).
void vline(Chart& c, double x, const std::string& colour) {
  c.marks() << "<line class=\"ref\" x1=\"" << c.px(x) << "\" x2=\"" << c.px(x) << "\" y1=\"" << c.top() << "\" y2=\""
            << c.bottom() << "\" stroke=\"" << colour << "\"/>\n";
}
/// A dashed horizontal reference line, labelled at its right end when `text` is not empty.
void hline(Chart& c, double y, const std::string& colour, const std::string& text) {
  c.marks() << "<line class=\"ref\" x1=\"" << c.left() << "\" x2=\"" << c.right() << "\" y1=\"" << c.py(y)
            << "\" y2=\"" << c.py(y) << "\" stroke=\"" << colour << "\"/>\n";
  if (text.empty()) return;
  c.overlay() << "<text class=\"ref-text\" x=\"" << c.right() - 4 << "\" y=\"" << c.py(y) - 4
              << "\" text-anchor=\"end\" fill=\"" << colour << "\">" << escape(text) << "</text>\n";
}

/// Colour per name in first-appearance order.
class Colours {
 public:
  const std::string& of(const std::string& name) {
    auto it = index_.find(name);
    if (it == index_.end()) {
      it = index_.emplace(name, order_.size()).first;
      order_.push_back(name);
    }
    return palette(it->second);
  }
  [[nodiscard]] const std::vector<std::string>& names() const { return order_; }

 private:
  std::map<std::string, std::size_t> index_;
  std::vector<std::string> order_;
};

}  // namespace

// --- plan -----------------------------------------------------------------------------------

/// The plan page's scaling chart: tokens/s against GPU count, one curve per GPU type.
std::string plan_scaling(const PlanPage& page, Colours& gpu_colours) {
  std::ostringstream o;
  // Scaling: tokens/s against GPU count, one curve per GPU type, the band where known.
  std::vector<double> gx, gy;
  std::set<double> counts;
  for (const PlanCandidate& c : page.candidates) {
    if (!c.fits) continue;
    gx.push_back(c.gpus);
    counts.insert(c.gpus);
    gy.push_back(c.tokens_per_s);
    if (c.band.present()) gy.push_back(c.tokens_per_s * c.step_time_s / *c.band.step_time_low_s);
  }
  Axis ax = detail::fit_axis("GPUs", gx, false, 1.5);
  if (ax.log && counts.size() <= 12) ax.ticks.assign(counts.begin(), counts.end());
  Chart scaling("plan-scaling", "Throughput against GPU count, per GPU type", ax,
                detail::fit_axis("tokens/s", gy, true), 900, 460);
  bool any_band = false;
  for (const std::string& g : gpu_colours.names()) {
    std::vector<const PlanCandidate*> curve;
    for (const PlanCandidate& c : page.candidates) {
      if (c.fits && c.gpu == g) curve.push_back(&c);
    }
    std::sort(curve.begin(), curve.end(), [](auto* a, auto* b) { return a->gpus < b->gpus; });
    const std::string& colour = gpu_colours.of(g);
    // Band: tokens/s at the high and the low step time, where every point of the curve has one.
    const bool banded = !curve.empty() && std::all_of(curve.begin(), curve.end(), [](auto* c) {
      return c->band.present() && *c->band.step_time_low_s > 0 && *c->band.step_time_high_s > 0;
    });
    if (banded) {
      any_band = true;
      scaling.marks() << "<polygon class=\"band\" fill=\"" << colour
                      << "\" fill-opacity=\"0.18\" stroke=\"none\" points=\"";
      for (auto* c : curve) {
        scaling.marks() << scaling.px(c->gpus) << ','
                        << scaling.py(c->tokens_per_s * c->step_time_s / *c->band.step_time_low_s) << ' ';
      }
      for (auto it = curve.rbegin(); it != curve.rend(); ++it) {
        const PlanCandidate* c = *it;
        scaling.marks() << scaling.px(c->gpus) << ','
                        << scaling.py(c->tokens_per_s * c->step_time_s / *c->band.step_time_high_s) << ' ';
      }
      scaling.marks() << "\"/>\n";
    }
    if (curve.size() > 1) {
      scaling.marks() << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\" points=\"";
      for (auto* c : curve) scaling.marks() << scaling.px(c->gpus) << ',' << scaling.py(c->tokens_per_s) << ' ';
      scaling.marks() << "\"/>\n";
    }
    for (auto* c : curve) {
      scaling.marks() << "<circle class=\"point\"" << ref_attr(c->ref) << dv("id", static_cast<double>(c->id))
                      << dv("gpus", c->gpus) << dv("tokens_per_s", c->tokens_per_s) << " cx=\"" << scaling.px(c->gpus)
                      << "\" cy=\"" << scaling.py(c->tokens_per_s) << "\" r=\"4.5\" fill=\"" << colour << "\"><title>"
                      << escape(c->name + " × " + std::to_string(c->gpus) + ": " + grouped(c->tokens_per_s) +
                                " tokens/s, MFU " + fixed(c->mfu * 100, 1) + " %")
                      << "</title></circle>\n";
    }
  }
  std::vector<LegendEntry> legend;
  for (const std::string& g : gpu_colours.names()) legend.push_back({g, gpu_colours.of(g), "dot"});
  if (any_band) legend.push_back({"step-time band", "#555", "band"});
  o << "<h2>Scaling</h2>\n<p class=\"note\">Tokens per second of each candidate's best layout against its GPU "
       "count; one curve per GPU type"
    << (any_band ? ", shaded between the throughput at the high and the low step time" : "") << ".</p>\n"
    << scaling.svg(legend);
  return o.str();
}

/// The plan page's table of every candidate, by days.
std::string plan_table(const PlanPage& page) {
  std::ostringstream o;
  // Table: every candidate, by days (those without a layout or that never finish last).
  std::vector<const PlanCandidate*> rows;
  for (const PlanCandidate& c : page.candidates) rows.push_back(&c);
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) {
    const double da = a->fits && a->days ? *a->days : HUGE_VAL, db = b->fits && b->days ? *b->days : HUGE_VAL;
    return da < db;
  });
  o << "<h2>Candidates</h2>\n<table id=\"plan-table\">\n<tr><th class=\"text\">candidate</th><th>GPUs</th>"
       "<th class=\"text\">best layout</th><th>step s</th><th>tokens/s</th><th>MFU %</th><th>days</th>"
       "<th>GPU-hours</th>"
    << (page.priced ? "<th>cost</th>" : "") << "<th class=\"text\">front</th>"
    << (page.deadline_days ? "<th class=\"text\">deadline</th>" : "")
    << (page.budget ? "<th class=\"text\">budget</th>" : "") << "</tr>\n";
  for (const PlanCandidate* c : rows) {
    o << "<tr" << (c->pareto ? " class=\"pareto\"" : "") << ref_attr(c->ref) << dv("id", static_cast<double>(c->id))
      << "><td class=\"text\">" << escape(c->name) << "</td><td>" << c->gpus << "</td>";
    if (!c->fits) {
      o << "<td class=\"text\" colspan=\"" << 7 + (page.priced ? 1 : 0) + (page.deadline_days ? 1 : 0) +
                                                 (page.budget ? 1 : 0)
        << "\">no layout fits the memory budget</td></tr>\n";
      continue;
    }
    auto opt = [](const std::optional<double>& v, int digits) { return v ? fixed(*v, digits) : std::string("never"); };
    o << "<td class=\"text\">" << escape(c->layout) << "</td><td>" << fixed(c->step_time_s, 3) << "</td><td>"
      << grouped(c->tokens_per_s) << "</td><td>" << fixed(c->mfu * 100, 1) << "</td><td>" << opt(c->days, 1)
      << "</td><td>" << (c->gpu_hours ? grouped(*c->gpu_hours) : "never") << "</td>";
    if (page.priced) o << "<td>" << (c->cost ? grouped(*c->cost) : "never") << "</td>";
    o << "<td class=\"text\">" << (c->pareto ? "yes" : "") << "</td>";
    auto verdict = [](const std::optional<bool>& b, const char* yes, const char* no) {
      return b ? std::string(*b ? yes : no) : std::string();
    };
    if (page.deadline_days) o << "<td class=\"text\">" << verdict(c->meets_deadline, "meets", "misses") << "</td>";
    if (page.budget) o << "<td class=\"text\">" << verdict(c->meets_budget, "meets", "over") << "</td>";
    o << "</tr>\n";
  }
  return o.str();
}

std::string plan_html(const PlanPage& page) {
  std::ostringstream o;
  o << head(page.title) << facts_table(page.facts);

  std::vector<const PlanCandidate*> shown_points;  // candidates with a finite days and y value
  std::vector<double> xs, ys;
  auto y_of = [&](const PlanCandidate& c) { return page.priced ? c.cost : c.gpu_hours; };
  for (const PlanCandidate& c : page.candidates) {
    if (!c.fits || !c.days || !y_of(c)) continue;
    shown_points.push_back(&c);
    xs.push_back(*c.days);
    ys.push_back(*y_of(c));
    if (c.band.present() && c.step_time_s > 0) {  // days and cost both scale with the step time
      for (double t : {*c.band.step_time_low_s, *c.band.step_time_high_s}) {
        xs.push_back(*c.days * t / c.step_time_s);
        ys.push_back(*y_of(c) * t / c.step_time_s);
      }
    }
  }
  if (page.deadline_days) xs.push_back(*page.deadline_days);
  if (page.priced && page.budget) ys.push_back(*page.budget);
  Colours gpu_colours;
  for (const PlanCandidate& c : page.candidates) gpu_colours.of(c.gpu);

  // Days against cost (or GPU-hours), the Pareto front joined in order of days.
  const std::string y_key = page.priced ? "cost" : "gpu_hours";
  Chart front("plan-days-cost",
              page.priced ? "Days against cost, every candidate; the Pareto front joined"
                          : "Days against GPU-hours, every candidate; the fastest marked",
              detail::fit_axis("days to train", xs, false, 8),
              detail::fit_axis(page.priced ? "cost" : "GPU-hours", ys, false, 8), 900, 500);
  std::vector<const PlanCandidate*> pareto;
  for (const PlanCandidate* c : shown_points) {
    if (c->pareto) pareto.push_back(c);
  }
  std::sort(pareto.begin(), pareto.end(), [](auto* a, auto* b) { return *a->days < *b->days; });
  if (page.deadline_days) vline(front, *page.deadline_days, kCapacity);
  if (page.priced && page.budget) hline(front, *page.budget, kMargin, "");
  if (pareto.size() > 1) {
    front.marks() << "<polyline class=\"pareto-front\" fill=\"none\" stroke=\"#222\" stroke-width=\"1.5\" points=\"";
    for (const PlanCandidate* c : pareto) front.marks() << front.px(*c->days) << ',' << front.py(*y_of(*c)) << ' ';
    front.marks() << "\"/>\n";
  }
  for (const PlanCandidate* c : shown_points) {
    const double x = front.px(*c->days), y = front.py(*y_of(*c));
    if (c->band.present() && c->step_time_s > 0) {
      const double lo = *c->band.step_time_low_s / c->step_time_s, hi = *c->band.step_time_high_s / c->step_time_s;
      front.marks() << "<line class=\"band\" x1=\"" << front.px(*c->days * lo) << "\" y1=\""
                    << front.py(*y_of(*c) * lo) << "\" x2=\"" << front.px(*c->days * hi) << "\" y2=\""
                    << front.py(*y_of(*c) * hi) << "\" stroke=\"" << gpu_colours.of(c->gpu)
                    << "\" stroke-width=\"2\" stroke-opacity=\"0.6\"/>\n";
    }
    front.marks() << "<circle class=\"point" << (c->pareto ? " pareto" : "") << "\"" << ref_attr(c->ref)
                  << dv("id", static_cast<double>(c->id)) << dv("days", *c->days) << dv(y_key, *y_of(*c)) << " cx=\""
                  << x << "\" cy=\"" << y << "\" r=\"" << (c->pareto ? 6 : 4.5) << "\" fill=\""
                  << gpu_colours.of(c->gpu) << "\"" << (c->pareto ? " stroke=\"#222\" stroke-width=\"2\"" : "")
                  << "><title>" << escape(c->name + " × " + std::to_string(c->gpus) + ": " + fixed(*c->days, 1) +
                                          " days, " + (page.priced ? "cost " : "GPU-hours ") + grouped(*y_of(*c)))
                  << "</title></circle>\n";
  }
  std::vector<LegendEntry> legend;
  for (const std::string& g : gpu_colours.names()) legend.push_back({g, gpu_colours.of(g), "dot"});
  legend.push_back({page.priced ? "Pareto front" : "fastest", "#222", "front"});
  if (page.deadline_days) legend.push_back({"deadline " + shown(*page.deadline_days) + " days", kCapacity, "line"});
  if (page.priced && page.budget) legend.push_back({"budget " + shown(*page.budget), kMargin, "line"});
  o << "<h2>Days and cost</h2>\n<p class=\"note\">One point per candidate cluster and GPU count with a layout that "
       "fits, at its best layout; outlined points are on the "
    << (page.priced ? "Pareto front (no other candidate is both faster and cheaper)" : "front (fastest)")
    << ". Candidates that never finish are in the table only.</p>\n"
    << front.svg(legend);

  o << plan_scaling(page, gpu_colours);

  o << plan_table(page);
  o << "</table>\n" << tail();
  return o.str();
}

// --- search ---------------------------------------------------------------------------------

std::string search_html(const SearchPage& page) {
  std::ostringstream o;
  o << head(page.title) << facts_table(page.facts);
  std::vector<double> xs, ys;
  for (const RankedLayout& l : page.layouts) {
    xs.push_back(l.peak_gib);
    ys.push_back(l.tokens_per_s);
    if (l.band.present() && *l.band.step_time_low_s > 0) {
      ys.push_back(l.tokens_per_s * l.step_time_s / *l.band.step_time_low_s);
    }
  }
  if (page.capacity_gib) xs.push_back(*page.capacity_gib);
  if (page.budget_gib) xs.push_back(*page.budget_gib);
  Chart chart("search-throughput-memory", "Ranked layouts: throughput against peak memory",
              detail::fit_axis("peak memory of the fullest stage, GiB", xs, true),
              detail::fit_axis("tokens/s", ys, false), 1000, 540);
  if (page.budget_gib) vline(chart, *page.budget_gib, kMargin);
  if (page.capacity_gib) vline(chart, *page.capacity_gib, kCapacity);
  Colours schedules;
  for (const RankedLayout& l : page.layouts) schedules.of(l.schedule);
  // Worst first, so that the best layouts are drawn on top.
  for (auto it = page.layouts.rbegin(); it != page.layouts.rend(); ++it) {
    const RankedLayout& l = *it;
    const std::string& colour = schedules.of(l.schedule);
    const double x = chart.px(l.peak_gib), y = chart.py(l.tokens_per_s);
    if (l.band.present() && *l.band.step_time_low_s > 0 && *l.band.step_time_high_s > 0) {
      chart.marks() << "<line class=\"band\" x1=\"" << x << "\" x2=\"" << x << "\" y1=\""
                    << chart.py(l.tokens_per_s * l.step_time_s / *l.band.step_time_high_s) << "\" y2=\""
                    << chart.py(l.tokens_per_s * l.step_time_s / *l.band.step_time_low_s) << "\" stroke=\"" << colour
                    << "\" stroke-opacity=\"0.5\"/>\n";
    }
    const bool top = static_cast<std::size_t>(l.rank) <= page.table_rows;
    chart.marks() << "<circle class=\"point" << (top ? " top" : "") << "\"" << ref_attr(l.ref) << " data-rank=\""
                  << l.rank << "\"" << dv("peak_gib", l.peak_gib) << dv("tokens_per_s", l.tokens_per_s)
                  << " cx=\"" << x << "\" cy=\"" << y << "\" r=\"" << (l.rank == 1 ? 6.5 : 4) << "\" fill=\"" << colour
                  << "\" fill-opacity=\"" << (top ? 1.0 : 0.55) << "\""
                  << (top ? " stroke=\"#222\" stroke-width=\"1.2\"" : "") << "><title>"
                  << escape("#" + std::to_string(l.rank) + " " + l.layout + ": " + grouped(l.tokens_per_s) +
                            " tokens/s, " + fixed(l.peak_gib, 1) + " GiB")
                  << "</title></circle>\n";
  }
  if (!page.layouts.empty()) {
    const RankedLayout& b = page.layouts.front();
    chart.overlay() << "<text class=\"ref-text\" x=\"" << chart.px(b.peak_gib) + 9 << "\" y=\""
                    << chart.py(b.tokens_per_s) - 7 << "\" fill=\"#222\">#1</text>\n";
  }
  std::vector<LegendEntry> legend;
  for (const std::string& s : schedules.names()) legend.push_back({s, schedules.of(s), "dot"});
  if (page.budget_gib) legend.push_back({"budget " + number(*page.budget_gib) + " GiB", kMargin, "line"});
  if (page.capacity_gib) legend.push_back({"capacity " + number(*page.capacity_gib) + " GiB", kCapacity, "line"});
  o << "<h2>Throughput and memory</h2>\n<p class=\"note\">Every ranked layout, coloured by pipeline schedule; the "
    << page.table_rows << " best are outlined"
    << (page.layouts.empty() ? "" : ", the best labelled #1") << ".</p>\n"
    << chart.svg(legend);

  o << "<h2>Top " << std::min(page.table_rows, page.layouts.size()) << " layouts</h2>\n<table id=\"search-table\">\n"
    << "<tr><th>rank</th><th class=\"text\">layout</th><th class=\"text\">schedule</th><th>step s</th>"
       "<th>tokens/s</th><th>MFU %</th><th>peak GiB</th></tr>\n";
  for (std::size_t i = 0; i < page.layouts.size() && i < page.table_rows; ++i) {
    const RankedLayout& l = page.layouts[i];
    o << "<tr" << ref_attr(l.ref) << " data-rank=\"" << l.rank << "\"" << dv("step_time_s", l.step_time_s)
      << dv("tokens_per_s", l.tokens_per_s) << dv("mfu", l.mfu) << dv("peak_gib", l.peak_gib) << "><td>" << l.rank
      << "</td><td class=\"text\">" << escape(l.layout) << "</td><td class=\"text\">" << escape(l.schedule)
      << "</td><td>" << fixed(l.step_time_s, 3) << "</td><td>" << grouped(l.tokens_per_s) << "</td><td>"
      << fixed(l.mfu * 100, 1) << "</td><td>" << fixed(l.peak_gib, 1) << "</td></tr>\n";
  }
  o << "</table>\n" << tail();
  return o.str();
}

// --- simulate -------------------------------------------------------------------------------

/// The simulate page's pipeline timeline: one row per stream of each stage.
std::string simulate_timeline(const SimulatePage& page) {
  std::ostringstream o;
  // Timeline: one row per stream of each stage, slices joined below half a pixel.
  constexpr double kWidth = 1300, kLane = 13, kLaneGap = 3, kStageGap = 14;
  // Rows per stage: the compute lane and the lanes with traffic, at least three for the labels.
  auto rows_of = [](const StageTimeline& st) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < st.lanes.size(); ++i) n += (i == 0 || !st.lanes[i].slices.empty()) ? 1 : 0;
    return std::max<std::size_t>(n, 3);
  };
  std::size_t lanes = 0;
  for (const StageTimeline& st : page.timeline) lanes += rows_of(st);
  const double plot_h = static_cast<double>(lanes) * (kLane + kLaneGap) +
                        static_cast<double>(page.timeline.size()) * kStageGap + 8;
  const bool banded = page.band.present();
  Axis tx = detail::fit_axis("time in the step, s", {0.0, page.step_time_s}, true);
  tx.lo = 0;
  tx.hi = std::max(page.step_time_s, banded ? *page.band.step_time_high_s : 0.0);
  if (!(tx.hi > 0)) tx.hi = 1;
  Axis ty{"", 0, plot_h, false, {}, false};
  Chart tl("simulate-timeline", "One step, per stage and stream", tx, ty, kWidth, plot_h + 36 + 52);
  tl.set_margins(170, 200);
  const double gap_s = (tx.hi - tx.lo) / (tl.right() - tl.left()) * 0.5;
  Colours kinds;
  double y = tl.top() + 6;
  for (const StageTimeline& st : page.timeline) {
    const double stage_top = y;
    tl.overlay() << "<text class=\"stage-label\"" << ref_attr(st.ref) << dv("busy_s", st.busy_s)
                 << dv("idle_s", st.idle_s)
                 << " x=\"8\" y=\"" << y + kLane - 2 << "\">stage " << st.stage << "</text>\n";
    tl.overlay() << "<text class=\"lane-label\" x=\"8\" y=\"" << y + 2 * kLane + 2 << "\">busy "
                 << fixed(st.busy_s, 2) << " s</text>\n<text class=\"lane-label\" x=\"8\" y=\"" << y + 3 * kLane + 4
                 << "\">idle " << fixed(st.idle_s, 2) << " s</text>\n";
    for (std::size_t li = 0; li < st.lanes.size(); ++li) {
      const Lane& lane = st.lanes[li];
      if (li > 0 && lane.slices.empty()) continue;
      if (li == 0) {  // the compute stream: what no slice covers is bubble
        tl.marks() << "<rect class=\"bubble\" x=\"" << tl.left() << "\" y=\"" << y << "\" width=\""
                   << tl.px(page.step_time_s) - tl.left() << "\" height=\"" << kLane
                   << "\" fill=\"#f3d9d9\"/>\n";
      }
      tl.overlay() << "<text class=\"lane-label\" x=\"" << tl.left() - 6 << "\" y=\"" << y + kLane - 3
                   << "\" text-anchor=\"end\">" << escape(lane.name) << "</text>\n";
      for (const Slice& s : merge_slices(lane.slices, gap_s)) {
        const double x0 = tl.px(s.start_s), x1 = tl.px(s.end_s);
        tl.marks() << "<rect x=\"" << x0 << "\" y=\"" << y << "\" width=\"" << std::max(0.5, x1 - x0) << "\" height=\""
                   << kLane << "\" fill=\"" << kinds.of(s.kind) << "\"/>\n";
      }
      y += kLane + kLaneGap;
    }
    y = stage_top + static_cast<double>(rows_of(st)) * (kLane + kLaneGap) + kStageGap;
  }
  if (banded) {  // where the step may end
    const double x0 = tl.px(*page.band.step_time_low_s), x1 = tl.px(*page.band.step_time_high_s);
    tl.marks() << "<rect class=\"band\" x=\"" << x0 << "\" y=\"" << tl.top() << "\" width=\"" << std::max(1.0, x1 - x0)
               << "\" height=\"" << tl.bottom() - tl.top() << "\" fill=\"#555\" fill-opacity=\"0.15\"/>\n";
  }
  std::vector<LegendEntry> legend;
  for (const std::string& k : kinds.names()) legend.push_back({k, kinds.of(k), "box"});
  legend.push_back({"bubble (compute idle)", "#f3d9d9", "box"});
  if (banded) legend.push_back({"step-time band", "#555", "band"});
  o << "<h2>Pipeline timeline</h2>\n<p class=\"note\">The simulated step of each pipeline stage: the compute stream "
       "(forward F, backward B, split backward B/W, optimizer) and each communication stream that carries "
       "traffic; TP and CP collectives inside a pass are repeated per layer and shown joined. Pale red on the "
       "compute row is idle time (the pipeline bubble and waits for communication).</p>\n"
    << tl.svg(legend);
  return o.str();
}

std::string simulate_html(const SimulatePage& page) {
  std::ostringstream o;
  o << head(page.title) << facts_table(page.facts);

  // Memory: one stacked bar per stage.
  struct Part {
    const char* key;
    const char* label;
    const char* colour;
    double StageMemory::*field;
  };
  static const Part parts[] = {
      {"params_gib", "parameters", "#0072B2", &StageMemory::params_gib},
      {"fp8_cache_gib", "FP8 weight cache", "#56B4E9", &StageMemory::fp8_cache_gib},
      {"grads_gib", "gradients", "#009E73", &StageMemory::grads_gib},
      {"optimizer_gib", "optimizer", "#E69F00", &StageMemory::optimizer_gib},
      {"activations_gib", "activations", "#CC79A7", &StageMemory::activations_gib},
      {"buffers_gib", "buffers", "#999999", &StageMemory::buffers_gib},
  };
  std::vector<double> ys{page.capacity_gib};
  for (const StageMemory& s : page.memory) ys.push_back(s.reserved_gib);
  const double n = static_cast<double>(std::max<std::size_t>(1, page.memory.size()));
  Axis ax{"pipeline stage", -0.5, n - 0.5, false, {}};
  for (std::size_t i = 0; i < page.memory.size(); ++i) ax.ticks.push_back(static_cast<double>(i));
  Chart mem("simulate-memory", "Memory of one GPU per pipeline stage, GiB", ax,
            detail::fit_axis("GiB", ys, true), 900, 460);
  const double bar = std::min(90.0, (mem.right() - mem.left()) / n * 0.6);
  bool fp8 = false, frag = false;
  for (const StageMemory& s : page.memory) {
    const double cx = mem.px(s.stage);
    double acc = 0;
    mem.marks() << "<g class=\"stage-bar\"" << ref_attr(s.ref) << dv("reserved_gib", s.reserved_gib);
    for (const Part& p : parts) mem.marks() << dv(p.key, s.*p.field);
    mem.marks() << ">\n";
    for (const Part& p : parts) {
      const double v = s.*p.field;
      if (v <= 0) continue;
      fp8 = fp8 || p.field == &StageMemory::fp8_cache_gib;
      mem.marks() << "<rect x=\"" << cx - bar / 2 << "\" y=\"" << mem.py(acc + v) << "\" width=\"" << bar
                  << "\" height=\"" << mem.py(acc) - mem.py(acc + v) << "\" fill=\"" << p.colour
                  << "\" stroke=\"#fff\" stroke-width=\"0.5\"><title>stage " << s.stage << ' ' << p.label << ": "
                  << fixed(v, 2) << " GiB</title></rect>\n";
      acc += v;
    }
    if (s.reserved_gib > acc + 1e-9) {  // allocator fragmentation up to the reserved peak
      frag = true;
      mem.marks() << "<rect x=\"" << cx - bar / 2 << "\" y=\"" << mem.py(s.reserved_gib) << "\" width=\"" << bar
                  << "\" height=\"" << mem.py(acc) - mem.py(s.reserved_gib)
                  << "\" fill=\"#ddd\" stroke=\"#999\" stroke-width=\"0.5\"><title>stage " << s.stage
                  << " fragmentation: " << fixed(s.reserved_gib - acc, 2) << " GiB</title></rect>\n";
    }
    mem.marks() << "</g>\n";
    mem.overlay() << "<text class=\"ref-text\" x=\"" << cx << "\" y=\"" << mem.py(s.reserved_gib) - 4
                  << "\" text-anchor=\"middle\" fill=\"#222\">" << fixed(s.reserved_gib, 1) << "</text>\n";
  }
  hline(mem, page.capacity_gib, kCapacity, "capacity " + number(page.capacity_gib) + " GiB");
  if (page.usable_gib) hline(mem, *page.usable_gib, kMargin, "planning margin " + number(*page.usable_gib) + " GiB");
  std::vector<LegendEntry> legend;
  for (const Part& p : parts) {
    if (p.field != &StageMemory::fp8_cache_gib || fp8) legend.push_back({p.label, p.colour, "box"});
  }
  if (frag) legend.push_back({"fragmentation", "#ddd", "box"});
  legend.push_back({"capacity", kCapacity, "line"});
  if (page.usable_gib) legend.push_back({"planning margin", kMargin, "line"});
  o << "<h2>Memory per stage</h2>\n<p class=\"note\">Peak reserved memory of one GPU of each pipeline stage at the "
       "simulated number of micro-batches in flight, by what holds it.</p>\n"
    << "<div" << ref_attr(page.memory_ref) << dv("capacity_gib", page.capacity_gib)
    << (page.usable_gib ? dv("usable_gib", *page.usable_gib) : "") << ">\n"
    << mem.svg(legend) << "</div>\n";

  o << simulate_timeline(page);
  o << tail();
  return o.str();
}

}  // namespace tetra::report
