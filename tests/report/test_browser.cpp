// The --html pages of simulate, search and plan rendered by headless Chromium (Debian package
// chromium, installed by `make deps`): the plots are in the rendered page, and every number
// the page carries (data-v-* next to a data-ref JSON pointer, report.hpp) equals the one
// --json prints. Screenshots are kept in <build>/tests/report_screenshots.

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/run_tetrasim.hpp"
#include "tetra/report/report.hpp"

namespace fs = std::filesystem;
using tetra::test::run_tetrasim;
using tetra::test::slurp;

namespace {

fs::path dir(const char* name) {
  const fs::path d = fs::path(TETRA_BINARY_DIR) / "tests" / name;
  fs::create_directories(d);
  return d;
}

/// The DOM after Chromium has loaded `html` (and a screenshot of its first 1400x2000 pixels).
std::string render(const fs::path& html, const std::string& name) {
  REQUIRE_MESSAGE(std::system("command -v chromium >/dev/null 2>&1") == 0,
                  "chromium not found: the --html test renders pages with headless Chromium "
                  "(Debian package chromium; `make deps` as root installs it)");
  const fs::path dom = dir("report_scratch") / (name + ".dom.html");
  const fs::path shot = dir("report_screenshots") / (name + ".png");
  fs::remove(shot);
  const std::string cmd = "timeout 180 chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars "
                          "--user-data-dir='" + (dir("report_scratch") / ("profile_" + name)).string() +
                          "' --window-size=1400,2000 --screenshot='" + shot.string() + "' --dump-dom 'file://" +
                          fs::absolute(html).string() + "' >'" + dom.string() + "' 2>/dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK(fs::exists(shot));
  CHECK(fs::file_size(shot) > 20000);  // a blank page is a few kB
  return slurp(dom);
}

/// The attributes of every element whose start tag has `attr`.
std::vector<std::map<std::string, std::string>> elements_with(const std::string& dom, const std::string& attr) {
  std::vector<std::map<std::string, std::string>> out;
  for (std::size_t p = dom.find(" " + attr + "=\""); p != std::string::npos; p = dom.find(" " + attr + "=\"", p + 1)) {
    const std::size_t open = dom.rfind('<', p), close = dom.find('>', p);
    std::map<std::string, std::string> attrs;
    for (std::size_t q = dom.find(' ', open); q < close;) {
      const std::size_t eq = dom.find("=\"", q);
      if (eq == std::string::npos || eq > close) break;
      const std::size_t end = dom.find('"', eq + 2);
      attrs[dom.substr(q + 1, eq - q - 1)] = dom.substr(eq + 2, end - eq - 2);
      q = end + 1;
    }
    out.push_back(std::move(attrs));
  }
  return out;
}

/// The rendered svg element `id` ("" when absent).
std::string svg_of(const std::string& dom, const std::string& id) {
  const std::size_t a = dom.find("<svg id=\"" + id + "\"");
  return a == std::string::npos ? std::string() : dom.substr(a, dom.find("</svg>", a) - a);
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

struct Comparison {
  std::size_t compared = 0;
  std::vector<std::string> mismatches;  ///< "ref key: page vs json"
};

/// Every data-v-KEY of every element with a data-ref against json[ref][KEY], exactly.
Comparison compare(const std::string& dom, const nlohmann::json& j) {
  Comparison c;
  for (const auto& attrs : elements_with(dom, "data-ref")) {
    const std::string& ref = attrs.at("data-ref");
    for (const auto& [name, value] : attrs) {
      if (name.rfind("data-v-", 0) != 0) continue;
      const std::string key = name.substr(7);
      const nlohmann::json* obj = nullptr;
      try {
        obj = &j.at(nlohmann::json::json_pointer(ref));
      } catch (const nlohmann::json::exception&) {
      }
      if (obj == nullptr || !obj->contains(key) || !(*obj)[key].is_number()) {
        c.mismatches.push_back(ref + " " + key + ": not a number in --json");
        continue;
      }
      const double page = std::strtod(value.c_str(), nullptr), json = (*obj)[key].get<double>();
      if (page != json) c.mismatches.push_back(ref + " " + key + ": " + value + " vs " + (*obj)[key].dump());
      ++c.compared;
    }
  }
  return c;
}

/// Runs `tetrasim ARGS --json` and `tetrasim ARGS --html FILE`; returns (json, rendered DOM).
std::pair<nlohmann::json, std::string> json_and_page(const std::string& args, const std::string& name) {
  const auto js = run_tetrasim(args + " --json", 300);
  REQUIRE_MESSAGE(js.code == 0, js.err);
  const fs::path html = dir("report_scratch") / (name + ".html");
  fs::remove(html);
  const auto page = run_tetrasim(args + " --html '" + html.string() + "'", 300);
  REQUIRE_MESSAGE(page.code == 0, page.err);
  REQUIRE(fs::exists(html));
  return {nlohmann::json::parse(js.out), render(html, name)};
}

void check_all_equal(const Comparison& c, std::size_t at_least) {
  CAPTURE(c.compared);
  for (const std::string& m : c.mismatches) FAIL_CHECK(m);
  CHECK(c.compared >= at_least);
}

}  // namespace

TEST_SUITE("report") {

TEST_CASE("browser: simulate --html has the memory bars and the timeline with --json's numbers") {
  auto [j, dom] = json_and_page("simulate scenarios/default.toml", "simulate");
  const std::string mem = svg_of(dom, "simulate-memory"), tl = svg_of(dom, "simulate-timeline");
  REQUIRE(!mem.empty());
  REQUIRE(!tl.empty());
  const std::size_t stages = j.at("stages").size();
  CHECK(count(mem, "class=\"stage-bar\"") == stages);
  CHECK(count(tl, "class=\"bubble\"") == stages);
  CHECK(count(tl, "<rect x=") > 4 * stages);  // slices of every stage's streams
  CHECK(tl.find(">forward (F)</text>") != std::string::npos);
  CHECK(tl.find(">dp comm</text>") != std::string::npos);
  // The layout under the title; every exchange in the timeline's legend.
  CHECK(dom.find("<code id=\"simulate-layout\">tp8 ") != std::string::npos);
  for (const char* e : {">TP collective</text>", ">PP send activation</text>", ">DP gradient reduce</text>",
                        ">CP: no traffic", ">EP: no traffic"}) {
    CHECK_MESSAGE(tl.find(e) != std::string::npos, e);
  }
  CHECK(count(mem, "class=\"expert-split\"") == 0);  // a dense model
  const Comparison c = compare(dom, j);
  // Seven numbers per memory bar, busy and idle per stage, the summary facts.
  check_all_equal(c, 7 * stages + 2 * stages + 10);
  SUBCASE("the comparison catches a number that differs") {
    nlohmann::json changed = j;
    changed["stages"][0]["memory"]["params_gib"] = j["stages"][0]["memory"]["params_gib"].get<double>() + 0.001;
    CHECK(compare(dom, changed).mismatches.size() == 1);
  }
}

TEST_CASE("browser: simulate --html of a mixture-of-experts model draws its EP dispatch and combine") {
  auto [j, dom] = json_and_page("simulate scenarios/llama4-maverick.toml", "simulate_moe");
  REQUIRE(j.at("exposed_comm_s").contains("ep"));
  CHECK(dom.find("exposed EP communication") != std::string::npos);
  CHECK(dom.find("data-v-ep=") != std::string::npos);
  const std::size_t stages = j.at("stages").size();
  // Memory split dense / expert, with --json's expert parts; an EP row per stage in the timeline.
  const std::string mem = svg_of(dom, "simulate-memory"), tl = svg_of(dom, "simulate-timeline");
  CHECK(count(mem, "class=\"expert-split\"") == stages);
  CHECK(mem.find(">expert weights, gradients, optimizer</text>") != std::string::npos);
  CHECK(count(mem, "data-v-expert_states_gib=") == stages);
  CHECK(count(tl, ">ep comm</text>") == stages);
  CHECK(tl.find(">EP dispatch / combine</text>") != std::string::npos);  // legend
  CHECK(count(tl, "fill=\"#CC79A7\"") > 2 * stages);  // the EP row's slices
  CHECK(dom.find("id=\"timeline-ep\"") == std::string::npos);
  CHECK(dom.find("<code id=\"simulate-layout\">") != std::string::npos);
  check_all_equal(compare(dom, j), 9 * stages + 2 * stages + 14);
}

TEST_CASE("browser: search --html plots every ranked layout with --json's numbers") {
  auto [j, dom] = json_and_page("search scenarios/default.toml", "search");
  const std::string svg = svg_of(dom, "search-throughput-memory");
  REQUIRE(!svg.empty());
  const std::size_t n = j.at("layouts").size();
  REQUIRE(n > 10);
  CHECK(count(svg, "<circle class=\"point") == n);
  CHECK(count(svg, "class=\"point top\"") == 10);
  for (const char* s : {"1f1b", "interleaved", "zb-h1"}) {
    CHECK(svg.find(std::string(">") + s + "</text>") != std::string::npos);  // legend
  }
  const std::size_t table = dom.find("<table id=\"search-table\"");
  REQUIRE(table != std::string::npos);
  CHECK(count(dom.substr(table), "<tr data-ref=") == 10);
  // Two numbers per mark, four per table row, seven facts.
  check_all_equal(compare(dom, j), 2 * n + 4 * 10 + 7);
}

TEST_CASE("browser: plan --html has days against cost with the Pareto front and the scaling curves") {
  auto [j, dom] = json_and_page("plan tests/data/plan/html_report.toml", "plan");
  const std::string front = svg_of(dom, "plan-days-cost"), scaling = svg_of(dom, "plan-scaling");
  REQUIRE(!front.empty());
  REQUIRE(!scaling.empty());
  std::size_t fits = 0, pareto = 0;
  for (const auto& c : j.at("candidates")) {
    if (!c.at("fits").get<bool>()) continue;
    ++fits;
    pareto += c.at("pareto").get<bool>() ? 1 : 0;
  }
  REQUIRE(fits >= 6);
  REQUIRE(pareto >= 2);
  CHECK(count(front, "<circle class=\"point") == fits);
  CHECK(count(front, "class=\"point pareto\"") == pareto);
  CHECK(count(front, "class=\"pareto-front\"") == 1);
  CHECK(count(scaling, "<circle class=\"point") == fits);
  CHECK(count(scaling, "<polyline") == 3);  // one curve per GPU type
  CHECK(dom.find("no layout fits the memory budget") != std::string::npos);
  // One colour per GPU type: every point of both plots and the legend entry in gpu_colour's.
  for (const auto& c : j.at("candidates")) {
    if (!c.at("fits").get<bool>()) continue;
    const std::string colour = "fill=\"" + tetra::report::gpu_colour(c.at("gpu").get<std::string>()) + "\"";
    for (const std::string* svg : {&front, &scaling}) {
      const std::size_t at = svg->find("data-ref=\"/candidates/" + std::to_string(c.at("id").get<int>()) + "\"");
      REQUIRE(at != std::string::npos);
      CHECK(svg->substr(at, svg->find('>', at) - at).find(colour) != std::string::npos);
      CHECK(svg->find("data-colour=\"" + tetra::report::gpu_colour(c.at("gpu").get<std::string>()) + "\"") !=
            std::string::npos);
    }
  }
  CHECK(count(front, "class=\"count\"") == fits);  // GPU counts on the points
  CHECK(count(scaling, "class=\"ideal\"") == 3);

  // Three numbers per mark of each plot (id and the two coordinates), the id of each table row,
  // five facts.
  check_all_equal(compare(dom, j), 3 * fits + 3 * fits + j.at("candidates").size() + 5);
}

TEST_CASE("browser: plan --html of scenarios/plan-405b.toml decides: the verdict box on top, the band in the legend") {
  auto [j, dom] = json_and_page("plan scenarios/plan-405b.toml", "plan_405b");
  const std::size_t box = dom.find("<div id=\"plan-verdict\"");
  REQUIRE(box != std::string::npos);
  CHECK(box < dom.find("<svg"));
  const std::string verdict = dom.substr(box, dom.find("</div>", box) - box);
  REQUIRE(j.at("verdict").at("recommended").is_number());
  const auto& chosen = j.at("candidates").at(j["verdict"]["recommended"].get<std::size_t>());
  CHECK(verdict.find("Rent ") != std::string::npos);
  CHECK(verdict.find("<b>" + chosen.at("name").get<std::string>() + "</b> × <b>" +
                     std::to_string(chosen.at("gpus").get<int>()) + " GPUs</b>") != std::string::npos);
  CHECK(verdict.find(" days, cost ") != std::string::npos);
  CHECK(verdict.find("in the currency of the prices") != std::string::npos);
  CHECK(verdict.find("data-ref=\"/candidates/" + std::to_string(chosen.at("id").get<int>()) + "/days_band\"") !=
        std::string::npos);
  CHECK(verdict.find("at the band's slow end") != std::string::npos);  // the deadline and the budget
  CHECK(verdict.find("Deadline 90 days: ") != std::string::npos);
  CHECK(verdict.find("Budget 75.0 M: ") != std::string::npos);
  const std::string front = svg_of(dom, "plan-days-cost");
  CHECK(front.find(">band: days and cost at its ends</text>") != std::string::npos);
  CHECK(front.find(">the verdict's choice</text>") != std::string::npos);
  CHECK(svg_of(dom, "plan-scaling").find(">ideal linear from the smallest count</text>") != std::string::npos);
  // The verdict's numbers (days, cost, the band's ends) are --json's too.
  check_all_equal(compare(dom, j), 100);
}

TEST_CASE("--html on bad input writes nothing, and plan --shard refuses it") {
  const fs::path html = dir("report_scratch") / "bad.html";
  fs::remove(html);
  const auto bad = run_tetrasim("simulate tests/data/scenarios/malformed.toml --html '" + html.string() + "'");
  CHECK(bad.code == 1);
  CHECK(!fs::exists(html));
  const auto shard = run_tetrasim("plan tests/data/plan/html_report.toml --shard 1/2 --html '" + html.string() + "'");
  CHECK(shard.code == 2);
  CHECK(shard.err.find("--html") != std::string::npos);
  CHECK(!fs::exists(html));
}

}  // TEST_SUITE

TEST_SUITE("report") {

TEST_CASE("plan --merge --html writes the one-run page byte for byte") {
  const fs::path d = dir("report_scratch");
  const std::string sc = "tests/data/plan/html_report.toml";
  for (int i = 1; i <= 2; ++i) {
    const std::string out = (d / ("share" + std::to_string(i) + ".json")).string();
    REQUIRE(run_tetrasim("plan " + sc + " --shard " + std::to_string(i) + "/2 --out '" + out + "'").code == 0);
  }
  const fs::path one = d / "one.html", merged = d / "merged.html";
  REQUIRE(run_tetrasim("plan " + sc + " --html '" + one.string() + "'").code == 0);
  REQUIRE(run_tetrasim("plan " + sc + " --html '" + merged.string() + "' --merge '" + (d / "share1.json").string() +
                       "' '" + (d / "share2.json").string() + "'")
              .code == 0);
  CHECK(slurp(one) == slurp(merged));
  CHECK(slurp(one).find("<svg id=\"plan-days-cost\"") != std::string::npos);
}

}  // TEST_SUITE
