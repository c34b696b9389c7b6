// Layout search: enumeration counts computed by hand, rule counting, memory pruning against
// costmodel::estimate_memory, ranking order and tie-breaks, and determinism across thread
// counts (library and command line).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tetra/costmodel/memory.hpp"
#include "tetra/base/error.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/parallel/params.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/parallel/validate.hpp"
#include "tetra/scenarios/compact_layout.hpp"
#include "tetra/scenarios/scenario.hpp"
#include "tetra/search/enumerate.hpp"
#include "tetra/search/search.hpp"

using namespace tetra;

namespace {

/// Llama 3.1 8B on two DGX H100 (8 KV heads), pp 1 and micro-batch 1, with the [training] keys
/// and the [search] lists given: its enumerated layouts.
scenarios::Scenario two_dgx_search(const std::string& training, const std::string& lists) {
  const std::string text = "[model]\npreset = \"llama3.1-8b\"\n[cluster]\npreset = \"dgx-h100\"\nnodes = 2\n"
                           "[training]\n" + training + "[search]\npp = [1]\nmbs = [1]\n" + lists;
  return scenarios::load_scenario_text(text, "search.toml", "", false);
}

/// A small Llama: 12 layers, hidden 1024, 8 heads, 4 KV heads (so tp = 8 breaks
/// tp-divides-heads), FFN 4096.
model::Model small_model() {
  model::Model m;
  m.name = "small";
  m.layers = 12;
  m.hidden = 1024;
  m.ffn_hidden = 4096;
  m.heads = 8;
  m.kv_heads = 4;
  m.vocab = 32000;
  return m;
}

hw::Cluster one_node() {
  auto c = hw::find_cluster_preset("dgx-h100");
  REQUIRE(c);
  c->nodes = 1;  // 8 GPUs
  return *c;
}

parallel::Training small_training() {
  parallel::Training t;
  t.seq_len = 2048;
  t.global_batch = 16;
  return t;
}

/// tp {1,2,8} × cp {1} × pp {1,2,5} × vp {1,2} × mbs {1,4} × recompute {none} ×
/// schedule {1f1b, interleaved} × sp {true} = 3·1·3·2·2·1·2·1 = 72 candidates.
search::SearchSpace small_space() {
  search::SearchSpace s;
  s.tp = {1, 2, 8};
  s.cp = {1};
  s.pp = {1, 2, 5};
  s.pp_divisors = false;
  s.vp = {1, 2};
  s.mbs = {1, 4};
  s.recompute = {parallel::Recompute::none};
  s.schedule = {parallel::Schedule::one_f_one_b, parallel::Schedule::interleaved};
  s.sp = {true};
  return s;
}

std::string run_cli(const std::string& args) {
  const std::string cmd = std::string(TETRA_BINARY_DIR) + "/cli/tetrasim " + args;
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  CHECK(pclose(p) == 0);
  return out;
}

/// Drops the line holding "seconds" (wall time is the one key that differs between runs).
std::string without_seconds(const std::string& json) {
  std::string out;
  std::size_t start = 0;
  while (start < json.size()) {
    std::size_t end = json.find('\n', start);
    if (end == std::string::npos) end = json.size();
    const std::string line = json.substr(start, end - start);
    if (line.find("\"seconds\"") == std::string::npos) out += line + '\n';
    start = end + 1;
  }
  return out;
}

/// Llama-3.1-8B on one DGX H100 at sequence 4096, global batch 64, with the [search] table
/// `space` (a TOML fragment).
scenarios::Scenario h100_8b_with(const std::string& space) {
  const std::string text = "[model]\npreset = \"llama3.1-8b\"\n[cluster]\npreset = \"dgx-h100\"\n"
                           "[training]\nseq_len = 4096\nglobal_batch = 64\n[search]\n" + space;
  return scenarios::load_scenario_text(text, "search.toml", "", false);
}

/// The scenario's search, what [search] does not vary taken from [layout], as `tetrasim search`.
search::SearchResult search_scenario(const scenarios::Scenario& sc) {
  search::SearchInput in;
  in.model = &sc.model;
  in.cluster = &sc.cluster;
  in.training = &sc.training;
  in.space = &sc.search;
  in.base = sc.layout;
  return search::run_search(in);
}

}  // namespace

TEST_SUITE("search") {
  TEST_CASE("uneven_split: middle ranks ceil(L/pp), the ends share the rest") {
    // 126 layers (Llama-3.1-405B), pp 16: k = ceil(126/16) = 8, rest 126 − 14·8 = 14 → 7 / 7
    // (arXiv 2407.21783 §3.3.2: one layer fewer on the first and the last stage).
    auto s = search::uneven_split(126, 16);
    REQUIRE(s);
    CHECK(s->first_stage_layers == 7);
    CHECK(s->last_stage_layers == 7);
    // pp 32: k = 4, rest 126 − 30·4 = 6 → 3 / 3.  pp 8: k = 16, rest 126 − 6·16 = 30 → 15 / 15.
    CHECK(search::uneven_split(126, 32)->first_stage_layers == 3);
    CHECK(search::uneven_split(126, 8)->last_stage_layers == 15);
    // pp 4: k = 32, rest 126 − 2·32 = 62 → 31 / 31.
    CHECK(search::uneven_split(126, 4)->first_stage_layers == 31);
    // 12 layers, pp 5: k = 3, rest 12 − 3·3 = 3 → first 1 (the smaller half), last 2.
    CHECK(search::uneven_split(12, 5)->first_stage_layers == 1);
    CHECK(search::uneven_split(12, 5)->last_stage_layers == 2);
    // pp 2 with odd layers: no middle ranks, 7 → 3 / 4.
    CHECK(search::uneven_split(7, 2)->first_stage_layers == 3);
    CHECK(search::uneven_split(7, 2)->last_stage_layers == 4);
    // Nothing where pp divides, pp < 2, pp > layers, or the ends would be empty
    // (5 layers, pp 4: k = 2, rest 5 − 2·2 = 1 < 2).
    CHECK_FALSE(search::uneven_split(126, 2));
    CHECK_FALSE(search::uneven_split(126, 1));
    CHECK_FALSE(search::uneven_split(4, 8));
    CHECK_FALSE(search::uneven_split(5, 4));
  }

  TEST_CASE("pp = \"divisors\" ranks Llama 3.1 405B's 126 layers on pp 8 and 16 (uneven end stages)") {
    // 126 = 2 x 3^2 x 7 has no divisor 8 or 16; Llama 3 trained it on pp 16 with lighter end
    // stages (arXiv 2407.21783 section 3.3.2), which Megatron-Core's first / last stage layer
    // counts express.
    const std::string text =
        "[model]\npreset = \"llama3.1-405b\"\n[cluster]\npreset = \"dgx-h100\"\nnodes = 32\n"
        "[training]\nseq_len = 8192\nglobal_batch = 256\n"
        "[search]\ntp = [8]\ncp = [1]\nmbs = [1]\nrecompute = [\"full\"]\npp = \"divisors\"\n";
    const auto sc = scenarios::load_scenario_text(text, "search.toml", "", false);
    const auto pp = search::pp_values(sc.search, sc.model.layers);
    CHECK(pp == std::vector<int>{1, 2, 3, 4, 6, 7, 8, 9, 14, 16, 18, 21, 32, 42, 63, 64, 126});
    std::set<int> ranked;
    for (const auto& r : search_scenario(sc).layouts) {
      ranked.insert(r.layout.pp);
      if (r.layout.pp == 16) {
        CHECK(r.layout.first_stage_layers == 7);  // 14 x 8 + 7 + 7 = 126
        CHECK(r.layout.last_stage_layers == 7);
      }
    }
    CHECK(ranked.count(8) == 1);
    CHECK(ranked.count(16) == 1);
  }

  TEST_CASE("uneven splits pass the layout rules and parallel::stage_layers agrees") {
    const auto m = model::find_model_preset("llama3.1-405b");
    REQUIRE(m);
    parallel::Training t;
    t.seq_len = 8192;
    t.global_batch = 2048;
    for (const int pp : {4, 8, 16, 32}) {
      CAPTURE(pp);
      const auto s = search::uneven_split(m->layers, pp);
      REQUIRE(s);
      parallel::Layout l;
      l.tp = 8;
      l.pp = pp;
      l.dp = 16384 / (8 * pp);
      l.sp = true;
      l.first_stage_layers = s->first_stage_layers;
      l.last_stage_layers = s->last_stage_layers;
      CHECK_FALSE(parallel::check_layout(*m, 16384, t, l));
      const auto layers = parallel::stage_layers(*m, l);
      CHECK(layers.front() == s->first_stage_layers);
      CHECK(layers.back() == s->last_stage_layers);
      int total = 0;
      for (const int x : layers) total += x;
      CHECK(total == 126);
    }
  }

  TEST_CASE("pp = \"divisors\": every divisor of the layer count and the powers of two an uneven split serves") {
    search::SearchSpace s;
    s.pp_divisors = true;
    // 126 = 2·3²·7: 1, 2, 3, 6, 7, 9, 14, 18, 21, 42, 63, 126; and 4, 8, 16, 32, 64 with lighter
    // end stages (32: 30 ranks of 4 and 3 + 3; 64: 62 of 2 and 1 + 1).
    CHECK(search::pp_values(s, 126) ==
          std::vector<int>{1, 2, 3, 4, 6, 7, 8, 9, 14, 16, 18, 21, 32, 42, 63, 64, 126});
    // 80 layers: 32 would need 30 ranks of 3 = 90 > 80, so no uneven split serves it.
    CHECK(search::pp_values(s, 80) == std::vector<int>{1, 2, 4, 5, 8, 10, 16, 20, 40, 80});
    s.pp_divisors = false;
    s.pp = {4, 16};
    CHECK(search::pp_values(s, 126) == std::vector<int>{4, 16});
  }

  TEST_CASE("enumeration counts and rejections per rule, computed by hand") {
    const auto en = search::enumerate_layouts(small_model(), 8, small_training(), small_space());
    // 72 candidates (small_space). Rules in check_layout order:
    //  tp 8: kv_heads 4 % 8 != 0 → tp-divides-heads: 1 tp · 3 pp · 2 vp · 2 mbs · 2 sched = 24.
    //  tp 1, 2 with pp 5: 8 GPUs are not a multiple of 5·tp → world-size: 2·1·2·2·2 = 16.
    //  tp 1, pp 1 (dp 8), mbs 4: 16 % (4·8) != 0 → batch-divides: 2 vp · 2 sched = 4.
    //  Left: (tp,pp,mbs) = (1,1,1) (2,1,1) (2,1,4) with pp 1, and (1,2,1) (1,2,4) (2,2,1)
    //  (2,2,4) with pp 2; each with 4 (vp, schedule) pairs:
    //   vp 1 + 1f1b: valid (7);  vp 1 + interleaved: interleaved-needs-vp (7);
    //   vp 2 at pp 1: vp-needs-pp (3 combos · 2 schedules = 6);
    //   vp 2 + 1f1b at pp 2: vp-needs-interleaved (4);
    //   vp 2 + interleaved at pp 2: micro-batches 16/(mbs·dp) = 4, 1, 8, 2 must be a multiple
    //   of pp 2 → (1,2,4) breaks interleaved-microbatches (1), 3 valid.
    //  Valid 7 + 3 = 10; 24 + 16 + 4 + 7 + 6 + 4 + 1 + 10 = 72.
    CHECK(en.enumerated == 72);
    CHECK(en.valid.size() == 10);
    CHECK(en.invalid == 62);
    const std::map<std::string, std::uint64_t> want{{"tp-divides-heads", 24},
                                                    {"world-size", 16},
                                                    {"batch-divides", 4},
                                                    {"interleaved-needs-vp", 7},
                                                    {"vp-needs-pp", 6},
                                                    {"vp-needs-interleaved", 4},
                                                    {"interleaved-microbatches", 1}};
    CHECK(en.invalid_by_rule == want);
    for (const auto& l : en.valid) {
      CHECK(l.world() == 8);
      CHECK(l.sp == (l.tp > 1));
      CHECK(l.first_stage_layers == 0);
    }
  }

  TEST_CASE("ep and etp lists: enumerated on a MoE model with the expert rules, ignored on a dense one") {
    auto space = small_space();
    space.tp = {1};
    space.pp = {1};
    space.vp = {1};
    space.mbs = {1};
    space.schedule = {parallel::Schedule::one_f_one_b};
    space.ep = {1, 2, 4, 8, 16};
    space.etp = {1, 2};
    model::Model moe = small_model();
    model::Moe e;
    e.num_experts = 8;
    e.experts_per_token = 2;
    e.moe_ffn_hidden = 512;
    moe.moe = e;
    const auto en = search::enumerate_layouts(moe, 8, small_training(), space);
    // 5 ep x 2 etp = 10 candidates at tp 1, dp 8. ep 16 does not divide 8 experts
    // (ep-divides-experts, 2); ep 8 x etp 2 = 16 does not divide tp*cp*dp = 8 (ep-divides-dp,
    // 1); the other 7 are valid.
    CHECK(en.enumerated == 10);
    CHECK(en.valid.size() == 7);
    CHECK(en.invalid_by_rule.at("ep-divides-experts") == 2);
    CHECK(en.invalid_by_rule.at("ep-divides-dp") == 1);
    std::set<std::pair<int, int>> seen;
    for (const auto& l : en.valid) seen.insert({l.ep, l.etp});
    CHECK(seen == std::set<std::pair<int, int>>{{1, 1}, {1, 2}, {2, 1}, {2, 2}, {4, 1}, {4, 2}, {8, 1}});
    // The dense model is searched at ep = etp = 1 only.
    const auto dense = search::enumerate_layouts(small_model(), 8, small_training(), space);
    CHECK(dense.enumerated == 1);
    REQUIRE(dense.valid.size() == 1);
    CHECK(dense.valid[0].ep == 1);
    CHECK(dense.valid[0].etp == 1);
  }

  TEST_CASE("sp: only sp = false at tp = 1, both values where tp > 1 when listed") {
    auto space = small_space();
    space.tp = {1, 2};
    space.pp = {1};
    space.vp = {1};
    space.mbs = {1};
    space.schedule = {parallel::Schedule::one_f_one_b};
    space.sp = {true, false};
    const auto en = search::enumerate_layouts(small_model(), 8, small_training(), space);
    // tp 1: one candidate (sp off); tp 2: sp on and off → 3 candidates, all valid.
    CHECK(en.enumerated == 3);
    CHECK(en.valid.size() == 3);
  }

  TEST_CASE("uneven pp in the enumeration: 405B at pp 16 takes the 7/8/.../8/7 split") {
    const auto m = model::find_model_preset("llama3.1-405b");
    REQUIRE(m);
    parallel::Training t;
    t.seq_len = 8192;
    t.global_batch = 2048;
    search::SearchSpace s;
    s.tp = {8};
    s.cp = {1};
    s.pp = {16};
    s.pp_divisors = false;
    s.vp = {1, 2};
    s.mbs = {1};
    s.recompute = {parallel::Recompute::none};
    s.schedule = {parallel::Schedule::one_f_one_b, parallel::Schedule::interleaved};
    const auto en = search::enumerate_layouts(*m, 16384, t, s);
    // vp 1 + 1f1b: valid with first = last = 7; vp 1 + interleaved: interleaved-needs-vp;
    // vp 2: 16·2 = 32 does not divide 126 → uneven_chunk_split: k = 4, rest 126 − 30·4 = 6 →
    // end chunks 3 / 3, end ranks 4 + 3 = 7 / 7; with 1f1b vp-needs-interleaved, with
    // interleaved valid (2048/(1·128) = 16 micro-batches, a multiple of pp 16).
    CHECK(en.enumerated == 4);
    REQUIRE(en.valid.size() == 2);
    for (const auto& l : en.valid) {
      CHECK(l.first_stage_layers == 7);
      CHECK(l.last_stage_layers == 7);
      CHECK(l.dp == 128);
    }
    CHECK(en.valid[0].vp == 1);
    CHECK(en.valid[1].vp == 2);
    CHECK(en.valid[1].schedule == parallel::Schedule::interleaved);
    CHECK(en.invalid_by_rule.count("layers-divide") == 0);
    CHECK(en.invalid_by_rule.at("vp-needs-interleaved") == 1);
    CHECK(en.invalid_by_rule.at("interleaved-needs-vp") == 1);
    // Llama 3's layout (arXiv 2407.21783 §3.3.2): vp 8 → k = 1, the first and the last chunk
    // embedding / head only, end ranks 7 / 7.
    s.vp = {8};
    s.schedule = {parallel::Schedule::interleaved};
    const auto v8 = search::enumerate_layouts(*m, 16384, t, s);
    REQUIRE(v8.valid.size() == 1);
    CHECK(v8.valid[0].first_stage_layers == 7);
    CHECK(v8.valid[0].last_stage_layers == 7);
    CHECK(parallel::chunk_layers(*m, v8.valid[0]).front() == 0);
  }

  TEST_CASE("an empty list is a user error") {
    auto s = small_space();
    s.mbs.clear();
    CHECK_THROWS_AS((void)search::enumerate_layouts(small_model(), 8, small_training(), s),
                    UserError);
  }

  TEST_CASE("ranking: tokens/s descending, then lower peak, then the layout key") {
    auto make = [](int tp, double tokens, double peak) {
      search::RankedLayout r;
      r.layout.tp = tp;
      r.tokens_per_s = tokens;
      r.peak_bytes = peak;
      return r;
    };
    std::vector<search::RankedLayout> v{make(1, 100, 5), make(4, 100, 3), make(2, 200, 9),
                                        make(2, 100, 3)};
    std::sort(v.begin(), v.end(), search::ranks_before);
    // 200 first; the three at 100: peak 3 before peak 5; the two at peak 3 by key (tp 2 < tp 4).
    CHECK(v[0].layout.tp == 2);
    CHECK(v[0].tokens_per_s == 200);
    CHECK(v[1].layout.tp == 2);
    CHECK(v[2].layout.tp == 4);
    CHECK(v[3].layout.tp == 1);
    CHECK_FALSE(search::ranks_before(v[1], v[1]));
    // The key orders numbers numerically (tp 10 after tp 9).
    parallel::Layout a, b;
    a.tp = 9;
    b.tp = 10;
    CHECK(search::layout_key(a) < search::layout_key(b));
  }

  TEST_CASE("pruning agrees with estimate_memory, every survivor is simulated and ranked") {
    const auto model = small_model();
    const auto cluster = one_node();
    const auto training = small_training();
    auto space = small_space();
    const auto en = search::enumerate_layouts(model, 8, training, space);
    // Put the budget at the median analytical peak so that both sides are populated.
    std::vector<double> peaks;
    for (const auto& l : en.valid) {
      peaks.push_back(costmodel::estimate_memory(model, cluster, training, l).peak_bytes);
    }
    std::vector<double> sorted = peaks;
    std::sort(sorted.begin(), sorted.end());
    space.memory_fraction = sorted[sorted.size() / 2] / cluster.gpu.memory_bytes;
    const double budget = space.memory_fraction * cluster.gpu.memory_bytes;
    std::uint64_t over = 0;
    for (const double p : peaks) over += p > budget ? 1 : 0;
    REQUIRE(over > 0);
    REQUIRE(over < peaks.size());

    search::SearchInput in{&model, &cluster, &training, &space, {}, nullptr, {}};
    search::SearchOptions opt;
    opt.threads = 2;
    const auto res = search::run_search(in, opt);
    const auto& s = res.summary;
    CHECK(s.enumerated == 72);
    CHECK(s.valid == 10);
    CHECK(s.pruned_by_memory == over);
    CHECK(s.simulated == 10 - over);
    CHECK(s.feasible + s.over_budget_simulated == s.simulated);
    CHECK(s.feasible == res.layouts.size());
    for (const auto& r : res.layouts) {
      const auto rep = costmodel::estimate_memory(model, cluster, training, r.layout);
      CHECK(r.estimate_peak_bytes == rep.peak_bytes);
      CHECK(r.estimate_peak_bytes <= budget);
      CHECK(r.peak_bytes <= budget);
      CHECK(r.tokens_per_s > 0);
      CHECK(r.step_time_s > 0);
    }
    CHECK(std::is_sorted(res.layouts.begin(), res.layouts.end(), search::ranks_before));
  }

  TEST_CASE("the result does not depend on the thread count") {
    const auto model = small_model();
    const auto cluster = one_node();
    const auto training = small_training();
    const auto space = small_space();
    search::SearchInput in{&model, &cluster, &training, &space, {}, nullptr, {}};
    search::SearchOptions one, three;
    one.threads = 1;
    three.threads = 3;
    const auto a = search::run_search(in, one);
    const auto b = search::run_search(in, three);
    REQUIRE(a.layouts.size() == b.layouts.size());
    for (std::size_t i = 0; i < a.layouts.size(); ++i) {
      CHECK(search::layout_key(a.layouts[i].layout) == search::layout_key(b.layouts[i].layout));
      CHECK(a.layouts[i].step_time_s == b.layouts[i].step_time_s);
      CHECK(a.layouts[i].peak_bytes == b.layouts[i].peak_bytes);
    }
    CHECK(a.summary.pruned_by_memory == b.summary.pruned_by_memory);
  }

  TEST_CASE("tetrasim search --json: byte-identical for --threads 1 and 2 apart from seconds") {
    const std::string scenario = std::string(TETRA_SOURCE_DIR) + "/scenarios/default.toml";
    const std::string a = run_cli("search " + scenario + " --json --threads 1");
    const std::string b = run_cli("search " + scenario + " --json --threads 2");
    REQUIRE(a.find("\"layouts\"") != std::string::npos);
    CHECK(a.find("\"evaluated\"") != std::string::npos);
    CHECK(a.find("\"feasible\"") != std::string::npos);
    CHECK(a.find("\"seconds\"") != std::string::npos);
    CHECK(without_seconds(a) == without_seconds(b));
  }
}

TEST_SUITE("search") {
  TEST_CASE("sharing priced layer tables changes no result") {
    const auto model = small_model();
    const auto cluster = one_node();
    const auto training = small_training();
    const auto space = small_space();
    search::SearchInput in{&model, &cluster, &training, &space, {}, nullptr, {}};
    search::SearchOptions shared, fresh;
    shared.threads = 2;
    fresh.threads = 2;
    fresh.share_layer_tables = false;
    const auto a = search::run_search(in, shared);
    const auto b = search::run_search(in, fresh);
    REQUIRE(a.layouts.size() == b.layouts.size());
    for (std::size_t i = 0; i < a.layouts.size(); ++i) {
      CHECK(search::layout_key(a.layouts[i].layout) == search::layout_key(b.layouts[i].layout));
      CHECK(a.layouts[i].step_time_s == b.layouts[i].step_time_s);
      CHECK(a.layouts[i].peak_bytes == b.layouts[i].peak_bytes);
    }
    // 10 valid layouts over (tp, mbs) ∈ {(1,1), (2,1), (2,4), (1,4)}: at most 4 shapes, fewer
    // than the layouts simulated; nothing shared when sharing is off.
    CHECK(a.summary.layer_shapes > 0);
    CHECK(a.summary.layer_shapes <= 4);
    CHECK(a.summary.layer_shapes < a.summary.simulated);
    CHECK(b.summary.layer_shapes == 0);
  }
}

TEST_SUITE("search") {
  TEST_CASE("405B / 16k scenario: the space and its rules") {
    const auto sc = scenarios::load_scenario(
        std::string(TETRA_SOURCE_DIR) + "/scenarios/llama3.1-405b-16k.toml", "", false);
    CHECK(sc.cluster.total_gpus() == 16384);
    const auto en = search::enumerate_layouts(sc.model, sc.cluster.total_gpus(), sc.training,
                                              sc.search, sc.layout);
    // tp 4 × cp 5 × pp 6 × vp 4 × mbs 3 × recompute 3 × schedule 3 × sp 1 = 12,960.
    CHECK(en.enumerated == 12960);
    CHECK(en.invalid + en.valid.size() == en.enumerated);
    // 126 = 2·3²·7: pp·vp divides it only at pp ≤ 2 (vp ≤ 2); elsewhere the candidate takes
    // parallel::uneven_chunk_split. Left without a split (layers-divide): pp 1 with vp 4 or 8
    // (no pipeline to split over) and pp 32 with vp 8 (256 chunks, k = 1, rest 126 − 254 < 0),
    // 3 (pp, vp) pairs × 540 = 1620 candidates, of which batch-divides rejects first
    // every mbs·dp that does not divide 2048.
    CHECK(en.valid.size() == 3036);
    const std::map<std::string, std::uint64_t> want{{"batch-divides", 2304},
                                                    {"interleaved-microbatches", 954},
                                                    {"interleaved-needs-vp", 888},
                                                    {"layers-divide", 1080},
                                                    {"vp-needs-interleaved", 4428},
                                                    {"vp-needs-pp", 270}};
    CHECK(en.invalid_by_rule == want);
    bool llama3 = false;
    for (const auto& l : en.valid) {
      if (l.pp == 16) {
        // 7 / 14 × 8 / 7 at every vp (arXiv 2407.21783 §3.3.2).
        CHECK(l.first_stage_layers == 7);
        CHECK(l.last_stage_layers == 7);
      }
      if (l.pp == 32 && l.vp == 4) {
        // 128 chunks of k = 1, end chunks 0: end ranks 3·1 + 0 = 3.
        CHECK(l.first_stage_layers == 3);
      }
      CHECK(l.vp * l.pp <= 128);
      CHECK(l.world() == 16384);
      llama3 = llama3 || (l.tp == 8 && l.cp == 1 && l.pp == 16 && l.vp == 8 && l.mbs == 1 &&
                          l.schedule == parallel::Schedule::interleaved &&
                          l.recompute == parallel::Recompute::none);
    }
    // Llama 3's layout (TP 8, CP 1, PP 16, interleaved) is now in the space.
    CHECK(llama3);
  }

  TEST_CASE("precision = [bf16, fp8]: both precisions ranked, FP8 linears win on H100") {
    const auto sc = h100_8b_with(
        "tp = [1, 2]\npp = [1, 2]\nmbs = [1]\nrecompute = [\"none\"]\nprecision = [\"bf16\", \"fp8\"]\n"
        "fp8_recipe = \"current\"\n");
    REQUIRE(sc.search.precision.size() == 2);
    const auto res = search_scenario(sc);
    int fp8 = 0, bf16 = 0;
    for (const auto& r : res.layouts) (r.fp8.enabled() ? fp8 : bf16) += 1;
    CHECK(fp8 > 0);
    CHECK(bf16 > 0);
    // The same layout runs faster with FP8 GEMMs (1402.6 vs 794.5 TFLOP/s achievable).
    REQUIRE_FALSE(res.layouts.empty());
    CHECK(res.layouts.front().fp8.recipe == parallel::Fp8Recipe::current);
    // Enumeration counts both precisions.
    const auto en = search::enumerate_layouts(sc.model, sc.cluster.total_gpus(), sc.training,
                                              sc.search, sc.layout);
    CHECK(res.summary.enumerated == 2 * en.enumerated);
  }

  TEST_CASE("memory knobs: FP8 parameter gather on the FP8 variant only, every gradient dtype, offloading at pp 1") {
    const auto res = search_scenario(h100_8b_with(
        "tp = [2]\npp = [1, 2]\nmbs = [1]\nrecompute = [\"none\"]\nprecision = [\"bf16\", \"fp8\"]\n"
        "fp8_recipe = \"current\"\nfp8_param_gather = [true, false]\ngrad_dtype = [\"bf16\", \"fp32\"]\n"
        "offload_layers = [0, 8]\n"));
    // Trainings: BF16 (no gather) once and FP8 with and without gather, each in two gradient
    // dtypes: 6. Layouts: pp 1 with 0 and 8 offloaded layers, pp 2 without: 3. All fit.
    CHECK(res.summary.enumerated == 6 * 3);
    REQUIRE(res.layouts.size() == 18);
    std::set<std::tuple<bool, bool, parallel::Precision, int>> seen;
    for (const auto& r : res.layouts) {
      CHECK((r.fp8.enabled() || !r.fp8.param_gather));
      CHECK((r.layout.offload_layers == 0 || r.layout.pp == 1));
      seen.insert({r.fp8.enabled(), r.fp8.param_gather, r.grad_dtype, r.layout.offload_layers});
    }
    CHECK(seen.size() == 3 * 2 * 2);
    // At equal speed the layout without offloaded layers ranks first.
    for (std::size_t i = 1; i < res.layouts.size(); ++i) {
      const auto& a = res.layouts[i - 1];
      const auto& b = res.layouts[i];
      if (a.tokens_per_s == b.tokens_per_s) CHECK(a.layout.offload_layers <= b.layout.offload_layers);
    }
  }

  TEST_CASE("cp_comm_type: every listed exchange where cp > 1 and the ring alone at cp 1, a2a where the heads split") {
    // Two DGX H100, tp 1 or 2, cp 1 or 8 (pp 1): at cp 8, p2p and all_gather always, a2a only at
    // tp 1 (8 KV heads; 4 at tp 2 do not split over cp 8: a2a-divides-heads).
    const auto sc = two_dgx_search("seq_len = 4096\nglobal_batch = 64\n",
                                   "tp = [1, 2]\ncp = [1, 8]\nrecompute = [\"none\"]\n"
                                   "cp_comm_type = [\"p2p\", \"all_gather\", \"a2a\"]\n");
    const auto en = search::enumerate_layouts(sc.model, sc.cluster.total_gpus(), sc.training, sc.search, sc.layout);
    using parallel::CpComm;
    std::set<std::pair<int, CpComm>> valid;
    for (const auto& l : en.valid) valid.insert({l.tp * 10 + l.cp, l.cp_comm});
    CHECK(valid == std::set<std::pair<int, CpComm>>{{11, CpComm::p2p},
                                                   {18, CpComm::p2p},
                                                   {18, CpComm::all_gather},
                                                   {18, CpComm::a2a},
                                                   {21, CpComm::p2p},
                                                   {28, CpComm::p2p},
                                                   {28, CpComm::all_gather}});
    CHECK(en.invalid_by_rule.at("a2a-divides-heads") == 1);
    // Ranked, every exchange keeps its own row.
    const auto res = search_scenario(sc);
    std::set<CpComm> ranked;
    for (const auto& r : res.layouts) {
      if (r.layout.cp == 8) ranked.insert(r.layout.cp_comm);
    }
    CHECK(ranked.size() == 3);
  }

  TEST_CASE("cp_comm_type a2a+p2p: every split of cp into two levels where the heads split") {
    // One DGX H100 pair, tp 2, cp 8: 4 KV heads per TP rank split over an all-to-all level of 2
    // or 4 ranks (rings of 4 and 2); nothing splits cp 2 into two levels.
    const auto sc = two_dgx_search("seq_len = 32768\nglobal_batch = 16\n",
                                   "tp = [2]\ncp = [2, 8]\nrecompute = [\"full\"]\ncp_comm_type = [\"a2a+p2p\"]\n");
    const auto en = search::enumerate_layouts(sc.model, sc.cluster.total_gpus(), sc.training, sc.search, sc.layout);
    std::set<std::pair<int, int>> valid;
    for (const auto& l : en.valid) valid.insert({l.cp, l.cp_a2a});
    CHECK(valid == std::set<std::pair<int, int>>{{8, 2}, {8, 4}});
    CHECK(en.invalid_by_rule.at("cp-a2a-divides-cp") == 1);
    // Ranked with the levels in the compact spelling, which --layout reads back.
    const auto res = search_scenario(sc);
    const std::string plain =
        "[model]\npreset = \"llama3.1-8b\"\n[cluster]\npreset = \"dgx-h100\"\nnodes = 2\n"
        "[training]\nseq_len = 32768\nglobal_batch = 16\n";
    REQUIRE(res.layouts.size() == 2);
    for (const auto& r : res.layouts) {
      const std::string compact = scenarios::compact_layout(r.layout, r.fp8, false);
      CHECK(compact.find(r.layout.cp_a2a == 2 ? "cp8(a2a2+p2p4)" : "cp8(a2a4+p2p2)") != std::string::npos);
      const auto again = scenarios::load_scenario_text(plain, "again.toml", compact, false);
      CHECK(again.layout.cp_comm == parallel::CpComm::a2a_p2p);
      CHECK(again.layout.cp_a2a == r.layout.cp_a2a);
    }
  }

  TEST_CASE("PyTorch-native knobs: HSDP replicas, selective_layer frequencies and compile on / off") {
    const std::string text = R"(
[model]
preset = "llama3.1-8b"
[cluster]
preset = "dgx-h100"
nodes = 2
[training]
seq_len = 4096
global_batch = 64
zero_stage = 3
framework = "fsdp"
[search]
tp = [1]
pp = [1]
mbs = [1]
recompute = ["none", "selective_layer"]
ac_freq = [2, 4]
dp_replicate = [1, 2, 3]
compile = [true, false]
)";
    const auto sc = scenarios::load_scenario_text(text, "torch.toml", "", false);
    const auto en = search::enumerate_layouts(sc.model, sc.cluster.total_gpus(), sc.training,
                                              sc.search, sc.layout);
    // Recompute none: 3 replica counts; selective_layer: 2 frequencies x 3 replica counts.
    // dp = 16: 3 replicas do not divide it (rule dp-split), twice.
    CHECK(en.enumerated == 9);
    CHECK(en.invalid_by_rule.at("dp-split") == 3);
    search::SearchInput in;
    in.model = &sc.model;
    in.cluster = &sc.cluster;
    in.training = &sc.training;
    in.space = &sc.search;
    const auto res = search::run_search(in);
    CHECK(res.summary.enumerated == 2 * en.enumerated);  // compile on and off
    bool compiled = false, eager = false, hsdp = false, every4 = false;
    for (const auto& r : res.layouts) {
      (r.compile ? compiled : eager) = true;
      hsdp = hsdp || r.layout.dp_replicate == 2;
      every4 = every4 || (r.layout.recompute == parallel::Recompute::selective_layer && r.layout.ac_freq == 4);
    }
    CHECK(compiled);
    CHECK(eager);
    CHECK(hsdp);
    CHECK(every4);
    // torch.compile fuses the block's memory-bound kernels: the same layout runs faster.
    REQUIRE_FALSE(res.layouts.empty());
    CHECK(res.layouts.front().compile);
  }

  TEST_CASE("precision = fp8 on an A100 names [search].precision") {
    const std::string text = R"(
[model]
preset = "llama3.1-8b"
[cluster]
preset = "dgx-a100-80gb"
[training]
seq_len = 4096
global_batch = 64
[search]
precision = ["bf16", "fp8"]
)";
    try {
      (void)scenarios::load_scenario_text(text, "a100.toml", "", false);
      FAIL("expected a UserError");
    } catch (const UserError& e) {
      const std::string what = e.what();
      CHECK(what.find("a100.toml:10:") != std::string::npos);
      CHECK(what.find("[search].precision") != std::string::npos);
      CHECK(what.find("FP8 tensor cores") != std::string::npos);
    }
  }
}

TEST_SUITE("search") {
  TEST_CASE("NVL72 racks: TP x CP blocks that straddle a 72-GPU domain are rejected by rule") {
    model::Model m = *model::find_model_preset("llama3.1-70b");
    parallel::Training t;
    t.seq_len = 8192;
    t.global_batch = 144;
    search::SearchSpace s;
    s.tp = {4, 8, 16};
    s.cp = {1, 2};
    s.pp = {1};
    s.pp_divisors = false;
    s.vp = {1};
    s.mbs = {1};
    s.recompute = {parallel::Recompute::none};
    s.schedule = {parallel::Schedule::one_f_one_b};
    s.sp = {true};
    // 144 GPUs = two full racks. TP 8 x CP 2 blocks of 16 straddle (72 = 4.5 x 16); TP 4 x
    // CP 1 / 2 and TP 8 x CP 1 tile the rack; TP 16 breaks tp-divides-heads (8 KV heads) first.
    const auto en = search::enumerate_layouts(m, 144, t, s, {}, 72);
    CHECK(en.enumerated == 6);
    CHECK(en.invalid_by_rule.at("straddles-domain") == 1);
    CHECK(en.valid.size() == 3);
    // Without a domain (0) the rule is not applied.
    CHECK(search::enumerate_layouts(m, 144, t, s, {}, 0).invalid_by_rule.count("straddles-domain") == 0);
  }
}
