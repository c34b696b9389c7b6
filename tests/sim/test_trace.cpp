// The Chrome trace of a simulated step: EP slices of MoE layers, the aggregated detail.
#include <doctest/doctest.h>
#include "support/trace_text.hpp"

#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/parallel/validate.hpp"
#include "tetra/sim/simulator.hpp"

using namespace tetra;

namespace {

struct Fixture {
  model::Model model;
  hw::Cluster cluster;
  parallel::Training training;
  costmodel::CostParams costs;
  Fixture(const char* model_name, int nodes, int seq_len, int global_batch) {
    model = *model::find_model_preset(model_name);
    cluster = *hw::find_cluster_preset("dgx-h100");
    cluster.nodes = nodes;
    costs = costmodel::cost_params(cluster);
    training.seq_len = seq_len;
    training.global_batch = global_batch;
  }
  /// The step of `l` recorded for a trace.
  sim::Result run(sim::Simulator& s, const parallel::Layout& l) const {
    REQUIRE_FALSE(parallel::check_layout(model, cluster.total_gpus(), training, l));
    sim::SimOptions o;
    o.record_trace = true;
    return s.run(sim::sim_input(model, cluster, training, l, costs), o);
  }
};

/// What a trace holds, read event by event without keeping them.
struct TraceSums {
  std::map<std::string, double> dur_by_cat;                    ///< "X" durations, µs
  std::map<std::pair<int, std::string>, double> dur_by_stage;  ///< (pid, cat) -> µs
  std::set<std::string> ep_names;
  std::set<std::string> threads;
  int folded = 0;  ///< slices that stand for several (aggregated_slices)
};

TraceSums read_trace(const std::string& trace) {
  TraceSums t;
  using J = nlohmann::json;
  J::parser_callback_t keep = [&](int depth, J::parse_event_t event, J& e) {
    if (event != J::parse_event_t::object_end || depth != 2) return true;
    const std::string ph = e.at("ph").get<std::string>();
    if (ph == "M" && e.at("name") == "thread_name") t.threads.insert(e.at("args").at("name").get<std::string>());
    if (ph == "X") {
      const std::string cat = e.at("cat").get<std::string>();
      const double dur = e.at("dur").get<double>();
      CHECK(dur >= 0);
      t.dur_by_cat[cat] += dur;
      t.dur_by_stage[{e.at("pid").get<int>(), cat}] += dur;
      if (cat == "ep") t.ep_names.insert(e.at("name").get<std::string>());
      if (e.at("args").contains("aggregated_slices")) ++t.folded;
    }
    return false;  // read, not kept
  };
  const J root = J::parse(trace, keep);  // throws on text that is not JSON
  CHECK(root.at("traceEvents").empty());
  CHECK(root.at("displayTimeUnit") == "ms");
  return t;
}

}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("trace: a MoE step's EP dispatch and combine are slices summing to each stage's EP traffic") {
    struct Case {
      const char* what;
      const char* model;
      parallel::Layout layout;
      int mtp = 0;
    };
    parallel::Layout maverick;  // MoE on every second layer
    maverick.tp = 2;
    maverick.sp = true;
    maverick.pp = 2;
    maverick.dp = 4;
    maverick.ep = 4;
    maverick.recompute = parallel::Recompute::full;
    parallel::Layout qwen = maverick;  // every layer MoE, split backward
    qwen.recompute = parallel::Recompute::none;
    qwen.schedule = parallel::Schedule::zb_h1;
    parallel::Layout deepseek;  // three dense layers first, one multi-token-prediction module
    deepseek.dp = 16;
    deepseek.ep = 16;
    const Case cases[] = {{"llama4-maverick, full recompute", "llama4-maverick", maverick},
                          {"qwen3-30b-a3b, zb-h1", "qwen3-30b-a3b", qwen},
                          {"deepseek-v3 with MTP", "deepseek-v3", deepseek, 1}};
    for (const Case& c : cases) {
      CAPTURE(c.what);
      Fixture f(c.model, 2, 4096, 32);
      f.model.mtp_layers = c.mtp;
      sim::Simulator s;
      const sim::Result r = f.run(s, c.layout);
      const TraceSums t = read_trace(tetra::test::trace_text(s));
      CHECK(t.threads.count("ep comm") == 1);
      // The all-to-all dispatcher's count all-gather and probabilities exchange run on the EP
      // stream beside the tokens' dispatch and combine.
      CHECK(t.ep_names == std::set<std::string>{"ep_combine", "ep_combine_bwd", "ep_count_ag", "ep_dispatch",
                                                "ep_dispatch_bwd", "ep_probs_dispatch", "ep_probs_dispatch_bwd"});
      for (const sim::StageResult& st : r.stages) {
        CAPTURE(st.stage);
        REQUIRE(st.ep_comm_s > 0);
        const auto it = t.dur_by_stage.find({st.stage, "ep"});
        REQUIRE(it != t.dur_by_stage.end());
        CHECK(it->second * 1e-6 == doctest::Approx(st.ep_comm_s).epsilon(1e-9));
      }
    }
  }

  TEST_CASE("trace: a dense step has no EP slices and no EP thread") {
    Fixture f("llama3.1-8b", 2, 4096, 32);
    parallel::Layout l;
    l.tp = 2;
    l.pp = 2;
    l.dp = 4;
    l.sp = true;
    sim::Simulator s;
    const sim::Result r = f.run(s, l);
    const TraceSums t = read_trace(tetra::test::trace_text(s));
    CHECK(t.dur_by_cat.count("ep") == 0);
    CHECK(t.threads.count("ep comm") == 0);
    CHECK(t.dur_by_cat.at("tp") > 0);
    for (const sim::StageResult& st : r.stages) CHECK(st.ep_comm_s == 0);
  }

  TEST_CASE("trace: the aggregated trace of hundreds of micro-batches is small and keeps every kind's total") {
    // Llama-3.1-8B, pp 4, dp 4: 256 micro-batches per step.
    Fixture f("llama3.1-8b", 4, 4096, 1024);
    parallel::Layout l;
    l.tp = 2;
    l.pp = 4;
    l.dp = 4;
    l.sp = true;
    sim::Simulator s;
    const sim::Result r = f.run(s, l);
    REQUIRE(r.micro_batches == 256);
    const std::string full = tetra::test::trace_text(s, sim::TraceDetail::full);
    const std::string folded = tetra::test::trace_text(s, sim::TraceDetail::aggregated);
    CAPTURE(full.size());
    CAPTURE(folded.size());
    // Slice by slice only the first and the last kTraceKeptMicroBatches micro-batches (plus
    // the pipeline's warm-up and cool-down): a tenth of the full trace here.
    CHECK(folded.size() * 10 < full.size());
    CHECK(folded.size() < 1'000'000);
    const TraceSums a = read_trace(full), b = read_trace(folded);
    CHECK(a.folded == 0);
    CHECK(b.folded > 0);
    REQUIRE(a.dur_by_cat.size() == b.dur_by_cat.size());
    for (const auto& [cat, dur] : a.dur_by_cat) {
      CAPTURE(cat);
      CHECK(b.dur_by_cat.at(cat) == doctest::Approx(dur).epsilon(1e-6));
    }
    CHECK(s.trace_detail(sim::TraceDetail::automatic) == sim::TraceDetail::full);  // under 50 MB
    CHECK(tetra::test::trace_text(s, sim::TraceDetail::automatic) == full);
  }

  TEST_CASE("trace: detail words") {
    for (sim::TraceDetail d : {sim::TraceDetail::full, sim::TraceDetail::aggregated, sim::TraceDetail::automatic}) {
      CHECK(sim::parse_trace_detail(sim::to_string(d)) == d);
    }
    CHECK(sim::to_string(sim::TraceDetail::automatic) == std::string("auto"));
    CHECK_FALSE(sim::parse_trace_detail("Full"));
    CHECK_FALSE(sim::parse_trace_detail(""));
  }
}

TEST_SUITE("sim") {
  TEST_CASE("trace slices visited without JSON are the full trace's slices, stream by stream") {
    // What `simulate --html` draws: the same streams and slices as the Chrome trace holds.
    for (const char* model : {"llama3.1-8b", "qwen3-30b-a3b"}) {
      CAPTURE(model);
      Fixture f(model, 2, 4096, 32);
      parallel::Layout l;
      l.tp = 2;
      l.pp = 2;
      l.dp = 4;
      l.sp = true;
      if (std::string(model) == "qwen3-30b-a3b") l.ep = 4;
      sim::Simulator s;
      (void)f.run(s, l);
      const TraceSums t = read_trace(tetra::test::trace_text(s));
      std::set<std::string> names;
      for (const sim::TraceStream& st : s.trace_streams()) names.insert(std::string(st.name));
      CHECK(names == t.threads);
      std::map<std::pair<int, std::string>, double> by_stage;  // µs
      s.for_each_trace_slice([&](const sim::TraceSlice& x) {
        CHECK(x.end_s >= x.start_s);
        by_stage[{x.stage, std::string(x.kind)}] += (x.end_s - x.start_s) * 1e6;
      });
      REQUIRE(by_stage.size() == t.dur_by_stage.size());
      for (const auto& [key, us] : t.dur_by_stage) {
        CAPTURE(key.second);
        CHECK(by_stage.at(key) == doctest::Approx(us).epsilon(1e-9));
      }
    }
  }
}
