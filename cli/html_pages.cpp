#include "html_pages.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "band.hpp"
#include "utilization.hpp"

namespace tetra::cli {

namespace {

using nlohmann::json;

std::optional<double> opt_number(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

/// The step-time band of a JSON object, where it has one (step_time_band_s {low, high}; both
/// null when there are too few published rows for a band).
report::StepBand band_of(const json& j) {
  const auto it = j.find("step_time_band_s");
  if (it == j.end() || !it->is_object()) return {};
  return {opt_number(*it, "low"), opt_number(*it, "high")};
}

std::optional<std::size_t> opt_id(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::size_t>();
}

report::Fact fact(const json& root, const std::string& ref, const std::string& key, std::string label,
                  std::string unit = "") {
  const json& obj = root.at(json::json_pointer(ref));
  return {std::move(label), ref, key, obj.at(key).get<double>(), std::move(unit)};
}

/// "BF16 dense peak 989 TFLOP/s" from the precision and TFLOP/s keys of a JSON object.
std::string peak_words(const json& j, const char* precision, const char* tflops) {
  return peak_text(j.at(precision).get<std::string>(), j.at(tflops).get<double>());
}

}  // namespace

report::PlanPage plan_page(const json& j, const std::vector<std::string>& layouts) {
  report::PlanPage page;
  page.title = "tetrasim plan: " + j.at("model").get<std::string>() + ", " + j.at("scenario").get<std::string>();
  page.facts.push_back(fact(j, "", "tokens", "tokens to train", "SI"));
  page.facts.push_back(fact(j, "", "seq_len", "sequence length", "tokens"));
  page.facts.push_back(fact(j, "", "global_batch", "global batch", "sequences"));
  page.priced = j.at("priced").get<bool>();
  page.deadline_days = opt_number(j, "deadline_days");
  page.budget = opt_number(j, "budget");
  if (page.deadline_days) page.facts.push_back(fact(j, "", "deadline_days", "deadline", "days"));
  if (page.budget) page.facts.push_back(fact(j, "", "budget", "budget", "SI"));
  page.pue = j.at("energy_model").at("pue").get<double>();
  page.facts.push_back(fact(j, "/energy_model", "pue", "PUE of the energy"));
  if (const auto v = j.find("verdict"); v != j.end() && v->is_object()) {
    page.recommended = opt_id(*v, "recommended");
    page.fastest = opt_id(*v, "fastest");
    page.cheapest = opt_id(*v, "cheapest");
  }
  const json& rows = j.at("candidates");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const json& r = rows[i];
    report::PlanCandidate c;
    c.ref = "/candidates/" + std::to_string(i);
    c.id = r.at("id").get<std::size_t>();
    c.name = r.at("name").get<std::string>();
    c.gpu = r.at("gpu").get<std::string>();
    c.gpus = r.at("gpus").get<int>();
    c.fits = r.at("fits").get<bool>();
    if (c.fits) {
      c.layout = c.id < layouts.size() ? layouts[c.id] : std::string();
      c.step_time_s = r.at("step_time_s").get<double>();
      c.tokens_per_s = r.at("tokens_per_s").get<double>();
      c.tokens_per_s_per_gpu = r.at("tokens_per_s_per_gpu").get<double>();
      c.mfu = r.at("mfu").get<double>();
      c.hfu = r.at("hfu").get<double>();
      c.mfu_peak_tflops = r.at("mfu_peak_tflops").get<double>();
      c.gpu_power_w = r.at("gpu_power_w").get<double>();
      c.energy_mwh = opt_number(r, "energy_mwh");
      c.days = opt_number(r, "days");
      c.gpu_hours = opt_number(r, "gpu_hours");
      c.cost = opt_number(r, "cost");
      c.pareto = r.at("pareto").get<bool>();
      if (r.contains("deadline_verdict")) c.deadline_verdict = r["deadline_verdict"].get<std::string>();
      if (r.contains("budget_verdict")) c.budget_verdict = r["budget_verdict"].get<std::string>();
      c.band = band_of(r);
      c.price_per_gpu_hour = opt_number(r, "price_per_gpu_hour");
      if (const auto b = r.find("days_band"); b != r.end() && b->is_object()) {
        c.days_low = opt_number(*b, "low");
        c.days_high = opt_number(*b, "high");
      }
      if (const auto b = r.find("cost_band"); b != r.end() && b->is_object()) {
        c.cost_low = opt_number(*b, "low");
        c.cost_high = opt_number(*b, "high");
      }
      if (const auto b = r.find("energy_band"); b != r.end() && b->is_object()) {
        c.energy_low = opt_number(*b, "low");
        c.energy_high = opt_number(*b, "high");
      }
      if (page.band_basis.empty() && r.contains("step_time_band_s")) page.band_basis = band_basis_text(band_from_json(r["step_time_band_s"]));
    }
    page.candidates.push_back(std::move(c));
  }
  return page;
}

report::SearchPage search_page(const json& j, const std::vector<std::string>& layouts, std::size_t table_rows) {
  report::SearchPage page;
  page.title = "tetrasim search: " + j.at("model").get<std::string>() + " on " + j.at("cluster").get<std::string>() +
               ", " + j.at("scenario").get<std::string>();
  page.facts.push_back(fact(j, "", "gpus", "GPUs"));
  page.facts.push_back(fact(j, "/summary", "enumerated", "layouts enumerated"));
  page.facts.push_back(fact(j, "/summary", "pruned_by_memory", "pruned by memory"));
  page.facts.push_back(fact(j, "/summary", "simulated", "simulated"));
  page.facts.push_back(fact(j, "", "feasible", "ranked"));
  page.facts.push_back(fact(j, "/summary", "capacity_gib", "GPU memory", "GiB"));
  page.facts.push_back(fact(j, "/summary", "budget_gib", "memory budget", "GiB"));
  page.capacity_gib = j.at("summary").at("capacity_gib").get<double>();
  page.budget_gib = j.at("summary").at("budget_gib").get<double>();
  page.table_rows = table_rows;
  const json& rows = j.at("layouts");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const json& r = rows[i];
    report::RankedLayout l;
    l.ref = "/layouts/" + std::to_string(i);
    l.rank = static_cast<int>(i) + 1;
    l.layout = i < layouts.size() ? layouts[i] : std::string();
    l.schedule = r.at("schedule").get<std::string>();
    l.step_time_s = r.at("step_time_s").get<double>();
    l.tokens_per_s = r.at("tokens_per_s").get<double>();
    l.tokens_per_s_per_gpu = r.at("tokens_per_s_per_gpu").get<double>();
    l.mfu = r.at("mfu").get<double>();
    l.hfu = r.at("hfu").get<double>();
    l.peak_gib = r.at("peak_gib").get<double>();
    if (page.mfu_peak.empty()) page.mfu_peak = peak_words(r, "mfu_peak_precision", "mfu_peak_tflops");
    l.band = band_of(r);
    page.layouts.push_back(std::move(l));
  }
  return page;
}

report::SimulatePage simulate_page(const json& j, const sim::Simulator& simulator, const std::string& layout) {
  report::SimulatePage page;
  page.title = "tetrasim simulate: " + j.at("model").get<std::string>() + " on " + j.at("cluster").get<std::string>() +
               ", " + j.at("scenario").get<std::string>();
  page.layout = layout;
  const json& ex = j.at("exposed_comm_s");
  const bool moe = ex.contains("ep");
  page.facts = {fact(j, "", "step_time_s", "step time", "s"),
                fact(j, "", "tokens_per_s", "throughput", "tokens/s"),
                fact(j, "", "tokens_per_s_per_gpu", "throughput per GPU", "tokens/s"),
                fact(j, "", "tflops_per_gpu", "model FLOP rate per GPU", "TFLOP/s"),
                fact(j, "", "mfu", "MFU, of " + peak_words(j, "mfu_peak_precision", "mfu_peak_tflops"), "%"),
                fact(j, "", "hfu", "HFU, recomputation counted", "%"),
                fact(j, "", "bubble_fraction", "pipeline bubble", "%"),
                fact(j, "/exposed_comm_s", "tp", "exposed TP communication", "s"),
                fact(j, "/exposed_comm_s", "cp", "exposed CP communication", "s")};
  if (j.at("precision_peak") != j.at("mfu_peak_precision") && j.at("precision_peak") != "fp16") {
    // FP8 / FP4 GEMMs: the share of their own format's peak, after HFU.
    page.facts.insert(page.facts.begin() + 6,
                      fact(j, "", "precision_peak_utilization",
                           "model FLOPs, of " + peak_words(j, "precision_peak", "precision_peak_tflops"), "%"));
  }
  // MoE models: the dispatch and combine left on the critical path.
  if (moe) page.facts.push_back(fact(j, "/exposed_comm_s", "ep", "exposed EP communication", "s"));
  page.facts.push_back(fact(j, "/exposed_comm_s", "pp", "exposed PP communication", "s"));
  page.facts.push_back(fact(j, "/exposed_comm_s", "dp", "exposed DP communication", "s"));
  if (j.contains("host_wait_s")) page.facts.push_back(fact(j, "", "host_wait_s", "GPU waiting for host", "s"));
  if (j.contains("offload_exposed_s")) {
    page.facts.push_back(fact(j, "", "offload_exposed_s", "waiting for offload copies", "s"));
  }
  if (j.contains("data_loader_wait_s")) {
    page.facts.push_back(fact(j, "", "data_loader_wait_s", "waiting for the data loader", "s"));
  }
  page.facts.push_back(fact(j, "", "peak_gib", "peak memory", "GiB"));
  page.facts.push_back(fact(j, "", "micro_batches", "micro-batches"));
  page.band = band_of(j);
  if (page.band.present()) {
    page.facts.insert(page.facts.begin() + 1, fact(j, "/step_time_band_s", "low", "step time band, low", "s"));
    page.facts.insert(page.facts.begin() + 2, fact(j, "/step_time_band_s", "high", "step time band, high", "s"));
  }
  page.step_time_s = j.at("step_time_s").get<double>();
  page.capacity_gib = j.at("capacity_gib").get<double>();
  page.usable_gib = opt_number(j, "usable_gib");
  page.memory_ref = "";
  page.micro_batches = j.at("micro_batches").get<int>();
  const json& l = j.at("layout");
  for (const char* k : {"tp", "cp", "ep", "dp", "pp"}) {
    std::string name = k;
    for (char& c : name) c = static_cast<char>(c - 'a' + 'A');
    page.exchanges.push_back({name, l.value(k, 1)});
  }
  const json& stages = j.at("stages");
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const json& s = stages[i];
    const json& m = s.at("memory");
    report::StageMemory sm;
    sm.ref = "/stages/" + std::to_string(i) + "/memory";
    sm.stage = s.at("stage").get<int>();
    sm.params_gib = m.at("params_gib").get<double>();
    sm.fp8_cache_gib = m.at("fp8_cache_gib").get<double>();
    sm.grads_gib = m.at("grads_gib").get<double>();
    sm.optimizer_gib = m.at("optimizer_gib").get<double>();
    sm.activations_gib = m.at("activations_gib").get<double>();
    sm.buffers_gib = m.at("buffers_gib").get<double>();
    sm.reserved_gib = m.at("reserved_gib").get<double>();
    sm.expert_states_gib = opt_number(m, "expert_states_gib");
    sm.expert_activations_gib = opt_number(m, "expert_activations_gib");
    page.memory.push_back(sm);
    report::StageTimeline st;
    st.ref = "/stages/" + std::to_string(i);
    st.stage = sm.stage;
    st.busy_s = s.at("busy_s").get<double>();
    st.idle_s = s.at("idle_s").get<double>();
    page.timeline.push_back(std::move(st));
  }

  // One lane per stream of each stage, its slices in trace order.
  const std::vector<sim::TraceStream> streams = simulator.trace_streams();
  std::map<std::pair<int, int>, std::vector<report::Slice>> slices;  // (stage, stream) -> slices
  simulator.for_each_trace_slice([&](const sim::TraceSlice& s) {
    slices[{s.stage, s.stream}].push_back({s.start_s, s.end_s, std::string(s.kind)});
  });
  for (report::StageTimeline& st : page.timeline) {
    for (const sim::TraceStream& stream : streams) {
      report::Lane lane;
      lane.name = std::string(stream.name);
      auto it = slices.find({st.stage, stream.id});
      if (it != slices.end()) lane.slices = std::move(it->second);
      st.lanes.push_back(std::move(lane));
    }
  }
  return page;
}

}  // namespace tetra::cli
