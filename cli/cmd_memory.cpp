// tetrasim memory SCENARIO [--layout L] [--json]: the per-stage memory of one GPU of every
// pipeline rank and the fit verdict (docs/cli.md). Not fitting is a verdict, not an error.

#include <cmath>
#include <iostream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "output.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/base/units.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/model/moe.hpp"
#include "tetra/parallel/params.hpp"
#include "tetra/scenarios/scenario.hpp"

namespace tetra::cli {

namespace {

struct MemoryArgs {
  std::string scenario;
  std::string layout;
  bool json = false;
};

/// The JSON object of `tetrasim memory --json`.
nlohmann::json memory_json(const scenarios::Scenario& sc, const costmodel::MemoryOptions& options,
                           const costmodel::MemoryReport& rep) {
  const bool moe = sc.model.moe.has_value();
  nlohmann::json j;
  j["scenario"] = sc.path;
  j["model"] = sc.model.name;
  j["cluster"] = sc.cluster.name;
  j["gpus"] = sc.cluster.total_gpus();
  j["layout"] = layout_json(sc.layout);
  j["micro_batches"] = parallel::micro_batches(sc.layout, sc.training);
  j["capacity_gib"] = gib3(rep.capacity_bytes);
  j["usable_gib"] = gib3(rep.usable_bytes);
  j["memory_fraction"] = options.memory_fraction;
  j["fits"] = rep.fits;
  j["peak_gib"] = gib3(rep.peak_bytes);
  j["headroom_gib"] = gib3(rep.headroom_bytes);
  j["peak_stage"] = rep.peak_stage;
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : rep.stages) {
    nlohmann::json st;
    st["stage"] = s.stage;
    st["layers"] = s.layers;
    st["params_gib"] = gib3(s.params_bytes);
    st["fp8_cache_gib"] = gib3(s.fp8_cache_bytes);
    st["grads_gib"] = gib3(s.grads_bytes);
    st["optimizer_gib"] = gib3(s.optimizer_bytes);
    st["activations_gib"] = gib3(s.activations_bytes);
    st["buffers_gib"] = gib3(s.buffers_bytes);
    st["inflight_micro_batches"] = s.inflight;
    st["allocated_gib"] = gib3(s.allocated_bytes);
    st["reserved_gib"] = gib3(s.reserved_bytes);
    // torch.cuda.max_memory_reserved's view: the cache it would release at the limit too.
    st["torch_reserved_gib"] = gib3(s.torch_reserved_bytes - s.outside_allocator_bytes);
    st["total_gib"] = gib3(s.reserved_bytes);
    if (moe) {
      st["moe_layers"] = s.moe_layers;
      st["expert_states_gib"] = gib3(s.expert_states_bytes);
      st["expert_activations_gib"] = gib3(s.expert_activations_bytes);
      st["dispatch_gib"] = gib3(s.dispatch_bytes);
    }
    stages.push_back(std::move(st));
  }
  j["stages"] = std::move(stages);
  if (moe) {
    nlohmann::json e;
    e["num_experts"] = sc.model.moe->num_experts;
    e["experts_per_token"] = sc.model.moe->experts_per_token;
    e["moe_layers"] = model::moe_layer_count(sc.model);
    e["ep"] = sc.layout.ep;
    e["etp"] = sc.layout.etp;
    e["edp"] = sc.layout.edp();
    e["total_params"] = parallel::total_params(sc.model, sc.training.seq_len);
    e["active_params"] = parallel::active_params(sc.model, sc.training.seq_len);
    e["routing_imbalance"] = sc.training.moe_imbalance;
    if (sc.training.moe_capacity_factor) {
      e["capacity_factor"] = *sc.training.moe_capacity_factor;
      e["pad_to_capacity"] = sc.training.moe_pad_to_capacity;
    }
    j["moe"] = std::move(e);
  }
  return j;
}

/// The text report of `tetrasim memory`: the run, the per-stage table, the verdict.
void print_memory_text(const scenarios::Scenario& sc, const costmodel::MemoryOptions& options,
                       const costmodel::MemoryReport& rep) {
  const bool moe = sc.model.moe.has_value();

  std::cout << "scenario  " << sc.path << '\n'
            << "model     " << sc.model.name << ": " << sc.model.layers << " layers, hidden "
            << sc.model.hidden << ", " << sc.model.heads << " heads (" << sc.model.kv_heads
            << " KV), vocab " << sc.model.vocab << '\n'
            << "cluster   " << sc.cluster.name << ": " << sc.cluster.nodes << " x "
            << sc.cluster.gpus_per_node << " " << sc.cluster.gpu.name << " ("
            << sc.cluster.total_gpus() << " GPUs)\n"
            << "layout    " << scenarios::format_layout(sc.layout) << '\n'
            << "training  seq " << sc.training.seq_len << ", global batch "
            << sc.training.global_batch << ", " << parallel::micro_batches(sc.layout, sc.training)
            << " micro-batches per step, zero_stage " << sc.training.zero_stage << ", "
            << to_string(sc.training.attention);
  if (sc.training.fp8.enabled()) {
    std::cout << ", fp8 " << to_string(sc.training.fp8.recipe)
              << (sc.training.fp8.param_gather ? " (fp8_param_gather)" : "");
  }
  std::cout << "\n\n";

  // The FP8 weight caches get their own column when the run has them.
  const bool fp8 = sc.training.fp8.enabled();
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : rep.stages) {
    std::vector<std::string> row{std::to_string(s.stage), std::to_string(s.layers),
                                 fixed(gib(s.params_bytes), 2)};
    if (fp8) row.push_back(fixed(gib(s.fp8_cache_bytes), 2));
    for (double v : {s.grads_bytes, s.optimizer_bytes, s.activations_bytes, s.buffers_bytes,
                     s.allocated_bytes, s.reserved_bytes}) {
      row.push_back(fixed(gib(v), 2));
    }
    rows.push_back(std::move(row));
  }
  std::vector<std::string> header{"stage", "layers", "params"};
  if (fp8) header.emplace_back("fp8 cache");
  for (const char* h : {"grads", "optimizer", "activations", "buffers", "allocated", "reserved"}) {
    header.emplace_back(h);
  }
  std::cout << "memory of one GPU per pipeline stage, GiB\n" << format_table(header, rows) << '\n';
  if (moe) {
    const model::Moe& e = *sc.model.moe;
    std::cout << "experts   " << e.num_experts << " routed (top-" << e.experts_per_token << ")"
              << (e.shared_width() > 0 ? " + shared" : "") << " in " << model::moe_layer_count(sc.model)
              << " MoE layers; "
              << fixed(static_cast<double>(parallel::total_params(sc.model, sc.training.seq_len)) / 1e9, 1)
              << "B parameters, "
              << fixed(static_cast<double>(parallel::active_params(sc.model, sc.training.seq_len)) / 1e9, 1)
              << "B active; ep " << sc.layout.ep << ", etp " << sc.layout.etp << ", expert data parallel "
              << sc.layout.edp() << "\n";
    std::vector<std::vector<std::string>> erows;
    for (const auto& s : rep.stages) {
      erows.push_back({std::to_string(s.stage), std::to_string(s.moe_layers),
                       fixed(gib(s.expert_states_bytes), 2), fixed(gib(s.expert_activations_bytes), 2),
                       fixed(gib(s.dispatch_bytes), 2)});
    }
    std::cout << "expert part of the columns above, GiB\n"
              << format_table({"stage", "moe layers", "expert states", "expert activations", "dispatch"}, erows)
              << '\n';
  }
  std::cout << "capacity  " << fixed(gib(rep.capacity_bytes), 2) << " GiB\n"
            << "usable    " << fixed(gib(rep.usable_bytes), 2) << " GiB ("
            << fixed(options.memory_fraction * 100.0, 0) << "% planning margin)\n"
            << "peak      " << fixed(gib(rep.peak_bytes), 2) << " GiB reserved on stage "
            << rep.peak_stage;
  if (sc.training.expandable_segments) {
    // The allocator hands cached pages back at the device's limit: allocated is what must fit.
    std::cout << " (" << fixed(gib(rep.stages[static_cast<std::size_t>(rep.peak_stage)].allocated_bytes), 2)
              << " allocated; expandable segments)";
  }
  std::cout << '\n';
  if (!rep.fits) {
    std::cout << "fits      no: stage " << rep.peak_stage << " needs "
              << fixed(gib(rep.peak_bytes), 2) << " GiB of " << fixed(gib(rep.capacity_bytes), 2)
              << " (out of memory)\n";
  } else if (rep.peak_bytes > rep.usable_bytes) {
    std::cout << "fits      yes, but above the " << fixed(options.memory_fraction * 100.0, 0)
              << "% planning margin\n";
  } else {
    std::cout << "fits      yes\n";
  }
}

int run_memory(const MemoryArgs& args) {
  const scenarios::Scenario sc = scenarios::load_scenario(args.scenario, args.layout, true);
  costmodel::MemoryOptions options;
  options.memory_fraction = sc.search.memory_fraction;
  const costmodel::MemoryReport rep =
      costmodel::estimate_memory(sc.model, sc.cluster, sc.training, sc.layout, options);
  if (args.json) {
    print_json(memory_json(sc, options, rep));
  } else {
    print_memory_text(sc, options, rep);
  }
  return 0;
}


}  // namespace

void register_memory(CLI::App& app, Action& action) {
  auto args = std::make_shared<MemoryArgs>();
  auto* cmd = app.add_subcommand("memory", "per-stage memory breakdown and the fit verdict");
  cmd->add_option("scenario", args->scenario, "scenario TOML file")->required();
  cmd->add_option("--layout", args->layout,
                  "override [layout] keys, e.g. tp=2,pp=4,mbs=1,recompute=selective");
  cmd->add_flag("--json", args->json, "machine-readable output on stdout");
  cmd->callback([&action, args] { action = [args] { return run_memory(*args); }; });
}

}  // namespace tetra::cli
