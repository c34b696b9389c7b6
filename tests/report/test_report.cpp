// The pure parts of the HTML reports: escaping, numbers, axis ticks, slice merging, and what
// the pages draw from hand-made inputs (Pareto marking, bands, self-containment).

#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tetra/report/report.hpp"

using tetra::test::approx;

namespace {

using namespace tetra::report;

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
  return n;
}

/// The svg element with id `id` in `html` ("" when absent).
std::string svg_of(const std::string& html, const std::string& id) {
  const std::size_t a = html.find("<svg id=\"" + id + "\"");
  if (a == std::string::npos) return "";
  return html.substr(a, html.find("</svg>", a) - a);
}

PlanCandidate candidate(std::size_t id, const std::string& gpu, int gpus, double days, double cost, bool pareto) {
  PlanCandidate c;
  c.ref = "/candidates/" + std::to_string(id);
  c.id = id;
  c.name = gpu + " cluster";
  c.gpu = gpu;
  c.gpus = gpus;
  c.fits = true;
  c.layout = "tp1 cp1 pp1 dp8 mbs1 1f1b";
  c.step_time_s = 1.0;
  c.tokens_per_s = 1000.0 * gpus;
  c.mfu = 0.4;
  c.days = days;
  c.gpu_hours = days * 24 * gpus;
  c.cost = cost;
  c.pareto = pareto;
  return c;
}

/// No script, no external reference: the page opens offline.
void check_self_contained(const std::string& html) {
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("href=") == std::string::npos);
  // The only URL is the SVG namespace name, which is never fetched.
  CHECK(count(html, "http") == count(html, "http://www.w3.org/2000/svg"));
}

}  // namespace

TEST_SUITE("report") {

TEST_CASE("escape: markup characters become entities, other text is kept") {
  CHECK(escape("a<b> & \"c\" 'd'") == "a&lt;b&gt; &amp; &quot;c&quot; &#39;d&#39;");
  CHECK(escape("h200 spot × 8") == "h200 spot × 8");
  CHECK(escape("") == "");
}

TEST_CASE("number: the shortest text that reads back as the same double") {
  for (double x : {0.1, 53.376, 15.857533, 86059.98979564226, 1e-9, 2e20, 0.0, -3.25}) {
    CAPTURE(x);
    CHECK(std::stod(number(x)) == x);
  }
  CHECK(number(0.1) == "0.1");
  CHECK(number(64) == "64");
  CHECK(number(std::nan("")) == "nan");
  CHECK(number(HUGE_VAL) == "inf");
}

TEST_CASE("linear ticks: 1-2-5 steps inside the range") {
  const std::vector<double> t = linear_ticks(0, 83.6);
  REQUIRE(t.size() >= 4);
  CHECK(t.front() == 0);
  CHECK(t[1] - t[0] == approx(20));
  CHECK(t.back() <= 83.6);
  const std::vector<double> small = linear_ticks(0.013, 0.0171);
  REQUIRE(small.size() >= 2);
  for (double v : small) CHECK((v >= 0.013 - 1e-12 && v <= 0.0171 + 1e-12));
  SUBCASE("negative ranges and zero") {
    const std::vector<double> n = linear_ticks(-7, 3);
    CHECK(std::find(n.begin(), n.end(), 0.0) != n.end());
  }
  SUBCASE("an empty range gives its one value") { CHECK(linear_ticks(5, 5) == std::vector<double>{5}); }
}

TEST_CASE("log ticks: 1-2-5 per decade over a short range, decades over a long one") {
  CHECK(log_ticks(30, 2500) == std::vector<double>{50, 100, 200, 500, 1000, 2000});
  CHECK(log_ticks(0.5, 5e6) == std::vector<double>{1, 10, 100, 1000, 1e4, 1e5, 1e6});
  CHECK(log_ticks(3, 4).size() == 2);  // no 1-2-5 value inside: the ends
  CHECK(log_ticks(0, 10).empty());
}

TEST_CASE("merge_slices: same-kind neighbours closer than the gap join, others stay") {
  const std::vector<Slice> in{{2.0, 3.0, "tp"}, {0.0, 1.0, "tp"}, {1.05, 1.5, "tp"}, {1.5, 1.9, "F"}, {3.5, 4, "tp"}};
  const std::vector<Slice> out = merge_slices(in, 0.1);
  REQUIRE(out.size() == 4);
  CHECK(out[0].start_s == 0.0);
  CHECK(out[0].end_s == 1.5);  // 0-1 and 1.05-1.5 joined
  CHECK(out[1].kind == "F");
  CHECK(out[2].start_s == 2.0);  // not joined across the F slice
  CHECK(out[3].start_s == 3.5);  // 0.5 s apart: kept
}

TEST_CASE("plan page: Pareto points outlined and joined in order of days, deadline and budget drawn") {
  PlanPage page;
  page.title = "plan <test>";
  page.priced = true;
  page.deadline_days = 20;
  page.budget = 5000;
  page.candidates = {candidate(0, "h100", 8, 30, 3000, true), candidate(1, "h100", 16, 16, 3100, true),
                     candidate(2, "a100", 8, 40, 4000, false), candidate(3, "a100", 16, 10, 6000, true)};
  PlanCandidate none;
  none.ref = "/candidates/4";
  none.id = 4;
  none.name = "tiny";
  none.gpu = "a100";
  none.gpus = 4;
  page.candidates.push_back(none);
  const std::string html = plan_html(page);
  check_self_contained(html);
  CHECK(html.find("<title>plan &lt;test&gt;</title>") != std::string::npos);
  const std::string front = svg_of(html, "plan-days-cost");
  REQUIRE(!front.empty());
  CHECK(count(front, "class=\"point pareto\"") == 3);
  CHECK(count(front, "class=\"point\"") == 1);
  CHECK(count(front, "class=\"pareto-front\"") == 1);
  // The front's polyline visits the Pareto points by days: 10, 16, 30 (x grows along it).
  const std::size_t pl = front.find("class=\"pareto-front\"");
  const std::size_t pts = front.find("points=\"", pl) + 8;
  std::vector<double> xs;
  for (std::size_t p = pts; front[p] != '"';) {
    xs.push_back(std::stod(front.substr(p)));
    p = front.find(' ', p) + 1;
  }
  REQUIRE(xs.size() == 3);
  CHECK(xs[0] < xs[1]);
  CHECK(xs[1] < xs[2]);
  CHECK(front.find(">deadline 20.0 days</text>") != std::string::npos);  // legend
  CHECK(front.find(">budget 5.00 k</text>") != std::string::npos);
  CHECK(count(front, "class=\"ref\"") == 2);
  // Every plotted number is carried verbatim for the comparison with --json.
  CHECK(front.find("data-ref=\"/candidates/3\" data-v-id=\"3\" data-v-days=\"10\" data-v-cost=\"6000\"") !=
        std::string::npos);
  const std::string scaling = svg_of(html, "plan-scaling");
  CHECK(count(scaling, "class=\"point\"") == 4);  // the candidate without a layout is in the table only
  CHECK(count(scaling, "<polyline") == 2);       // one curve per GPU type
  CHECK(html.find("no layout fits the memory budget") != std::string::npos);
  SUBCASE("no band without both ends; a band per curve with them") {
    CHECK(count(scaling, "class=\"band\"") == 0);
    for (auto& c : page.candidates) {
      if (!c.fits) continue;
      c.band.step_time_low_s = 0.9;
      if (c.gpu == "h100") c.band.step_time_high_s = 1.2;
    }
    const std::string banded = plan_html(page);
    CHECK(count(svg_of(banded, "plan-scaling"), "class=\"band\"") == 1);    // h100 only: a100 lacks the high end
    CHECK(count(svg_of(banded, "plan-days-cost"), "class=\"band\"") == 2);  // whiskers of the two h100 points
  }
}

TEST_CASE("search page: one mark per layout coloured by schedule, the top N in the table") {
  SearchPage page;
  page.title = "search";
  page.capacity_gib = 80;
  page.budget_gib = 64;
  page.table_rows = 2;
  const char* schedules[] = {"1f1b", "interleaved", "1f1b"};
  for (int i = 0; i < 3; ++i) {
    RankedLayout l;
    l.ref = "/layouts/" + std::to_string(i);
    l.rank = i + 1;
    l.layout = "layout " + std::to_string(i);
    l.schedule = schedules[i];
    l.step_time_s = 10 + i;
    l.tokens_per_s = 70000 - 1000 * i;
    l.mfu = 0.5;
    l.peak_gib = 50 + i;
    page.layouts.push_back(l);
  }
  const std::string html = search_html(page);
  check_self_contained(html);
  const std::string svg = svg_of(html, "search-throughput-memory");
  CHECK(count(svg, "<circle class=\"point") == 3);
  CHECK(count(svg, "class=\"point top\"") == 2);
  // Same schedule, same colour; another schedule, another.
  auto fill_of = [&](const std::string& ref) {
    const std::size_t a = svg.find("data-ref=\"" + ref + "\"");
    const std::size_t f = svg.find("fill=\"", a) + 6;
    return svg.substr(f, svg.find('"', f) - f);
  };
  CHECK(fill_of("/layouts/0") == fill_of("/layouts/2"));
  CHECK(fill_of("/layouts/0") != fill_of("/layouts/1"));
  CHECK(svg.find(">1f1b</text>") != std::string::npos);  // legend
  CHECK(svg.find(">interleaved</text>") != std::string::npos);
  const std::size_t table = html.find("<table id=\"search-table\"");
  REQUIRE(table != std::string::npos);
  CHECK(count(html.substr(table), "<tr data-ref=") == 2);
}

TEST_CASE("simulate page: stacked memory bars under capacity and margin, bubbles and joined slices") {
  SimulatePage page;
  page.title = "simulate";
  page.step_time_s = 2;
  page.capacity_gib = 80;
  page.usable_gib = 64;
  for (int s = 0; s < 2; ++s) {
    StageMemory m;
    m.ref = "/stages/" + std::to_string(s) + "/memory";
    m.stage = s;
    m.params_gib = 4;
    m.grads_gib = 8;
    m.optimizer_gib = 12;
    m.activations_gib = 20 - 5 * s;
    m.buffers_gib = 2;
    m.reserved_gib = 50 - 5 * s;  // 4 GiB of fragmentation
    page.memory.push_back(m);
    StageTimeline t;
    t.ref = "/stages/" + std::to_string(s);
    t.stage = s;
    t.busy_s = 1.5;
    t.idle_s = 0.5;
    Lane compute{"compute", {{0.1, 0.8, "F"}, {0.8, 1.6, "B"}}};
    Lane tp{"tp comm", {}};
    for (int k = 0; k < 100; ++k) tp.slices.push_back({0.1 + k * 0.006, 0.1 + k * 0.006 + 0.005, "tp"});
    Lane cp{"cp comm", {}};  // no traffic: not drawn
    t.lanes = {compute, tp, cp};
    page.timeline.push_back(t);
  }
  const std::string html = simulate_html(page);
  check_self_contained(html);
  const std::string mem = svg_of(html, "simulate-memory");
  CHECK(count(mem, "class=\"stage-bar\"") == 2);
  CHECK(count(mem, "fragmentation: 4.00 GiB") == 2);  // 50 - 46 and 45 - 41
  CHECK(mem.find("capacity 80 GiB") != std::string::npos);
  CHECK(mem.find("planning margin 64 GiB") != std::string::npos);
  CHECK(mem.find("FP8 weight cache") == std::string::npos);  // no such part: not in the legend
  const std::string tl = svg_of(html, "simulate-timeline");
  CHECK(count(tl, "class=\"bubble\"") == 2);
  CHECK(tl.find(">cp comm<") == std::string::npos);
  // 100 TP slices 1 ms apart on a 2 s step (about 2 ms per pixel): joined into one per stage.
  const std::size_t marks = tl.find("<g class=\"marks\"");
  const std::string drawn = tl.substr(marks, tl.find("</g>", marks) - marks);
  CHECK(count(drawn, "<rect x=") == 2 * (2 + 1));  // per stage: F, B and one joined TP slice
  CHECK(count(tl, "class=\"band\"") == 0);
  SUBCASE("a step-time band shades where the step may end") {
    page.band.step_time_low_s = 1.9;
    page.band.step_time_high_s = 2.3;
    const std::string banded = svg_of(simulate_html(page), "simulate-timeline");
    CHECK(count(banded, "class=\"band\"") == 1);
    CHECK(banded.find(">step-time band</text>") != std::string::npos);
  }
}

TEST_CASE("plan page: the verdict says what to rent, for how long, its band and the limits at the slow end") {
  PlanPage page;
  page.title = "plan";
  page.priced = true;
  page.deadline_days = 20;
  page.budget = 5000;
  page.candidates = {candidate(0, "h100-sxm-80gb", 8, 30, 3000, true),
                     candidate(1, "h100-sxm-80gb", 16, 16, 3100, true),
                     candidate(2, "b200", 16, 10, 6000, true)};
  page.candidates[1].days_low = 14;
  page.candidates[1].days_high = 22;  // over the deadline at the band's slow end
  page.candidates[1].cost_low = 2800;
  page.candidates[1].cost_high = 4000;
  page.candidates[1].price_per_gpu_hour = 2.5;
  page.band_basis = "10th to 90th percentile";
  page.recommended = 1;
  page.fastest = 2;
  page.cheapest = 0;
  const std::string html = plan_html(page);
  check_self_contained(html);
  const std::size_t box = html.find("<div id=\"plan-verdict\" class=\"verdict\"");
  REQUIRE(box != std::string::npos);
  CHECK(box < html.find("<table class=\"facts\""));  // at the top
  const std::string verdict = html.substr(box, html.find("</div>", box) - box);
  CHECK(verdict.find("data-v-recommended=\"1\"") != std::string::npos);
  CHECK(verdict.find("<b>h100-sxm-80gb cluster</b> × <b>16 GPUs</b>") != std::string::npos);
  CHECK(verdict.find("16.0 days, cost 3.10 k") != std::string::npos);
  CHECK(verdict.find("2.50 per GPU-hour") != std::string::npos);
  CHECK(verdict.find("14.0 to 22.0 days") != std::string::npos);
  CHECK(verdict.find("2.80 k to 4.00 k") != std::string::npos);
  CHECK(verdict.find("Deadline 20 days: <span class=\"ok\">met</span> at the prediction (16.0 days) but "
                     "<span class=\"no\">missed</span> at the band's slow end (22.0 days)") != std::string::npos);
  CHECK(verdict.find("Budget 5.00 k: <span class=\"ok\">met</span> at the prediction (3.10 k) and "
                     "<span class=\"ok\">met</span> at the band's slow end (4.00 k)") != std::string::npos);
  CHECK(verdict.find("Fastest: ") != std::string::npos);  // another candidate: named too
  CHECK(verdict.find("Cheapest: ") != std::string::npos);
  SUBCASE("none meets the limits: the box says so") {
    page.recommended.reset();
    const std::string miss = plan_html(page);
    CHECK(miss.find("<div id=\"plan-verdict\" class=\"verdict miss\">") != std::string::npos);
    CHECK(miss.find("No candidate meets the deadline and the budget") != std::string::npos);
  }
}

TEST_CASE("plan page: one colour per GPU type in both charts, GPU counts on the points, ideal scaling") {
  PlanPage page;
  page.title = "plan";
  page.priced = true;
  page.candidates = {candidate(0, "b200", 8, 30, 3000, true), candidate(1, "h100-sxm-80gb", 8, 40, 2500, true),
                     candidate(2, "h100-sxm-80gb", 16, 22, 2800, true), candidate(3, "b200", 16, 16, 3300, true)};
  for (auto& c : page.candidates) {
    c.band.step_time_low_s = 0.9;
    c.band.step_time_high_s = 1.3;
  }
  const std::string html = plan_html(page);
  CHECK(gpu_colour("h100-sxm-80gb") != gpu_colour("b200"));
  CHECK(gpu_colour("my-gpu") == gpu_colour("my-gpu"));  // from the name alone
  for (const char* id : {"plan-days-cost", "plan-scaling"}) {
    const std::string svg = svg_of(html, id);
    CAPTURE(id);
    for (const PlanCandidate& c : page.candidates) {
      const std::size_t a = svg.find("data-ref=\"" + c.ref + "\"");
      REQUIRE(a != std::string::npos);
      const std::size_t f = svg.find("fill=\"", a) + 6;
      CHECK(svg.substr(f, svg.find('"', f) - f) == gpu_colour(c.gpu));
    }
    for (const char* g : {"b200", "h100-sxm-80gb"}) {  // legend entries in the GPU's colour
      CHECK(svg.find("data-colour=\"" + gpu_colour(g) + "\" ") != std::string::npos);
      CHECK(svg.find(std::string(">") + g + "</text>") != std::string::npos);
    }
  }
  const std::string front = svg_of(html, "plan-days-cost"), scaling = svg_of(html, "plan-scaling");
  CHECK(count(front, "class=\"count\"") == 4);
  CHECK(front.find(">16</text>") != std::string::npos);
  CHECK(count(front, "class=\"band\"") == 4);  // a whisker per point, named in the legend
  CHECK(front.find(">band: days and cost at its ends</text>") != std::string::npos);
  CHECK(count(scaling, "class=\"ideal\"") == 2);  // one per GPU type, from its smallest count
  CHECK(scaling.find(">ideal linear from the smallest count</text>") != std::string::npos);
}

TEST_CASE("bin_slices: columns in the colour of their busiest kind, empty below half busy") {
  std::vector<Slice> many;
  for (int k = 0; k < 400; ++k) {  // alternating F and B, then a quiet stretch
    many.push_back({k * 0.01, k * 0.01 + 0.006, "F"});
    many.push_back({k * 0.01 + 0.006, k * 0.01 + 0.0095, "B"});
  }
  many.push_back({5.0, 5.2, "optimizer"});
  const std::vector<Slice> bins = bin_slices(many, 0, 8, 100);
  REQUIRE(bins.size() == 2);  // F dominates every busy column: one run, then the optimizer
  CHECK(bins[0].kind == "F");
  CHECK(bins[0].start_s == approx(0.0));
  CHECK(bins[0].end_s == approx(4.0));
  CHECK(bins[1].kind == "optimizer");  // 5.0 .. 5.2 on 0.08 s columns: [4.96, 5.04) is half busy, kept
  CHECK(bins[1].start_s == approx(4.96));
  CHECK(bins[1].end_s == approx(5.2));
  CHECK(bin_slices(many, 0, 8, 0).empty());
}

TEST_CASE("simulate page: layout under the title, dense / expert bars, EP slices in their row, every exchange in the legend") {
  SimulatePage page;
  page.title = "simulate";
  page.layout = "tp4 cp1 pp2 dp8 mbs1 ep8 full 1f1b";
  page.step_time_s = 4;
  page.capacity_gib = 80;
  page.micro_batches = 400;
  page.exchanges = {{"TP", 4}, {"CP", 1}, {"EP", 8}, {"DP", 8}, {"PP", 2}};
  for (int s = 0; s < 2; ++s) {
    StageMemory m;
    m.ref = "/stages/" + std::to_string(s) + "/memory";
    m.stage = s;
    m.params_gib = 10;
    m.grads_gib = 10;
    m.optimizer_gib = 20;
    m.activations_gib = 8;
    m.expert_states_gib = 30;
    m.expert_activations_gib = 2;
    m.reserved_gib = 48;
    page.memory.push_back(m);
    StageTimeline t;
    t.ref = "/stages/" + std::to_string(s);
    t.stage = s;
    Lane compute{"compute", {}};
    for (int k = 0; k < 400; ++k) {
      compute.slices.push_back({k * 0.009, k * 0.009 + 0.004, "F"});
      compute.slices.push_back({k * 0.009 + 0.0045, k * 0.009 + 0.0085, "B"});
    }
    Lane ep{"ep comm", {{0.2, 0.21, "ep"}, {0.25, 0.26, "ep"}, {2.0, 2.02, "ep"}}};
    Lane pp{"pp send", {{1.0, 1.1, "send-forward"}}};
    t.lanes = {compute, ep, pp};
    page.timeline.push_back(t);
  }
  const std::string html = simulate_html(page);
  check_self_contained(html);
  CHECK(html.find("<code id=\"simulate-layout\">tp4 cp1 pp2 dp8 mbs1 ep8 full 1f1b</code>") < html.find("<table"));
  const std::string mem = svg_of(html, "simulate-memory");
  CHECK(count(mem, "class=\"expert-split\"") == 2);
  CHECK(count(mem, "expert weights, gradients, optimizer: 30.00 GiB") == 2);
  CHECK(count(mem, "dense weights, gradients, optimizer: 10.00 GiB") == 2);  // 40 - 30
  CHECK(count(mem, "expert activations: 2.00 GiB") == 2);
  CHECK(mem.find(">expert activations</text>") != std::string::npos);  // legend
  const std::string tl = svg_of(html, "simulate-timeline");
  CHECK(count(tl, ">ep comm</text>") == 2);  // the EP row draws its slices, in the EP colour
  CHECK(count(tl, "fill=\"#CC79A7\"/>") == 6);
  CHECK(tl.find(">EP dispatch / combine</text>") != std::string::npos);
  CHECK(tl.find(">EP: no traffic") == std::string::npos);
  CHECK(tl.find(">PP send activation</text>") != std::string::npos);
  CHECK(tl.find(">CP: no traffic (size 1)</text>") != std::string::npos);
  CHECK(tl.find(">TP: no traffic (not in this step)</text>") != std::string::npos);
  // 800 compute slices a stage: binned, and the page says so.
  CHECK(html.find("id=\"timeline-binned\"") != std::string::npos);
  const std::size_t marks = tl.find("<g class=\"marks\"");
  const std::string drawn = tl.substr(marks, tl.find("</g>", marks) - marks);
  CHECK(count(drawn, "<rect x=") < 100);
}

}  // TEST_SUITE
