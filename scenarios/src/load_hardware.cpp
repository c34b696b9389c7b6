// The [model] and [cluster] tables of a scenario.

#include "loader.hpp"

#include <algorithm>
#include <charconv>
#include <limits>
#include <stdexcept>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "section.hpp"
#include "tetra/costmodel/collective.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/base/units.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/scenarios/keys.hpp"

namespace tetra::scenarios::detail {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// [model]

namespace {

/// The MoE, MLA, head_dim and mtp_layers keys of [model] (model/moe.hpp), over what a preset
/// or hf_config gave. num_experts makes a model MoE; the other MoE keys need it.
template <class Blame>
void load_moe_keys(const Section& s, model::Model& m, Blame blame) {
  if (const auto* n = s.get("head_dim")) m.head_dim_override = s.int_value(*n, "head_dim", 1, kMaxWidth);
  if (const auto* n = s.get("mtp_layers")) m.mtp_layers = s.int_value(*n, "mtp_layers", 0, kMaxLayers);
  if (const auto* n = s.get("qk_norm")) m.qk_norm = s.boolean(*n, "qk_norm");

  static constexpr std::string_view kMoeKeys[] = {
      "experts_per_token", "moe_ffn_hidden",  "shared_experts", "shared_ffn_hidden",
      "first_k_dense",     "moe_layer_freq",  "interleave_moe_layer_step", "moe_router"};
  if (const auto* n = s.get("num_experts")) {
    if (!m.moe) m.moe = model::Moe{};
    m.moe->num_experts = s.int_value(*n, "num_experts", 1, kMaxWidth);
  }
  for (std::string_view k : kMoeKeys) {
    const toml::node* n = s.get(k);
    if (n == nullptr) continue;
    if (!m.moe) s.fail_at(*n, k, "needs num_experts (a MoE model)");
    model::Moe& e = *m.moe;
    if (k == "experts_per_token") e.experts_per_token = s.int_value(*n, k, 1, kMaxWidth);
    else if (k == "moe_ffn_hidden") e.moe_ffn_hidden = s.int_value(*n, k, 1, kMaxWidth);
    else if (k == "shared_experts") e.shared_experts = s.int_value(*n, k, 0, kMaxWidth);
    else if (k == "shared_ffn_hidden") e.shared_ffn_hidden = s.int_value(*n, k, 0, kMaxWidth);
    else if (k == "first_k_dense") e.first_k_dense = s.int_value(*n, k, 0, kMaxLayers);
    else if (k == "moe_layer_freq") e.moe_layer_freq = s.int_value(*n, k, 1, kMaxLayers);
    else if (k == "interleave_moe_layer_step") e.interleave_step = s.int_value(*n, k, 1, kMaxLayers);
    else if (k == "moe_router") {
      const std::string name = s.string(*n, k);
      const auto r = model::parse_router(name);
      if (!r) {
        s.fail_at(*n, k, "unknown value \"" + name +
                             "\" (expected one of: softmax_topk, topk_softmax, sigmoid_topk)");
      }
      e.router = *r;
    }
  }
  if (m.moe) {
    const model::Moe& e = *m.moe;
    if (e.experts_per_token < 1) {
      s.fail_at(blame("num_experts"), "experts_per_token", "missing (required with num_experts)");
    }
    if (e.moe_ffn_hidden < 1) {
      s.fail_at(blame("num_experts"), "moe_ffn_hidden", "missing (required with num_experts)");
    }
    if (e.experts_per_token > e.num_experts) {
      s.fail_at(blame("experts_per_token"), "experts_per_token",
                "experts_per_token (" + std::to_string(e.experts_per_token) +
                    ") must not exceed num_experts (" + std::to_string(e.num_experts) + ")");
    }
    if (e.first_k_dense >= m.layers) {
      s.fail_at(blame("first_k_dense"), "first_k_dense",
                "first_k_dense (" + std::to_string(e.first_k_dense) +
                    ") leaves no MoE layer among the " + std::to_string(m.layers) + " layers");
    }
  }

  static constexpr std::string_view kMlaKeys[] = {"kv_lora_rank", "qk_nope_head_dim",
                                                  "qk_rope_head_dim", "v_head_dim"};
  const bool any_mla = s.get("q_lora_rank") != nullptr ||
                       std::any_of(std::begin(kMlaKeys), std::end(kMlaKeys),
                                   [&](std::string_view k) { return s.get(k) != nullptr; });
  if (any_mla) {
    model::Mla a = m.mla.value_or(model::Mla{});
    if (const auto* n = s.get("q_lora_rank")) a.q_lora_rank = s.int_value(*n, "q_lora_rank", 0, kMaxWidth);
    if (const auto* n = s.get("kv_lora_rank")) a.kv_lora_rank = s.int_value(*n, "kv_lora_rank", 1, kMaxWidth);
    if (const auto* n = s.get("qk_nope_head_dim")) a.qk_nope_head_dim = s.int_value(*n, "qk_nope_head_dim", 1, kMaxWidth);
    if (const auto* n = s.get("qk_rope_head_dim")) a.qk_rope_head_dim = s.int_value(*n, "qk_rope_head_dim", 1, kMaxWidth);
    if (const auto* n = s.get("v_head_dim")) a.v_head_dim = s.int_value(*n, "v_head_dim", 1, kMaxWidth);
    const int widths[] = {a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim};
    for (std::size_t i = 0; i < std::size(kMlaKeys); ++i) {
      if (widths[i] < 1) {
        const std::string_view given = s.get("q_lora_rank") ? "q_lora_rank" : "kv_lora_rank";
        s.fail_at(blame(given), kMlaKeys[i],
                  "missing (MLA needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim)");
      }
    }
    m.mla = a;
  }
  // MLA normalises its compressed latents (always modelled); a per-head q/k norm is the
  // standard-attention form of Megatron-Core's qk_layernorm, which a preset's MLA keys drop.
  if (m.qk_norm && m.mla) {
    if (const auto* n = s.get("qk_norm")) {
      s.fail_at(*n, "qk_norm", "applies to standard attention; MLA's latent norms are part of MLA");
    }
    m.qk_norm = false;
  }
}

}  // namespace

model::Model load_model(const Doc& doc, const toml::table& table) {
  const Section s{doc, "model", table};
  s.check_keys(key_names("model"));
  model::Model m;
  m.name = "custom";
  bool base = false;
  const toml::node* preset = s.get("preset");
  const toml::node* hf = s.get("hf_config");
  if (preset != nullptr && hf != nullptr) {
    s.fail_at(*hf, "hf_config", "give either preset or hf_config, not both");
  }
  if (preset != nullptr) {
    const std::string name = s.string(*preset, "preset");
    const auto found = model::find_model_preset(name);
    if (!found) {
      s.fail_at(*preset, "preset",
                "unknown model preset \"" + name + "\" (built-ins: " + preset_names_models() + ")");
    }
    m = *found;
    base = true;
  }
  if (hf != nullptr) {
    const std::string rel = s.string(*hf, "hf_config");
    if (rel.empty()) s.fail_at(*hf, "hf_config", "empty path");
    const fs::path p = fs::path(rel).is_absolute() ? fs::path(rel) : doc.dir / rel;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) {
      s.fail_at(*hf, "hf_config", "cannot read \"" + p.generic_string() + "\": no such file");
    }
    m = model::model_from_hf_config(p.generic_string());
    base = true;
  }
  // Explicit keys, beside a preset or alone.
  if (const auto* n = s.get("arch")) {
    m.arch = enum_value(s, *n, "arch", model::parse_arch, kArch);
  }
  struct IntKey {
    std::string_view key;
    int* field;
    long long hi;
  };
  const IntKey ints[] = {{"layers", &m.layers, kMaxLayers},   {"hidden", &m.hidden, kMaxWidth},
                         {"ffn_hidden", &m.ffn_hidden, kMaxWidth}, {"heads", &m.heads, kMaxHeads},
                         {"kv_heads", &m.kv_heads, kMaxHeads}, {"vocab", &m.vocab, kMaxVocab}};
  for (const auto& ik : ints) {
    if (const auto* n = s.get(ik.key)) *ik.field = s.int_value(*n, ik.key, 1, ik.hi);
  }
  if (const auto* n = s.get("tied_embeddings")) m.tied_embeddings = s.boolean(*n, "tied_embeddings");
  if (!base) {
    for (const auto& ik : ints) {
      if (ik.key == "kv_heads") continue;
      if (s.get(ik.key) == nullptr) {
        fail(doc, table.source(), s.key(""),
             "missing key '" + std::string(ik.key) +
                 "' (give preset = \"name\", hf_config = \"config.json\", or every shape key)");
      }
    }
    if (s.get("kv_heads") == nullptr) m.kv_heads = m.heads;
  }
  // Shape consistency.
  auto blame = [&](std::string_view k) -> const toml::node& {
    if (const auto* n = s.get(k)) return *n;
    return table;
  };
  load_moe_keys(s, m, blame);
  // An explicit head_dim (Qwen3) or MLA's own head widths free hidden from heads * head_dim.
  if (m.head_dim_override == 0 && !m.mla && m.hidden % m.heads != 0) {
    s.fail_at(blame("heads"), "heads",
              "hidden (" + std::to_string(m.hidden) + ") must be divisible by heads (" +
                  std::to_string(m.heads) + ")");
  }
  if (m.kv_heads > m.heads || m.heads % m.kv_heads != 0) {
    s.fail_at(blame("kv_heads"), "kv_heads",
              "heads (" + std::to_string(m.heads) + ") must be a multiple of kv_heads (" +
                  std::to_string(m.kv_heads) + ")");
  }
  return m;
}

// ---------------------------------------------------------------------------------------------
// [cluster]

namespace {

/// [cluster.gpu] over the cluster preset's GPU; returns the table's source region.
const toml::source_region* load_gpu(const Section& s, const toml::node& n, hw::Gpu& gpu) {
  const Doc& doc = s.doc;
  const Section g{doc, "cluster.gpu", s.subtable(n, "gpu")};
  g.check_keys(key_names("cluster.gpu"));
  if (const auto* p = g.get("preset")) {
    const std::string name = g.string(*p, "preset");
    const auto found = hw::find_gpu_preset(name);
    if (!found) {
      g.fail_at(*p, "preset",
                "unknown GPU preset \"" + name + "\" (built-ins: " + preset_names_gpus() + ")");
    }
    gpu = *found;
  }
  if (const auto* v = g.get("memory")) {
    gpu.memory_bytes =
        g.quantity(*v, "memory", units::parse_bytes, "80GiB", kMaxBytes, false, kMinGpuBytes);
  }
  if (const auto* v = g.get("bf16_peak")) {
    gpu.bf16_peak_flops = g.quantity(*v, "bf16_peak", units::parse_flop_rate, "989TFLOP/s", kMaxFlops);
  }
  if (const auto* v = g.get("fp8_peak")) {
    gpu.fp8_peak_flops = g.quantity(*v, "fp8_peak", units::parse_flop_rate, "1979TFLOP/s", kMaxFlops);
  }
  if (const auto* v = g.get("fp4_peak")) {
    gpu.fp4_peak_flops = g.quantity(*v, "fp4_peak", units::parse_flop_rate, "9000TFLOP/s", kMaxFlops);
  }
  if (const auto* v = g.get("hbm_bandwidth")) {
    gpu.hbm_bandwidth_Bps =
        g.quantity(*v, "hbm_bandwidth", units::parse_bandwidth, "3.35TB/s", kMaxBandwidth);
  }
  if (const auto* v = g.get("sms")) gpu.sms = g.int_value(*v, "sms", 1, kMaxSms);
  if (const auto* v = g.get("host_link_bandwidth")) {
    gpu.host_link_Bps =
        g.quantity(*v, "host_link_bandwidth", units::parse_bandwidth, "64GB/s", kMaxBandwidth);
  }
  if (const auto* v = g.get("rated_power")) {
    gpu.rated_power_w = g.quantity(*v, "rated_power", units::parse_power, "700W", kMaxPowerW);
  }
  if (const auto* v = g.get("power_limit")) {
    gpu.power_limit_w = g.quantity(*v, "power_limit", units::parse_power, "500W", kMaxPowerW);
    if (gpu.rated_power_w <= 0) {
      g.fail_at(*v, "power_limit", "needs the GPU's rated_power (a preset GPU has one)");
    }
    // A cap lowers the board power the rates hold at; above the rating it would be ignored.
    if (gpu.power_limit_w > gpu.rated_power_w) {
      g.fail_at(*v, "power_limit",
                "is above the GPU's rated_power (" + std::to_string(std::lround(gpu.power_limit_w)) + " W > " +
                    std::to_string(std::lround(gpu.rated_power_w)) + " W): a power limit can only lower it");
    }
  }
  return &g.table.source();
}

/// [cluster.intra_node]; `domain_node` is set to the `domain` key when given.
const toml::source_region* load_intra(const Section& s, const toml::node& n, hw::IntraNode& intra,
                                      const toml::node*& domain_node) {
  const Doc& doc = s.doc;
  const Section g{doc, "cluster.intra_node", s.subtable(n, "intra_node")};
  g.check_keys(key_names("cluster.intra_node"));
  if (const auto* v = g.get("kind")) intra.kind = enum_value(g, *v, "kind", hw::parse_intra_kind, kIntraKind);
  if (const auto* v = g.get("bandwidth")) {
    intra.bandwidth_Bps = g.quantity(*v, "bandwidth", units::parse_bandwidth, "450GB/s", kMaxBandwidth);
  }
  if (const auto* v = g.get("latency")) {
    intra.latency_s = g.quantity(*v, "latency", units::parse_duration, "1us", kMaxLatency, true);
  }
  if (const auto* v = g.get("nvls")) intra.nvls = g.boolean(*v, "nvls");
  if (const auto* v = g.get("domain")) {
    domain_node = v;
    intra.domain_gpus = g.int_value(*v, "domain", 1, kMaxGpusPerNode);
  }
  return &g.table.source();
}

/// [cluster.inter_node].
const toml::source_region* load_inter(const Section& s, const toml::node& n, hw::InterNode& inter,
                                      int gpus_per_node) {
  const Doc& doc = s.doc;
  const Section g{doc, "cluster.inter_node", s.subtable(n, "inter_node")};
  g.check_keys(key_names("cluster.inter_node"));
  if (const auto* v = g.get("nics_per_node")) {
    inter.nics_per_node = g.int_value(*v, "nics_per_node", 1, kMaxGpusPerNode);
  }
  if (const auto* v = g.get("nic_bandwidth")) {
    inter.nic_bandwidth_Bps =
        g.quantity(*v, "nic_bandwidth", units::parse_bandwidth, "400Gb/s", kMaxBandwidth);
  }
  if (const auto* v = g.get("latency")) {
    inter.latency_s = g.quantity(*v, "latency", units::parse_duration, "5us", kMaxLatency, true);
  }
  if (const auto* v = g.get("pod_gpus")) {
    inter.pod_gpus = g.int_value(*v, "pod_gpus", 1, kMaxPodGpus);
    if (inter.pod_gpus % std::max(1, gpus_per_node) != 0) {
      g.fail_at(*v, "pod_gpus",
                "a pod holds whole nodes: " + std::to_string(inter.pod_gpus) + " is not a multiple of " +
                    std::to_string(gpus_per_node) + " GPUs per node");
    }
  }
  if (const auto* v = g.get("oversubscription")) {
    inter.oversubscription = g.number(*v, "oversubscription", 1.0, 64.0);
    if (inter.oversubscription > 1.0 && inter.pod_gpus == 0) {
      g.fail_at(*v, "oversubscription", "names no pods: give pod_gpus, the GPUs under full bisection bandwidth");
    }
  }
  return &g.table.source();
}

/// [cluster.host].
void load_host(const Section& s, const toml::node& n, hw::Host& host) {
  const Section g{s.doc, "cluster.host", s.subtable(n, "host")};
  g.check_keys(key_names("cluster.host"));
  if (const auto* v = g.get("first_touch_bandwidth")) {
    host.first_touch_Bps = g.quantity(*v, "first_touch_bandwidth", units::parse_bandwidth, "2.7GB/s", kMaxBandwidth);
  }
  if (const auto* v = g.get("copy_bandwidth")) {
    host.copy_Bps = g.quantity(*v, "copy_bandwidth", units::parse_bandwidth, "20GB/s", kMaxBandwidth);
  }
}

}  // namespace

hw::Cluster load_cluster(const Doc& doc, const toml::table& table) {
  const Section s{doc, "cluster", table};
  s.check_keys(key_names("cluster"));
  hw::Cluster c;
  c.name = "custom";
  c.gpu = hw::Gpu{};
  c.intra = hw::IntraNode{};
  c.inter = hw::InterNode{};
  bool base = false;
  if (const auto* n = s.get("preset")) {
    const std::string name = s.string(*n, "preset");
    const auto found = hw::find_cluster_preset(name);
    if (!found) {
      s.fail_at(*n, "preset",
                "unknown cluster preset \"" + name + "\" (built-ins: " + preset_names_clusters() + ")");
    }
    c = *found;
    base = true;
  }
  if (const auto* n = s.get("gpus_per_node")) {
    const int preset_gpus = c.gpus_per_node;
    c.gpus_per_node = s.int_value(*n, "gpus_per_node", 1, kMaxGpusPerNode);
    // A node preset's NVLink domain is its node, so it follows the node size given here (4
    // GPUs per node on a DGX H100 preset are 4-GPU NVLink islands, not half of an 8-GPU
    // fabric); a rack preset (NVL72) keeps its domain, and [cluster.intra_node] domain sets one.
    if (c.intra.domain_gpus == preset_gpus) c.intra.domain_gpus = 0;
  }
  if (const auto* n = s.get("nodes")) c.nodes = s.int_value(*n, "nodes", 1, kMaxNodes);
  if (const auto* n = s.get("profile_any_gpu")) c.profile_any_gpu = s.boolean(*n, "profile_any_gpu");
  if (const auto* n = s.get("gpu_speed_spread")) {
    c.gpu_speed_spread = s.number(*n, "gpu_speed_spread", 0.0, 0.5);
  }
  if (const auto* n = s.get("profile")) {
    const std::string rel = s.string(*n, "profile");
    if (rel.empty()) s.fail_at(*n, "profile", "empty path");
    c.profile_path = (fs::path(rel).is_absolute() ? fs::path(rel) : doc.dir / rel).generic_string();
  }

  const toml::source_region* gpu_region = &table.source();
  if (const auto* n = s.get("gpu")) gpu_region = load_gpu(s, *n, c.gpu);
  if (c.gpu.name.empty()) c.gpu.name = "custom";
  const toml::source_region* intra_region = &table.source();
  const toml::node* domain_node = nullptr;
  if (const auto* n = s.get("intra_node")) intra_region = load_intra(s, *n, c.intra, domain_node);
  const toml::source_region* inter_region = &table.source();
  if (const auto* n = s.get("inter_node")) inter_region = load_inter(s, *n, c.inter, c.gpus_per_node);
  if (const auto* n = s.get("host")) load_host(s, *n, c.host);

  // Without presets every number must be given.
  auto need = [&](bool ok, const toml::source_region& region, std::string_view section,
                  std::string_view key, std::string_view example) {
    if (ok) return;
    fail(doc, region, key_name(doc, section, key),
         "missing (give a preset or the value, e.g. " + std::string(key) + " = " +
             std::string(example) + ")");
  };
  need(c.gpu.memory_bytes > 0, *gpu_region, "cluster.gpu", "memory", "\"80GiB\"");
  need(c.gpu.bf16_peak_flops > 0, *gpu_region, "cluster.gpu", "bf16_peak", "\"989TFLOP/s\"");
  need(c.gpu.hbm_bandwidth_Bps > 0, *gpu_region, "cluster.gpu", "hbm_bandwidth", "\"3.35TB/s\"");
  need(c.gpu.sms > 0, *gpu_region, "cluster.gpu", "sms", "132");
  if (c.gpus_per_node > 1) {
    need(c.intra.bandwidth_Bps > 0, *intra_region, "cluster.intra_node", "bandwidth", "\"450GB/s\"");
  }
  if (c.nodes > 1) {
    need(c.inter.nics_per_node > 0, *inter_region, "cluster.inter_node", "nics_per_node", "8");
    need(c.inter.nic_bandwidth_Bps > 0, *inter_region, "cluster.inter_node", "nic_bandwidth",
         "\"400Gb/s\"");
  }
  if (auto bad = hw::domain_problem(c)) {
    // A preset's domain with the user's node count: the line of `nodes` (or of the table).
    const toml::source_region& at = domain_node != nullptr   ? domain_node->source()
                                    : s.get("nodes") != nullptr ? s.get("nodes")->source()
                                                                : table.source();
    fail(doc, at, domain_node != nullptr ? key_name(doc, "cluster.intra_node", "domain") : key_name(doc, "cluster", "nodes"),
         *bad);
  }
  (void)base;
  return c;
}

}  // namespace tetra::scenarios::detail
