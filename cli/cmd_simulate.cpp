// tetrasim simulate SCENARIO [--layout L] [--trace FILE [--trace-detail D]] [--html FILE] [--json]:
// one training step simulated (docs/cli.md): step time, throughput, MFU, bubble, exposed
// communication, memory peaks; --trace writes a Chrome / Perfetto trace (streamed, every slice
// or the steady state folded), --html a page with the per-stage memory and the step's timeline
// (both written whole or not at all).

#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "band.hpp"
#include "commands.hpp"
#include "html_pages.hpp"
#include "output.hpp"
#include "utilization.hpp"
#include "tetra/scenarios/compact_layout.hpp"
#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/base/error.hpp"
#include "tetra/base/units.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/report/report.hpp"
#include "tetra/scenarios/profile_io.hpp"
#include "tetra/scenarios/scenario.hpp"
#include "tetra/sim/simulator.hpp"

namespace tetra::cli {

namespace {

struct SimulateArgs {
  std::string scenario;
  std::string layout;
  std::string trace;
  std::string trace_detail = "auto";
  std::string html;
  std::string fit;
  bool json = false;
};

/// What each stage's peak holds, GiB (the memory model at the simulated in-flight count).
nlohmann::json stage_memory_json(const costmodel::StageMemory& m, bool moe) {
  nlohmann::json j{{"params_gib", gib3(m.params_bytes)},         {"fp8_cache_gib", gib3(m.fp8_cache_bytes)},
                   {"grads_gib", gib3(m.grads_bytes)},           {"optimizer_gib", gib3(m.optimizer_bytes)},
                   {"activations_gib", gib3(m.activations_bytes)}, {"buffers_gib", gib3(m.buffers_bytes)},
                   {"allocated_gib", gib3(m.allocated_bytes)},   {"reserved_gib", gib3(m.reserved_bytes)}};
  if (moe) {  // the routed experts' part of the states and of the activations
    j["expert_states_gib"] = gib3(m.expert_states_bytes);
    j["expert_activations_gib"] = gib3(m.expert_activations_bytes);
  }
  return j;
}

/// The object `simulate --json` prints.
nlohmann::json simulate_json(const scenarios::Scenario& sc, const sim::Result& r,
                             const costmodel::StepBand& band, const costmodel::Utilization& u) {
  nlohmann::json j;
  j["scenario"] = sc.path;
  j["model"] = sc.model.name;
  j["cluster"] = sc.cluster.name;
  j["gpus"] = sc.cluster.total_gpus();
  j["step_time_s"] = round_to(r.step_time_s, 6);
  j["step_time_band_s"] = band_json(band, r.step_time_s);
  j["tokens_per_s"] = round_to(r.tokens_per_s, 1);
  j["tokens_per_s_per_gpu"] = round_to(r.tokens_per_s_per_gpu, 2);
  j["tflops_per_gpu"] = round_to(r.tflops_per_gpu, 2);
  j["mfu"] = round_to(r.mfu, 4);
  add_utilization_json(j, u, 4);
  j["bubble_fraction"] = round_to(r.bubble_fraction, 4);
  j["exposed_comm_s"] = {{"tp", round_to(r.exposed.tp, 6)},
                         {"cp", round_to(r.exposed.cp, 6)},
                         {"pp", round_to(r.exposed.pp, 6)},
                         {"dp", round_to(r.exposed.dp, 6)}};
  if (sc.model.is_moe()) j["exposed_comm_s"]["ep"] = round_to(r.exposed.ep, 6);
  if (sc.model.is_moe() || r.host_wait_s > 0) j["host_wait_s"] = round_to(r.host_wait_s, 6);
  if (sc.layout.offload_layers > 0) j["offload_exposed_s"] = round_to(r.offload_exposed_s, 6);
  if (r.data_loader_wait_s > 0) {
    j["data_loader_s"] = round_to(r.data_loader_s, 6);
    j["data_loader_wait_s"] = round_to(r.data_loader_wait_s, 6);
  }
  j["fits"] = r.fits;
  j["peak_gib"] = gib3(r.peak_bytes);
  j["capacity_gib"] = gib3(r.memory.capacity_bytes);
  j["usable_gib"] = gib3(r.memory.usable_bytes);
  j["micro_batches"] = r.micro_batches;
  j["layer_forward_s"] = round_to(r.layer_forward_s, 9);
  j["layer_backward_s"] = round_to(r.layer_backward_s, 9);
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : r.stages) {
    stages.push_back({{"stage", s.stage},
                      {"layers", s.layers},
                      {"peak_gib", gib3(s.peak_bytes)},
                      {"busy_s", round_to(s.busy_s, 6)},
                      {"idle_s", round_to(s.idle_s, 6)},
                      {"inflight_micro_batches", round_to(s.inflight, 4)},
                      {"memory", stage_memory_json(r.memory.stages[static_cast<std::size_t>(s.stage)], sc.model.is_moe())}});
  }
  j["stages"] = std::move(stages);
  j["layout"] = layout_json(r.layout);
  j["events"] = r.events;
  return j;
}

/// The --trace-detail word; one line naming the option and the words it takes otherwise.
sim::TraceDetail trace_detail_of(const std::string& word) {
  const auto detail = sim::parse_trace_detail(word);
  if (!detail) {
    throw UserError(SourceLocation{"--trace-detail"}, "",
                    "unknown value \"" + word + "\" (expected one of: full, aggregated, auto)");
  }
  return *detail;
}

int run_simulate(const SimulateArgs& args) {
  const sim::TraceDetail detail = trace_detail_of(args.trace_detail);
  const scenarios::Scenario sc = scenarios::load_scenario(args.scenario, args.layout, true);
  costmodel::CostParams costs = costmodel::cost_params(sc.cluster, sc.profile ? &*sc.profile : nullptr);
  std::optional<fit::FitSummary> fitted;
  if (!args.fit.empty()) {
    fitted = scenarios::read_fitted(args.fit);
    costmodel::apply_factors(fitted->factors, costs);
  }
  const sim::SimInput in = sim::sim_input(sc.model, sc.cluster, sc.training, sc.layout, costs);
  sim::SimOptions options;
  options.record_trace = !args.trace.empty() || !args.html.empty();
  options.memory_fraction = sc.search.memory_fraction;
  sim::Simulator simulator;
  const sim::Result r = simulator.run(in, options);
  const costmodel::StepBand band = band_for(sc.training.framework, fitted ? &*fitted : nullptr, args.fit);
  const costmodel::Utilization u =
      costmodel::utilization(sc.model, sc.training, r.layout, sc.cluster.gpu, r.tflops_per_gpu * 1e12);
  const nlohmann::json j = simulate_json(sc, r, band, u);
  std::vector<OutputFile> outputs;  // written together, or none of them
  const sim::TraceDetail written = args.trace.empty() ? detail : simulator.trace_detail(detail);
  if (!args.trace.empty()) {
    outputs.push_back({args.trace, "", [&](std::ostream& out) { simulator.write_chrome_trace(out, written); }});
  }
  if (!args.html.empty()) outputs.push_back({args.html, report::simulate_html(simulate_page(
                                              j, simulator,
                                              scenarios::compact_layout(r.layout, sc.training.fp8, sc.training.torch.compile)))});
  write_outputs(outputs);
  if (args.json) {
    print_json(j);
    return 0;
  }
  const auto& l = r.layout;
  std::cout << "scenario  " << sc.path << '\n'
            << "model     " << sc.model.name << " on " << sc.cluster.name << " ("
            << sc.cluster.total_gpus() << " GPUs)\n"
            << "layout    " << scenarios::compact_layout(l, sc.training.fp8, sc.training.torch.compile)
            << "\n          " << r.micro_batches << " micro-batches per step\n\n";
  std::vector<std::vector<std::string>> rows{
      {"step time", fixed(r.step_time_s, 3) + " s"},
      {"step time band", band.interval(r.step_time_s) ? interval_text(band, r.step_time_s) : "none"},
      {"tokens/s", fixed(r.tokens_per_s, 0)},
      {"tokens/s per GPU", fixed(r.tokens_per_s_per_gpu, 1)},
      {"TFLOP/s per GPU", fixed(r.tflops_per_gpu, 1)},
      {"MFU, of " + peak_text(u.mfu_peak), fixed(r.mfu * 100.0, 1) + " %"},
      {"HFU, recomputation counted", fixed(u.hfu * 100.0, 1) + " %"},
      {"pipeline bubble", fixed(r.bubble_fraction * 100.0, 1) + " %"},
      {"exposed TP comm", fixed(r.exposed.tp, 3) + " s"},
      {"exposed CP comm", fixed(r.exposed.cp, 3) + " s"},
      {"exposed PP comm", fixed(r.exposed.pp, 3) + " s"},
      {"exposed DP comm", fixed(r.exposed.dp, 3) + " s"},
      {"peak memory", fixed(r.peak_bytes / units::kGiB, 2) + " GiB of " +
                          fixed(r.memory.capacity_bytes / units::kGiB, 2) + (r.fits ? " (fits)" : " (does not fit)")}};
  if (sc.model.is_moe()) {
    // After the DP row: the MoE dispatch and combine left on the critical path.
    rows.insert(rows.begin() + 12, {"exposed EP comm", fixed(r.exposed.ep, 3) + " s"});
  }
  if (other_precision(u)) {
    // After HFU: the share of the peak of the format the GEMMs run in.
    rows.insert(rows.begin() + 7, {"model FLOPs, of " + peak_text(u.precision_peak),
                                   fixed(u.precision_peak_utilization * 100.0, 1) + " %"});
  }
  if (sc.model.is_moe() || r.host_wait_s > 0) {
    // Before the memory row: the GPU idle while the host issues kernels.
    rows.insert(rows.end() - 1, {"GPU waiting for host", fixed(r.host_wait_s, 3) + " s"});
  }
  if (sc.layout.offload_layers > 0) {
    // Before the memory row: the activation copies to and from the host the layers could not hide.
    rows.insert(rows.end() - 1, {"waiting for offload copies", fixed(r.offload_exposed_s, 3) + " s"});
  }
  if (r.data_loader_wait_s > 0) {
    // Before the memory row: the step paced by the host building its micro-batches.
    rows.insert(rows.end() - 1, {"waiting for the data loader", fixed(r.data_loader_wait_s, 3) + " s (it needs " +
                                                                    fixed(r.data_loader_s, 3) + " s a step)"});
  }
  std::cout << format_table({"metric", "value"}, rows) << '\n';
  std::vector<std::vector<std::string>> st;
  for (const auto& s : r.stages) {
    st.push_back({std::to_string(s.stage), std::to_string(s.layers), fixed(s.busy_s, 3), fixed(s.idle_s, 3),
                  fixed(s.inflight, 2), fixed(s.peak_bytes / units::kGiB, 2)});
  }
  std::cout << format_table({"stage", "layers", "busy s", "idle s", "in flight", "peak GiB"}, st);
  std::cout << "\nband      " << band_basis_text(band) << '\n';
  if (!args.trace.empty()) {
    std::cout << "\ntrace     " << args.trace
              << (written == sim::TraceDetail::aggregated
                      ? " (aggregated: each stage's steady state folded; --trace-detail full keeps every slice)"
                      : "")
              << '\n';
  }
  if (!args.html.empty()) std::cout << (args.trace.empty() ? "\n" : "") << "html      " << args.html << '\n';
  return 0;
}

}  // namespace

void register_simulate(CLI::App& app, Action& action) {
  auto args = std::make_shared<SimulateArgs>();
  auto* cmd = app.add_subcommand("simulate", "simulate one training step: time, throughput, MFU, "
                                             "bubble, exposed communication, memory peaks");
  cmd->add_option("scenario", args->scenario, "scenario TOML file")->required();
  cmd->add_option("--layout", args->layout, "layout overrides, e.g. tp=2,pp=4,schedule=interleaved");
  cmd->add_option("--trace", args->trace, "write a Chrome/Perfetto trace JSON to FILE");
  cmd->add_option("--trace-detail", args->trace_detail,
                  "full (every slice), aggregated (first and last micro-batches, each stage's steady state "
                  "folded) or auto (full unless that would exceed about 50 MB; the default)");
  cmd->add_option("--html", args->html,
                  "write a self-contained HTML page (per-stage memory, the step's timeline) to FILE");
  cmd->add_option("--fit", args->fit, "apply the cluster factors of this fitted file (tetrasim fit -o)");
  cmd->add_flag("--json", args->json, "machine-readable output on stdout");
  cmd->callback([&action, args] { action = [args] { return run_simulate(*args); }; });
}

}  // namespace tetra::cli
