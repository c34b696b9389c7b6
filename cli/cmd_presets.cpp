// tetrasim presets [--json]: the built-in models, GPUs and clusters with their key numbers
// (docs/cli.md).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cmd_presets_costs.hpp"
#include "commands.hpp"
#include "output.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/base/units.hpp"
#include "tetra/model/moe.hpp"
#include "tetra/parallel/params.hpp"
#include "tetra/model/presets.hpp"

namespace tetra::cli {

namespace {

struct PresetsOptions {
  bool json = false;
  // --costs CLUSTER: see the marked spot in register_presets.
};

/// Learned position embeddings of gpt-arch presets are counted at this context length
/// (GPT-3's n_ctx = 2048, Brown et al. 2020 Table 2.1); llama presets have none.
constexpr int kListedSeqLen = 2048;

nlohmann::json models_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : model::model_presets()) {
    const auto params = parallel::total_params(m, kListedSeqLen);
    out.push_back({{"name", m.name},
                   {"arch", to_string(m.arch)},
                   {"layers", m.layers},
                   {"hidden", m.hidden},
                   {"ffn_hidden", m.ffn_hidden},
                   {"heads", m.heads},
                   {"kv_heads", m.kv_heads},
                   {"vocab", m.vocab},
                   {"tied_embeddings", m.tied_embeddings},
                   {"params", params},
                   {"params_b", static_cast<double>(params) / 1e9}});
    if (m.head_dim_override > 0) out.back()["head_dim"] = m.head_dim();
    if (m.moe) {
      // Mixture of experts: the expert shape and the parameters one token passes through.
      const auto active = parallel::active_params(m, kListedSeqLen);
      out.back()["moe"] = {{"num_experts", m.moe->num_experts},
                           {"experts_per_token", m.moe->experts_per_token},
                           {"moe_ffn_hidden", m.moe->moe_ffn_hidden},
                           {"shared_ffn_hidden", m.moe->shared_width()},
                           {"first_k_dense", m.moe->first_k_dense},
                           {"moe_layers", model::moe_layer_count(m)},
                           {"router", to_string(m.moe->router)},
                           {"active_params", active},
                           {"active_params_b", static_cast<double>(active) / 1e9}};
    }
    if (m.mla) {
      out.back()["mla"] = {{"q_lora_rank", m.mla->q_lora_rank},
                           {"kv_lora_rank", m.mla->kv_lora_rank},
                           {"qk_nope_head_dim", m.mla->qk_nope_head_dim},
                           {"qk_rope_head_dim", m.mla->qk_rope_head_dim},
                           {"v_head_dim", m.mla->v_head_dim}};
    }
  }
  return out;
}

nlohmann::json gpus_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& g : hw::gpu_presets()) {
    out.push_back({{"name", g.name},
                   {"memory_bytes", g.memory_bytes},
                   {"memory_gib", g.memory_bytes / units::kGiB},
                   {"bf16_tflop_per_s", g.bf16_peak_flops / 1e12},
                   {"fp8_tflop_per_s", g.fp8_peak_flops / 1e12},
                   {"fp4_tflop_per_s", g.fp4_peak_flops / 1e12},
                   {"hbm_tbytes_per_s", g.hbm_bandwidth_Bps / 1e12},
                   {"host_link_gbytes_per_s", g.host_link_Bps / 1e9},
                   {"sms", g.sms},
                   {"compute_capability", g.compute_capability},
                   {"source", g.source}});
  }
  return out;
}

nlohmann::json clusters_json() {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : hw::cluster_presets()) {
    out.push_back({{"name", c.name},
                   {"gpu", c.gpu.name},
                   {"gpus_per_node", c.gpus_per_node},
                   {"nvlink_domain", c.nvlink_domain()},
                   {"intra_kind", hw::to_string(c.intra.kind)},
                   {"nvlink_gbytes_per_s", c.intra.bandwidth_Bps / 1e9},
                   {"intra_latency_us", c.intra.latency_s * 1e6},
                   {"nvls", c.intra.nvls},
                   {"nics_per_node", c.inter.nics_per_node},
                   {"nic_gbits_per_s", c.inter.nic_bandwidth_Bps * 8 / 1e9},
                   {"inter_latency_us", c.inter.latency_s * 1e6},
                   {"source", c.source}});
  }
  return out;
}

std::string models_table() {
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : model::model_presets()) {
    rows.push_back({m.name, to_string(m.arch), std::to_string(m.layers),
                    std::to_string(m.hidden), std::to_string(m.ffn_hidden),
                    std::to_string(m.heads), std::to_string(m.kv_heads), std::to_string(m.vocab),
                    m.tied_embeddings ? "yes" : "no",
                    fixed(static_cast<double>(parallel::total_params(m, kListedSeqLen)) / 1e9, 2)});
  }
  return format_table(
      {"model", "arch", "layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "tied", "params B"},
      rows);
}

std::string gpus_table() {
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : hw::gpu_presets()) {
    auto rate = [](double flops) { return flops > 0 ? fixed(flops / 1e12, 0) : std::string("-"); };
    rows.push_back({g.name, fixed(g.memory_bytes / units::kGiB, 2), rate(g.bf16_peak_flops), rate(g.fp8_peak_flops),
                    rate(g.fp4_peak_flops), fixed(g.hbm_bandwidth_Bps / 1e12, 3),
                    fixed(g.host_link_Bps / 1e9, 0), std::to_string(g.sms), g.source});
  }
  return format_table(
      {"gpu", "memory GiB", "bf16 TFLOP/s", "fp8", "fp4", "HBM TB/s", "host link GB/s", "SMs", "source"}, rows);
}

std::string clusters_table() {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : hw::cluster_presets()) {
    rows.push_back({c.name, c.gpu.name, std::to_string(c.gpus_per_node), std::to_string(c.nvlink_domain()),
                    std::string(hw::to_string(c.intra.kind)) + (c.intra.nvls ? "+nvls" : ""),
                    fixed(c.intra.bandwidth_Bps / 1e9, 0),
                    std::to_string(c.inter.nics_per_node) + " x " +
                        fixed(c.inter.nic_bandwidth_Bps * 8 / 1e9, 0),
                    c.source});
  }
  return format_table(
      {"cluster", "gpu", "GPUs/node", "NVLink domain", "intra", "NVLink GB/s", "NICs x Gb/s", "source"}, rows);
}

int run_presets(const PresetsOptions& opts) {
  if (opts.json) {
    print_json({{"models", models_json()}, {"gpus", gpus_json()}, {"clusters", clusters_json()}});
    return 0;
  }
  std::cout << "Models (params counted unpadded; gpt positions at " << kListedSeqLen << ")\n"
            << models_table() << "\nGPUs (dense tensor-core peaks, TFLOP/s; '-': none; host link per direction)\n"
            << gpus_table()
            << "\nClusters (per node; NVLink per GPU per direction; NVLink domain in GPUs; NICs per node)\n"
            << clusters_table();
  return 0;
}

}  // namespace

void register_presets(CLI::App& app, Action& action) {
  auto opts = std::make_shared<PresetsOptions>();
  auto* cmd = app.add_subcommand("presets", "List built-in models, GPUs and clusters");
  cmd->add_flag("--json", opts->json, "Machine-readable output on stdout");
  // ---- --costs CLUSTER -------------------------------------------------------------------
  // Reserved: `--costs CLUSTER` prints the cost-model numbers of a cluster preset. It is
  // implemented in cmd_presets_costs.cpp as `int print_preset_costs(const PresetCostOptions&)`;
  // register the option here and dispatch to it in the callback below when it is set.
  auto costs = std::make_shared<PresetCostOptions>();
  cmd->add_option("--costs", costs->cluster,
                  "Print the cost model of a cluster preset: per-op times of one layer and "
                  "collective busbw against size");
  cmd->add_option("--model", costs->model, "Model preset for --costs")->capture_default_str();
  cmd->add_option("--layout", costs->layout, "Layout for --costs (--layout syntax)")->capture_default_str();
  cmd->add_option("--seq", costs->seq, "Sequence length for --costs")->capture_default_str();
  // -----------------------------------------------------------------------------------------
  cmd->callback([&action, opts, costs] {
    action = [opts, costs] {
      if (!costs->cluster.empty()) {
        costs->json = opts->json;
        return print_preset_costs(*costs);
      }
      return run_presets(*opts);
    };
  });
}

}  // namespace tetra::cli
