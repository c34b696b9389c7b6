// The plan page: the verdict (what to rent, for how long, at what cost, and whether it meets
// the limits at the band's slow end), days against cost, the scaling curves and the table.

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <sstream>

#include "page_parts.hpp"

namespace tetra::report {

namespace {

using detail::Axis;
using detail::Chart;
using detail::dv;
using detail::fixed;
using detail::grouped;
using detail::LegendEntry;
using detail::ref_attr;
using detail::si;

constexpr const char* kChosen = "#2c6e49";  // the verdict's candidate, as the verdict box's border

const PlanCandidate* by_id(const PlanPage& page, const std::optional<std::size_t>& id) {
  if (!id) return nullptr;
  for (const PlanCandidate& c : page.candidates) {
    if (c.id == *id && c.fits) return &c;
  }
  return nullptr;
}

/// GPU types in order of first appearance: the legend's order.
std::vector<std::string> gpu_types(const PlanPage& page) {
  std::vector<std::string> out;
  for (const PlanCandidate& c : page.candidates) {
    if (std::find(out.begin(), out.end(), c.gpu) == out.end()) out.push_back(c.gpu);
  }
  return out;
}

std::string swatch(const std::string& gpu) {
  return "<span class=\"swatch\" style=\"background:" + gpu_colour(gpu) + "\"></span>";
}

/// "dgx-h100 × 8192 GPUs (h100-sxm-80gb)", the numbers it names carried for the comparison.
std::string who(const PlanCandidate& c) {
  return "<span" + ref_attr(c.ref) + dv("id", static_cast<double>(c.id)) + dv("gpus", c.gpus) + ">" +
         swatch(c.gpu) + "<b>" + escape(c.name) + "</b> × <b>" + std::to_string(c.gpus) + " GPUs</b> (" +
         escape(c.gpu) + ")</span>";
}

/// Megawatt-hours: whole ones (thin-space grouped) from 100 up, one decimal below.
std::string mwh(double x) { return x < 100 ? fixed(x, 1) : grouped(x); }

/// "45.2 days, cost 38.1 M, energy 25 764 MWh" (GPU-hours without prices).
std::string days_and_cost(const PlanCandidate& c, bool priced) {
  std::string s = "<span" + ref_attr(c.ref) + (c.days ? dv("days", *c.days) : "") +
                  (priced && c.cost ? dv("cost", *c.cost) : "") + (!priced && c.gpu_hours ? dv("gpu_hours", *c.gpu_hours) : "") +
                  (c.energy_mwh ? dv("energy_mwh", *c.energy_mwh) : "") + ">" +
                  (c.days ? fixed(*c.days, 1) + " days" : std::string("never finishes"));
  if (priced && c.cost) s += ", cost " + si(*c.cost);
  if (!priced && c.gpu_hours) s += ", " + si(*c.gpu_hours) + " GPU-hours";
  if (c.energy_mwh) s += ", energy " + mwh(*c.energy_mwh) + " MWh";
  return s + "</span>";
}

/// Whether `c` meets a limit at the prediction and at the band's slow end.
std::string limit_line(const char* what, double limit, const std::string& limit_text, double at, const std::string& at_text,
                       const std::optional<double>& slow, const std::string& slow_text) {
  const bool ok = at <= limit;
  std::string s = std::string("<p class=\"limit\">") + what + " " + limit_text + ": ";
  s += ok ? "<span class=\"ok\">met</span> at the prediction (" + at_text + ")"
          : "<span class=\"no\">missed</span> at the prediction (" + at_text + ")";
  if (slow) {
    const bool slow_ok = *slow <= limit;
    s += std::string(ok == slow_ok ? " and " : " but ") +
         (slow_ok ? "<span class=\"ok\">met</span>" : "<span class=\"no\">missed</span>") +
         " at the band's slow end (" + slow_text + ")";
  }
  return s + ".</p>\n";
}

std::string band_line(const PlanCandidate& c, const PlanPage& page) {
  if (!c.days_low || !c.days_high) return "<p>No step-time band: " + escape(page.band_basis) + ".</p>\n";
  std::string s = "<p class=\"band\">Band: <span" + ref_attr(c.ref + "/days_band") + dv("low", *c.days_low) +
                  dv("high", *c.days_high) + ">" + fixed(*c.days_low, 1) + " to " + fixed(*c.days_high, 1) +
                  " days</span>";
  if (page.priced && c.cost_low && c.cost_high) {
    s += ", cost <span" + ref_attr(c.ref + "/cost_band") + dv("low", *c.cost_low) + dv("high", *c.cost_high) + ">" +
         si(*c.cost_low) + " to " + si(*c.cost_high) + "</span>";
  }
  if (c.energy_low && c.energy_high) {
    s += ", energy <span" + ref_attr(c.ref + "/energy_band") + dv("low", *c.energy_low) + dv("high", *c.energy_high) +
         ">" + mwh(*c.energy_low) + " to " + mwh(*c.energy_high) + " MWh</span>";
  }
  return s + " (the step time's band: " + escape(page.band_basis) + ").</p>\n";
}

std::string plan_verdict(const PlanPage& page) {
  const PlanCandidate* chosen = by_id(page, page.recommended);
  const PlanCandidate* fastest = by_id(page, page.fastest);
  const PlanCandidate* cheapest = by_id(page, page.cheapest);
  const std::string limits = page.deadline_days && page.budget ? "the deadline and the budget"
                             : page.deadline_days             ? "the deadline"
                             : page.budget                    ? "the budget"
                                                              : "";
  std::ostringstream o;
  o << "<div id=\"plan-verdict\" class=\"verdict" << (chosen ? "" : " miss") << "\""
    << (page.recommended ? ref_attr("/verdict") + dv("recommended", static_cast<double>(*page.recommended)) : "")
    << ">\n";
  if (chosen) {
    o << "<h2>Rent " << who(*chosen) << "</h2>\n<p class=\"big\">" << days_and_cost(*chosen, page.priced);
    if (page.priced && chosen->price_per_gpu_hour) {
      o << " <span class=\"currency\">(in the currency of the prices: " << fixed(*chosen->price_per_gpu_hour, 2)
        << " per GPU-hour here)</span>";
    }
    o << "</p>\n" << band_line(*chosen, page);
    if (page.deadline_days && chosen->days) {
      o << limit_line("Deadline", *page.deadline_days, fixed(*page.deadline_days, 0) + " days", *chosen->days,
                      fixed(*chosen->days, 1) + " days", chosen->days_high,
                      chosen->days_high ? fixed(*chosen->days_high, 1) + " days" : "");
    }
    if (page.priced && page.budget && chosen->cost) {
      o << limit_line("Budget", *page.budget, si(*page.budget), *chosen->cost, si(*chosen->cost), chosen->cost_high,
                      chosen->cost_high ? si(*chosen->cost_high) : "");
    }
    o << "<p>Why: the " << (page.priced ? "cheapest" : "fastest") << " candidate"
      << (limits.empty()           ? " (no deadline or budget set)"
          : chosen->days_high      ? " that meets " + limits + " at the band's slow end"
                                   : " that meets " + limits + " at the prediction (no band)")
      << "; its best layout <code>" << escape(chosen->layout) << "</code>.</p>\n";
  } else {
    o << "<h2>No candidate meets " << (limits.empty() ? "the plan" : limits) << "</h2>\n";
  }
  auto other = [&](const char* what, const PlanCandidate* c) {
    if (c == nullptr || c == chosen) return;
    o << "<p class=\"alt\">" << what << ": " << who(*c) << ", " << days_and_cost(*c, page.priced);
    if (c->days_high) o << " (" << fixed(*c->days_high, 1) + " days at the band's slow end)";
    o << ".</p>\n";
  };
  other("Fastest", fastest);
  if (page.priced) other("Cheapest", cheapest);
  o << "</div>\n";
  return o.str();
}

/// Days against cost (or GPU-hours): every candidate that finishes, its GPU count beside it,
/// whiskers to the days and cost at the band's ends, the Pareto front joined.
std::string plan_front(const PlanPage& page) {
  std::vector<const PlanCandidate*> points;
  std::vector<double> xs, ys;
  auto y_of = [&](const PlanCandidate& c) { return page.priced ? c.cost : c.gpu_hours; };
  for (const PlanCandidate& c : page.candidates) {
    if (!c.fits || !c.days || !y_of(c)) continue;
    points.push_back(&c);
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
  const std::string y_key = page.priced ? "cost" : "gpu_hours";
  Chart front("plan-days-cost",
              page.priced ? "Days against cost, every candidate; the Pareto front joined"
                          : "Days against GPU-hours, every candidate; the fastest marked",
              detail::fit_axis("days to train", xs, false, 8),
              detail::fit_axis(page.priced ? "cost" : "GPU-hours", ys, false, 8), 1000, 600);
  front.set_margins(78, 290);
  std::vector<const PlanCandidate*> pareto;
  for (const PlanCandidate* c : points) {
    if (c->pareto) pareto.push_back(c);
  }
  std::sort(pareto.begin(), pareto.end(), [](auto* a, auto* b) { return *a->days < *b->days; });
  if (page.deadline_days) detail::vline(front, *page.deadline_days, detail::kCapacity);
  if (page.priced && page.budget) detail::hline(front, *page.budget, detail::kMargin, "");
  if (pareto.size() > 1) {
    front.marks() << "<polyline class=\"pareto-front\" fill=\"none\" stroke=\"#222\" stroke-width=\"1.5\" points=\"";
    for (const PlanCandidate* c : pareto) front.marks() << front.px(*c->days) << ',' << front.py(*y_of(*c)) << ' ';
    front.marks() << "\"/>\n";
  }
  bool any_band = false;
  const PlanCandidate* chosen = by_id(page, page.recommended);
  for (const PlanCandidate* c : points) {
    const double x = front.px(*c->days), y = front.py(*y_of(*c));
    const std::string colour = gpu_colour(c->gpu);
    if (c->band.present() && c->step_time_s > 0) {
      any_band = true;
      const double lo = *c->band.step_time_low_s / c->step_time_s, hi = *c->band.step_time_high_s / c->step_time_s;
      front.marks() << "<line class=\"band\" x1=\"" << front.px(*c->days * lo) << "\" y1=\""
                    << front.py(*y_of(*c) * lo) << "\" x2=\"" << front.px(*c->days * hi) << "\" y2=\""
                    << front.py(*y_of(*c) * hi) << "\" stroke=\"" << colour
                    << "\" stroke-width=\"1.5\" stroke-opacity=\"0.45\"/>\n";
    }
    if (c == chosen) {
      front.marks() << "<circle class=\"chosen\" cx=\"" << x << "\" cy=\"" << y << "\" r=\"11\" fill=\"none\" stroke=\""
                    << kChosen << "\" stroke-width=\"3\"/>\n";
    }
    front.marks() << "<circle class=\"point" << (c->pareto ? " pareto" : "") << "\"" << ref_attr(c->ref)
                  << dv("id", static_cast<double>(c->id)) << dv("days", *c->days) << dv(y_key, *y_of(*c)) << " cx=\""
                  << x << "\" cy=\"" << y << "\" r=\"" << (c->pareto ? 6 : 4.5) << "\" fill=\"" << colour << "\""
                  << (c->pareto ? " stroke=\"#222\" stroke-width=\"2\"" : "") << "><title>"
                  << escape(c->name + " × " + std::to_string(c->gpus) + ": " + fixed(*c->days, 1) + " days, " +
                            (page.priced ? "cost " : "GPU-hours ") + grouped(*y_of(*c)))
                  << "</title></circle>\n";
  }
  // GPU counts beside the points: the first of four places that covers no earlier label
  // (Pareto points first, they matter most), else the first place.
  std::vector<const PlanCandidate*> labelled = points;
  std::stable_sort(labelled.begin(), labelled.end(), [](auto* a, auto* b) { return a->pareto && !b->pareto; });
  std::vector<std::array<double, 4>> boxes;  // x0, y0, x1, y1 of the labels placed
  for (const PlanCandidate* c : labelled) {
    const double x = front.px(*c->days), y = front.py(*y_of(*c));
    const std::string text = std::to_string(c->gpus);
    const double w = 6.0 * static_cast<double>(text.size()), h = 10;
    std::array<double, 4> place{};
    bool found = false;
    for (const auto& [dx, dy] : {std::pair{7.0, -6.0}, {7.0, 13.0}, {-7.0 - w, -6.0}, {-7.0 - w, 13.0}}) {
      place = {x + dx, y + dy - h, x + dx + w, y + dy};
      found = std::none_of(boxes.begin(), boxes.end(), [&](const auto& b) {
        return place[0] < b[2] && b[0] < place[2] && place[1] < b[3] && b[1] < place[3];
      });
      if (found) break;
    }
    if (!found) place = {x + 7, y - 6 - h, x + 7 + w, y - 6};
    boxes.push_back(place);
    front.overlay() << "<text class=\"count\" x=\"" << place[0] << "\" y=\"" << place[3] << "\" fill=\""
                    << gpu_colour(c->gpu) << "\">" << text << "</text>\n";
  }
  std::vector<LegendEntry> legend;
  for (const std::string& g : gpu_types(page)) legend.push_back({g, gpu_colour(g), "dot"});
  legend.push_back({page.priced ? "Pareto front" : "fastest", "#222", "front"});
  if (chosen) legend.push_back({"the verdict's choice", kChosen, "front"});
  if (any_band) legend.push_back({page.priced ? "band: days and cost at its ends" : "band: days and GPU-hours at its ends", "#555", "whisker"});
  if (page.deadline_days) {
    legend.push_back({"deadline " + detail::with_unit(*page.deadline_days, "days"), detail::kCapacity, "line"});
  }
  if (page.priced && page.budget) legend.push_back({"budget " + si(*page.budget), detail::kMargin, "line"});
  std::ostringstream o;
  o << "<h2>Days and cost</h2>\n<p class=\"note\">One point per candidate cluster and GPU count with a layout "
       "that fits, at its best layout, labelled with its GPU count and coloured by GPU type; outlined points are "
       "on the "
    << (page.priced ? "Pareto front (no other candidate is both faster and cheaper)" : "front (fastest)")
    << (any_band ? "; whiskers reach the days and cost at the step-time band's ends" : "")
    << ". Candidates that never finish are in the table only.</p>\n"
    << front.svg(legend);
  return o.str();
}

/// Tokens/s against GPU count, one curve per GPU type, the band shaded, and the ideal linear
/// scaling from each type's smallest count.
std::string plan_scaling(const PlanPage& page) {
  std::vector<double> gx, gy;
  std::set<double> counts;
  const std::vector<std::string> gpus = gpu_types(page);
  std::vector<std::vector<const PlanCandidate*>> curves;
  for (const std::string& g : gpus) {
    std::vector<const PlanCandidate*> curve;
    for (const PlanCandidate& c : page.candidates) {
      if (c.fits && c.gpu == g) curve.push_back(&c);
    }
    std::sort(curve.begin(), curve.end(), [](auto* a, auto* b) { return a->gpus < b->gpus; });
    for (const PlanCandidate* c : curve) {
      gx.push_back(c->gpus);
      counts.insert(c->gpus);
      gy.push_back(c->tokens_per_s);
      if (c->band.present() && *c->band.step_time_low_s > 0) {
        gy.push_back(c->tokens_per_s * c->step_time_s / *c->band.step_time_low_s);
        gy.push_back(c->tokens_per_s * c->step_time_s / *c->band.step_time_high_s);
      }
    }
    if (!curve.empty()) gy.push_back(curve.front()->tokens_per_s * curve.back()->gpus / curve.front()->gpus);
    curves.push_back(std::move(curve));
  }
  Axis ax = detail::fit_axis("GPUs", gx, false, 1.5);
  if (ax.log && counts.size() <= 12) ax.ticks.assign(counts.begin(), counts.end());
  Chart scaling("plan-scaling", "Throughput against GPU count, per GPU type", ax,
                detail::fit_axis("tokens/s", gy, !ax.log, ax.log ? 1.5 : 0), 1000, 480);
  scaling.set_margins(78, 290);
  bool any_band = false, any_ideal = false;
  for (std::size_t k = 0; k < gpus.size(); ++k) {
    const auto& curve = curves[k];
    const std::string colour = gpu_colour(gpus[k]);
    // Band: tokens/s at the high and the low step time, where every point of the curve has one.
    const bool banded = !curve.empty() && std::all_of(curve.begin(), curve.end(), [](auto* c) {
      return c->band.present() && *c->band.step_time_low_s > 0 && *c->band.step_time_high_s > 0;
    });
    if (banded) {
      any_band = true;
      scaling.marks() << "<polygon class=\"band\" fill=\"" << colour << "\" fill-opacity=\"0.18\" stroke=\"none\" points=\"";
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
      any_ideal = true;
      const PlanCandidate& a = *curve.front();
      const double ideal = a.tokens_per_s * curve.back()->gpus / a.gpus;
      scaling.marks() << "<line class=\"ideal\" x1=\"" << scaling.px(a.gpus) << "\" y1=\"" << scaling.py(a.tokens_per_s)
                      << "\" x2=\"" << scaling.px(curve.back()->gpus) << "\" y2=\"" << scaling.py(ideal) << "\" stroke=\""
                      << colour << "\" stroke-width=\"1.5\" stroke-dasharray=\"2 4\"/>\n";
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
  for (const std::string& g : gpus) legend.push_back({g, gpu_colour(g), "dot"});
  if (any_ideal) legend.push_back({"ideal linear from the smallest count", "#555", "line"});
  if (any_band) legend.push_back({"step-time band", "#555", "band"});
  std::ostringstream o;
  o << "<h2>Scaling</h2>\n<p class=\"note\">Tokens per second of each candidate's best layout against its GPU "
       "count; one curve per GPU type"
    << (any_ideal ? ", dotted: linear scaling from the type's smallest count" : "")
    << (any_band ? ", shaded between the throughput at the high and the low step time" : "") << ".</p>\n"
    << scaling.svg(legend);
  return o.str();
}

/// What MFU divides by and what the energy counts, per GPU type, under the table.
std::string plan_table_note(const PlanPage& page) {
  std::string peaks, power;
  std::vector<std::string> seen;
  for (const PlanCandidate& c : page.candidates) {
    if (!c.fits || std::find(seen.begin(), seen.end(), c.gpu) != seen.end()) continue;
    seen.push_back(c.gpu);
    peaks += (peaks.empty() ? "" : ", ") + escape(c.gpu) + " " + fixed(c.mfu_peak_tflops, 0);
    power += (power.empty() ? "" : ", ") + escape(c.gpu) + " " + (c.gpu_power_w > 0 ? fixed(c.gpu_power_w, 0) + " W" : "unknown");
  }
  if (seen.empty()) return "";
  return "<p class=\"note\">MFU: model FLOPs per second over the GPU's dense BF16 peak (" + peaks +
         " TFLOP/s); HFU: the same with the forward FLOPs that recomputation runs again. Energy: the GPUs at their "
         "power limit (" + power + ") for the days shown, times PUE " + fixed(page.pue, 2) +
         "; the rest of each node is not counted.</p>\n";
}

/// Every candidate, by days (those without a layout or that never finish last).
std::string plan_table(const PlanPage& page) {
  std::vector<const PlanCandidate*> rows;
  for (const PlanCandidate& c : page.candidates) rows.push_back(&c);
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) {
    const double da = a->fits && a->days ? *a->days : HUGE_VAL, db = b->fits && b->days ? *b->days : HUGE_VAL;
    return da < db;
  });
  std::ostringstream o;
  o << "<h2>Candidates</h2>\n<table id=\"plan-table\">\n<tr><th class=\"text\">candidate</th><th>GPUs</th>"
       "<th class=\"text\">best layout</th><th>step s</th><th>tokens/s<br>per GPU</th><th>MFU %</th>"
       "<th>HFU %</th><th>days</th><th>days band</th><th>GPU-hours</th><th>MWh</th>"
    << (page.priced ? "<th>cost</th>" : "") << "<th class=\"text\">front</th>"
    << (page.deadline_days ? "<th class=\"text\">deadline</th>" : "")
    << (page.budget ? "<th class=\"text\">budget</th>" : "") << "</tr>\n";
  for (const PlanCandidate* c : rows) {
    o << "<tr" << (c->pareto ? " class=\"pareto\"" : "") << ref_attr(c->ref) << dv("id", static_cast<double>(c->id))
      << "><td class=\"text\">" << swatch(c->gpu) << escape(c->name) << "</td><td>" << c->gpus << "</td>";
    if (!c->fits) {
      o << "<td class=\"text\" colspan=\"" << 10 + (page.priced ? 1 : 0) + (page.deadline_days ? 1 : 0) + (page.budget ? 1 : 0)
        << "\">no layout fits the memory budget</td></tr>\n";
      continue;
    }
    auto opt = [](const std::optional<double>& v, int digits) { return v ? fixed(*v, digits) : std::string("never"); };
    // Tokens/s per GPU: the scaling chart shows the totals.
    o << "<td class=\"text\">" << escape(c->layout) << "</td><td>" << fixed(c->step_time_s, 3) << "</td><td"
      << ref_attr(c->ref) << dv("tokens_per_s_per_gpu", c->tokens_per_s_per_gpu)
      << ">" << grouped(c->tokens_per_s_per_gpu) << "</td><td>" << fixed(c->mfu * 100, 1) << "</td><td"
      << ref_attr(c->ref) << dv("hfu", c->hfu) << ">" << fixed(c->hfu * 100, 1) << "</td><td>" << opt(c->days, 1)
      << "</td><td>" << (c->days_low && c->days_high ? fixed(*c->days_low, 1) + " – " + fixed(*c->days_high, 1) : "")
      << "</td><td>" << (c->gpu_hours ? grouped(*c->gpu_hours) : "never") << "</td><td"
      << (c->energy_mwh ? ref_attr(c->ref) + dv("energy_mwh", *c->energy_mwh) : "") << ">"
      << (c->energy_mwh ? mwh(*c->energy_mwh) : "") << "</td>";
    if (page.priced) o << "<td>" << (c->cost ? grouped(*c->cost) : "never") << "</td>";
    o << "<td class=\"text\">" << (c->pareto ? "yes" : "") << "</td>";
    if (page.deadline_days) o << "<td class=\"text\">" << escape(c->deadline_verdict.value_or("")) << "</td>";
    if (page.budget) o << "<td class=\"text\">" << escape(c->budget_verdict.value_or("")) << "</td>";
    o << "</tr>\n";
  }
  o << "</table>\n" << plan_table_note(page);
  return o.str();
}

}  // namespace

std::string plan_html(const PlanPage& page) {
  return detail::head(page.title) + plan_verdict(page) + detail::facts_table(page.facts) + plan_front(page) +
         plan_scaling(page) + plan_table(page) + detail::tail();
}

}  // namespace tetra::report
