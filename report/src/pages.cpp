// The pages' shared skeleton (inline CSS, summary facts, number formats) and the search page.
// Marks and cells carry their numbers in data-v-* attributes (report.hpp).

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "page_parts.hpp"

namespace tetra::report {

namespace detail {

namespace {

constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222;
       margin: 24px 32px; max-width: 1340px; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 17px; margin: 28px 0 6px; border-bottom: 1px solid #ddd; padding-bottom: 3px; }
p.note { color: #555; margin: 4px 0 10px; max-width: 960px; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 13px; }
th, td { padding: 3px 8px; border-bottom: 1px solid #e6e6e6; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; font-weight: 600; }
#plan-table th, #plan-table td { padding: 3px 5px; }
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
svg .count { font-size: 10px; fill: #333; }
p.sub { margin: -6px 0 12px; color: #333; }
p.sub code, .verdict code { font: 13px ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace;
       background: #f2f2f2; padding: 1px 5px; border-radius: 3px; }
.verdict { border: 2px solid #2c6e49; background: #f1f8f3; border-radius: 6px; padding: 10px 16px;
       margin: 4px 0 16px; max-width: 1100px; }
.verdict.miss { border-color: #B22222; background: #fbf0f0; }
.verdict h2 { border: none; margin: 0 0 4px; padding: 0; font-size: 18px; }
.verdict p { margin: 3px 0; }
.verdict .big { font-size: 17px; }
.verdict .ok { color: #2c6e49; font-weight: 600; }
.verdict .no { color: #B22222; font-weight: 600; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 50%; margin-right: 5px;
       vertical-align: -1px; }
)";

}  // namespace

std::string dv(const std::string& key, double value) { return " data-v-" + key + "=\"" + number(value) + "\""; }
std::string ref_attr(const std::string& ref) { return " data-ref=\"" + escape(ref) + "\""; }

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

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

std::string si(double x) {
  if (!std::isfinite(x)) return number(x);
  static const std::pair<double, const char*> steps[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  for (const auto& [scale, suffix] : steps) {
    const double v = std::abs(x) / scale;
    if (v >= 1) return fixed(x / scale, v >= 100 ? 0 : v >= 10 ? 1 : 2) + " " + suffix;
  }
  return std::abs(x) >= 100 || x == std::round(x) ? fixed(x, 0) : fixed(x, 2);
}

std::string seconds(double s) {
  const double a = std::abs(s);
  if (a == 0) return "0 s";
  if (a >= 1) return fixed(s, a >= 100 ? 1 : a >= 10 ? 2 : 3) + " s";
  const double ms = s * 1e3;
  return fixed(ms, std::abs(ms) >= 100 ? 0 : std::abs(ms) >= 10 ? 1 : 2) + " ms";
}

std::string with_unit(double v, const std::string& unit) {
  if (unit == "s") return seconds(v);
  if (unit == "%") return fixed(v * 100, 1) + " %";
  if (unit == "GiB") return fixed(v, std::abs(v) >= 100 ? 1 : 2) + " GiB";
  if (unit == "TFLOP/s") return fixed(v, 1) + " TFLOP/s";
  if (unit == "days") return fixed(v, 1) + " days";
  if (unit == "SI") return si(v);
  const std::string n = std::abs(v) >= 1e4 ? grouped(v) : number(v);
  return unit.empty() ? n : n + " " + unit;
}

std::string head(const std::string& title, const std::string& subtitle) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + escape(title) +
         "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<h1>" + escape(title) + "</h1>\n" +
         (subtitle.empty() ? "" : "<p class=\"sub\">" + subtitle + "</p>\n");
}

std::string tail() { return "</body>\n</html>\n"; }

std::string facts_table(const std::vector<Fact>& facts) {
  std::ostringstream o;
  o << "<table class=\"facts\">\n";
  for (const Fact& f : facts) {
    o << "<tr><th>" << escape(f.label) << "</th><td" << ref_attr(f.ref) << dv(f.key, f.value) << ">"
      << escape(with_unit(f.value, f.unit)) << "</td></tr>\n";
  }
  o << "</table>\n";
  return o.str();
}

void vline(Chart& c, double x, const std::string& colour) {
  c.marks() << "<line class=\"ref\" x1=\"" << c.px(x) << "\" x2=\"" << c.px(x) << "\" y1=\"" << c.top() << "\" y2=\""
            << c.bottom() << "\" stroke=\"" << colour << "\"/>\n";
}

void hline(Chart& c, double y, const std::string& colour, const std::string& text) {
  c.marks() << "<line class=\"ref\" x1=\"" << c.left() << "\" x2=\"" << c.right() << "\" y1=\"" << c.py(y)
            << "\" y2=\"" << c.py(y) << "\" stroke=\"" << colour << "\"/>\n";
  if (text.empty()) return;
  c.overlay() << "<text class=\"ref-text\" x=\"" << c.right() - 4 << "\" y=\"" << c.py(y) - 4
              << "\" text-anchor=\"end\" fill=\"" << colour << "\">" << escape(text) << "</text>\n";
}

const std::string& Colours::of(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    it = index_.emplace(name, order_.size()).first;
    order_.push_back(name);
  }
  return palette(it->second);
}

}  // namespace detail

using namespace detail;

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
  if (std::any_of(page.layouts.begin(), page.layouts.end(), [](const RankedLayout& l) { return l.band.present(); })) {
    legend.push_back({"band: tokens/s at its ends", "#555", "whisker"});
  }
  if (page.budget_gib) legend.push_back({"budget " + number(*page.budget_gib) + " GiB", kMargin, "line"});
  if (page.capacity_gib) legend.push_back({"capacity " + number(*page.capacity_gib) + " GiB", kCapacity, "line"});
  o << "<h2>Throughput and memory</h2>\n<p class=\"note\">Every ranked layout, coloured by pipeline schedule; the "
    << page.table_rows << " best are outlined"
    << (page.layouts.empty() ? "" : ", the best labelled #1") << ".</p>\n"
    << chart.svg(legend);

  o << "<h2>Top " << std::min(page.table_rows, page.layouts.size()) << " layouts</h2>\n<table id=\"search-table\">\n"
    << "<tr><th>rank</th><th class=\"text\">layout</th><th class=\"text\">schedule</th><th>step s</th>"
       "<th>tokens/s</th><th>tokens/s<br>per GPU</th><th>MFU %</th><th>HFU %</th><th>peak GiB</th></tr>\n";
  for (std::size_t i = 0; i < page.layouts.size() && i < page.table_rows; ++i) {
    const RankedLayout& l = page.layouts[i];
    o << "<tr" << ref_attr(l.ref) << " data-rank=\"" << l.rank << "\"" << dv("step_time_s", l.step_time_s)
      << dv("tokens_per_s", l.tokens_per_s) << dv("tokens_per_s_per_gpu", l.tokens_per_s_per_gpu) << dv("mfu", l.mfu)
      << dv("hfu", l.hfu) << dv("peak_gib", l.peak_gib) << "><td>" << l.rank << "</td><td class=\"text\">"
      << escape(l.layout) << "</td><td class=\"text\">" << escape(l.schedule) << "</td><td>"
      << fixed(l.step_time_s, 3) << "</td><td>" << grouped(l.tokens_per_s) << "</td><td>"
      << grouped(l.tokens_per_s_per_gpu) << "</td><td>" << fixed(l.mfu * 100, 1) << "</td><td>"
      << fixed(l.hfu * 100, 1) << "</td><td>" << fixed(l.peak_gib, 1) << "</td></tr>\n";
  }
  o << "</table>\n";
  if (!page.mfu_peak.empty()) {
    o << "<p class=\"note\">MFU: model FLOPs per second over the GPU's " << escape(page.mfu_peak)
      << "; HFU: the same with the forward FLOPs that recomputation runs again.</p>\n";
  }
  o << tail();
  return o.str();
}

}  // namespace tetra::report
