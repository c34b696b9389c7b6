// The [training] and [layout] tables, --layout overrides and the options of a measurement row.

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
// [training], [layout]

const std::vector<std::string_view>& training_keys() {
  static const std::vector<std::string_view> keys = key_names("training");
  return keys;
}

const std::vector<std::string_view>& layout_keys() {
  static const std::vector<std::string_view> keys = key_names("layout");
  return keys;
}

namespace {

/// A TOML array of names, or one string of them joined by '+' (the form of --layout and of a
/// measurement row's options), as the '+'-joined string.
std::string plus_joined(const Section& s, const toml::node& n, std::string_view k) {
  const auto* arr = n.as_array();
  if (arr == nullptr) return s.string(n, k);
  std::string text;
  for (const toml::node& el : *arr) {
    if (!text.empty()) text += '+';
    text += s.string(el, k);
  }
  return text;
}

template <class T>
T plain_number(const Section& s, const toml::node& n, std::string_view k, double lowest, double highest) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(s.int_value(n, k, static_cast<long long>(lowest), static_cast<long long>(highest)));
  } else {
    return s.number(n, k, lowest, highest);
  }
}

void set_training_key(const Section& s, std::string_view k, const toml::node& n, parallel::Training& t) {
  // The plain keys, read within their bounds (parallel/training_keys.def).
#define TRAINING_SWITCH(name, value, needs, meaning, source) \
  if (k == #name) {                                           \
    t.name = s.boolean(n, k);                                 \
    return;                                                   \
  }
#define TRAINING_NUMBER(type, name, value, lowest, highest, meaning, source) \
  if (k == #name) {                                                           \
    t.name = plain_number<type>(s, n, k, lowest, highest);                    \
    return;                                                                   \
  }
#include "tetra/parallel/training_keys.def"
  if (k == "precision") {
    // "fp8": bf16 weights and activations with FP8 linears (parallel/fp8.hpp), delayed scaling
    // unless fp8_recipe names another recipe.
    if (s.string(n, k) == "fp8") {
      t.precision = parallel::Precision::bf16;
      if (!t.fp8.enabled()) t.fp8.recipe = parallel::Fp8Recipe::delayed;
    } else {
      const auto p = parallel::parse_precision(s.string(n, k));
      if (!p) {
        s.fail_at(n, k, "unknown value \"" + s.string(n, k) + "\" (expected one of: " +
                            join(enum_names(kPrecision)) + ", fp8)");
      }
      t.precision = *p;
      t.fp8.recipe = parallel::Fp8Recipe::none;
    }
  } else if (k == "fp8_recipe") {
    const toml::node* p = s.get("precision");
    if (p != nullptr && p->value<std::string>() != std::optional<std::string>("fp8")) {
      s.fail_at(n, k, "needs precision = \"fp8\" in the same table");
    }
    t.fp8.recipe = enum_value(s, n, k, parallel::parse_fp8_recipe, kFp8Recipe);
  } else if (k == "fp8_param_gather") {
    t.fp8.param_gather = s.boolean(n, k);
  } else if (k == "compile") {
    t.torch.compile = s.boolean(n, k);
  } else if (k == "async_tp") {
    t.torch.async_tp = s.boolean(n, k);
  } else if (k == "compile_loss") {
    t.torch.compile_loss = s.boolean(n, k);
  } else if (k == "reshard_after_forward") {
    // FSDP2 spelling: true, false or the size of the groups the parameters reshard over.
    if (n.is_boolean()) {
      t.torch.reshard_after_forward = s.boolean(n, k) ? parallel::TorchNative::kReshardFull : 1;
    } else {
      t.torch.reshard_after_forward = s.int_value(n, k, 1, kMaxParallel);
    }
  } else if (k == "grad_dtype") {
    t.grad_dtype = enum_value(s, n, k, parallel::parse_precision, kPrecision);
  } else if (k == "adam_moments_dtype") {
    t.adam_moments_dtype = enum_value(s, n, k, parallel::parse_precision, kPrecision);
    if (t.adam_moments_dtype == parallel::Precision::fp16) {
      s.fail_at(n, k, "Megatron-Core keeps Adam's moments in fp32 or bf16 (got \"fp16\")");
    }
  } else if (k == "optimizer") {
    t.optimizer = enum_value(s, n, k, parallel::parse_optimizer, kOptimizer);
  } else if (k == "attention") {
    t.attention = enum_value(s, n, k, parallel::parse_attention, kAttention);
  } else if (k == "framework") {
    t.framework = enum_value(s, n, k, parallel::parse_framework, kFramework);
  } else if (k == "moe_capacity_factor") {
    // Megatron-Core `moe_expert_capacity_factor`: > 0; absent = dropless.
    t.moe_capacity_factor = s.number(n, k, 1e-3, 1e3);
  } else if (k == "moe_routing_imbalance") {
    t.moe_imbalance = s.number(n, k, 1.0, 1e3);
  } else if (k == "dataloader_mask") {
    t.dataloader_mask = enum_value(s, n, k, parallel::parse_loader_mask, kLoaderMask);
  } else if (k == "cuda_graph") {
    const parallel::CudaGraphsParse parsed = parallel::parse_cuda_graphs(plus_joined(s, n, k));
    if (!parsed.unknown.empty()) {
      s.fail_at(n, k, "unknown scope \"" + parsed.unknown + "\" (expected none or some of: " +
                          parallel::cuda_graph_scope_names() + ", joined by '+')");
    }
    t.cuda_graphs = parsed.graphs;
  }
}

void set_layout_key(const Section& s, std::string_view k, const toml::node& n, parallel::Layout& l) {
  if (k == "tp") {
    l.tp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "cp") {
    l.cp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "pp") {
    l.pp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "dp") {
    l.dp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "dp_shard") {
    l.dp_shard = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "dp_replicate") {
    l.dp_replicate = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "vp") {
    l.vp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "mbs") {
    l.mbs = s.int_value(n, k, 1, kMaxMbs);
  } else if (k == "sp") {
    l.sp = s.boolean(n, k);
  } else if (k == "recompute") {
    l.recompute = enum_value(s, n, k, parallel::parse_recompute, kRecompute);
  } else if (k == "ac_freq") {
    l.ac_freq = s.int_value(n, k, 1, kMaxLayers);
  } else if (k == "offload_layers") {
    l.offload_layers = s.int_value(n, k, 0, kMaxLayers);
  } else if (k == "schedule") {
    l.schedule = enum_value(s, n, k, parallel::parse_schedule, kSchedule);
  } else if (k == "rank_order") {
    const std::string order = s.string(n, k);
    if (const std::string why = rank_order_problem(order); !why.empty()) s.fail_at(n, k, why);
    l.rank_order = order;
  } else if (k == "first_stage_layers") {
    l.first_stage_layers = s.int_value(n, k, 1, kMaxLayers);
  } else if (k == "last_stage_layers") {
    l.last_stage_layers = s.int_value(n, k, 1, kMaxLayers);
  } else if (k == "account_for_embedding_in_pipeline_split") {
    l.embedding_in_split = s.boolean(n, k);
  } else if (k == "account_for_loss_in_pipeline_split") {
    l.loss_in_split = s.boolean(n, k);
  } else if (k == "ep") {
    l.ep = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "etp") {
    l.etp = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "moe_token_dispatcher") {
    l.moe_dispatcher = enum_value(s, n, k, parallel::parse_moe_dispatcher, kDispatcher);
  } else if (k == "moe_flex_backend") {
    l.moe_flex_backend = enum_value(s, n, k, parallel::parse_flex_backend, kFlexBackend);
  } else if (k == "cp_comm_type") {
    l.cp_comm = enum_value(s, n, k, parallel::parse_cp_comm, kCpComm);
  } else if (k == "cp_a2a") {
    l.cp_a2a = s.int_value(n, k, 1, kMaxParallel);
  } else if (k == "recompute_modules") {
    // An empty array is Megatron-Core's default list, core attention.
    const std::string text = plus_joined(s, n, k);
    l.recompute_modules = {};
    if (text.empty()) return;
    const parallel::RecomputeModulesParse parsed = parallel::parse_recompute_modules(text);
    if (!parsed.unknown.empty()) {
      s.fail_at(n, k, "unknown module \"" + parsed.unknown + "\" (expected some of: " +
                          parallel::recompute_module_names() + ", joined by '+')");
    }
    l.recompute_modules = parsed.modules;
  }
}

bool is_in(const std::vector<std::string_view>& keys, std::string_view k) {
  return std::find(keys.begin(), keys.end(), k) != keys.end();
}

}  // namespace

void apply_training(const Doc& doc, const toml::table& table, parallel::Training& training,
                    KeyOrigins& origins) {
  const Section s{doc, "training", table};
  s.check_keys(training_keys());
  for (auto k : training_keys()) {
    if (const auto* n = s.get(k)) {
      set_training_key(s, k, *n, training);
      record(origins, s, k, *n);
    }
  }
}

void apply_layout(const Doc& doc, const toml::table& table, parallel::Layout& layout,
                  KeyOrigins& origins) {
  const Section s{doc, "layout", table};
  s.check_keys(layout_keys());
  for (auto k : layout_keys()) {
    if (const auto* n = s.get(k)) {
      set_layout_key(s, k, *n, layout);
      record(origins, s, k, *n);
    }
  }
}

void apply_option(const Doc& doc, const toml::table& table, parallel::Training& training,
                  parallel::Layout& layout, KeyOrigins& origins) {
  std::vector<std::string_view> known = training_keys();
  known.insert(known.end(), layout_keys().begin(), layout_keys().end());
  const Section s{doc, "options", table};
  s.check_keys(known);
  for (auto&& [key, node] : table) {
    const std::string_view k = key.str();
    if (is_in(training_keys(), k)) {
      set_training_key(s, k, node, training);
    } else {
      set_layout_key(s, k, node, layout);
    }
    record(origins, s, k, node);
  }
}

std::optional<parallel::LayoutIssue> check_precision(const hw::Gpu& gpu, const parallel::Training& training,
                                                 const KeyOrigins& origins) {
  const bool recipe_given = origins.find("fp8_recipe") != origins.end();
  if (training.fp8.param_gather && !training.fp8.enabled()) {
    return parallel::LayoutIssue{"fp8_param_gather", "fp8-needs-fp8", "needs precision = \"fp8\""};
  }
  if (std::string why = parallel::recipe_problem(training.fp8.recipe, gpu); !why.empty()) {
    return parallel::LayoutIssue{recipe_given ? "fp8_recipe" : "precision", "fp8-recipe-gpu", std::move(why)};
  }
  return std::nullopt;
}

std::string rank_order_problem(std::string_view order) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dash = order.find('-', start);
    parts.emplace_back(order.substr(start, dash == std::string_view::npos ? dash : dash - start));
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  std::set<std::string> seen(parts.begin(), parts.end());
  const std::set<std::string> want{"cp", "dp", "pp", "tp"};
  if (parts.size() != 4 || seen != want) {
    return "\"" + std::string(order) +
           "\" must name tp, cp, dp and pp once each, joined by '-', innermost first (e.g. "
           "\"tp-cp-dp-pp\")";
  }
  return {};
}

namespace {

/// Megatron-Core's pipeline split with the embedding and / or the loss counted as a layer
/// (`megatron/core/transformer/transformer_block.py` get_num_layers_to_build): the
/// layers plus one per counted end split evenly into pp·vp virtual stages of k, and the first
/// (last) virtual stage builds k − 1 transformer layers. As first/last_stage_layers: the end
/// rank holds vp·k − 1 layers, k in each chunk but the outermost.
std::optional<parallel::LayoutIssue> resolve_split_accounting(const model::Model& model,
                                                           parallel::Layout& layout) {
  const int ends = (layout.embedding_in_split ? 1 : 0) + (layout.loss_in_split ? 1 : 0);
  if (ends == 0 || layout.pp < 2) return std::nullopt;
  const std::string key = layout.embedding_in_split ? "account_for_embedding_in_pipeline_split"
                                                    : "account_for_loss_in_pipeline_split";
  if (layout.first_stage_layers > 0 || layout.last_stage_layers > 0) {
    return parallel::LayoutIssue{key, "split-accounting",
                              "cannot be combined with first_stage_layers/last_stage_layers"};
  }
  const long long chunks = static_cast<long long>(layout.pp) * std::max(layout.vp, 1);
  const long long total = static_cast<long long>(model.layers) + ends;
  if (total % chunks != 0) {
    return parallel::LayoutIssue{
        key, "split-accounting",
        "layers=" + std::to_string(model.layers) + " plus " + std::to_string(ends) +
            " counted end(s) = " + std::to_string(total) + " must split evenly into pp*vp = " +
            std::to_string(chunks) + " virtual stages"};
  }
  const long long rank_layers = (total / chunks) * std::max(layout.vp, 1) - 1;
  if (layout.embedding_in_split) layout.first_stage_layers = static_cast<int>(rank_layers);
  if (layout.loss_in_split) layout.last_stage_layers = static_cast<int>(rank_layers);
  layout.embedding_in_split = layout.loss_in_split = false;
  return std::nullopt;
}

}  // namespace

std::optional<parallel::LayoutIssue> resolve_layout(const model::Model& model, long long world,
                                                 int nvlink_domain, const parallel::Training& training,
                                                 parallel::Layout& layout, bool dp_given) {
  if (!dp_given) {
    const long long inner = static_cast<long long>(layout.tp) * layout.cp * layout.pp;
    if (inner <= 0 || world % inner != 0) {
      return parallel::LayoutIssue{
          "", "world-size",
          "tp*cp*pp = " + std::to_string(layout.tp) + "*" + std::to_string(layout.cp) + "*" +
              std::to_string(layout.pp) + " = " + std::to_string(inner) + " does not divide the " +
              std::to_string(world) + " GPUs of the cluster (dp is derived as GPUs / (tp*cp*pp))"};
    }
    layout.dp = static_cast<int>(world / inner);
  }
  if (std::string why = rank_order_problem(layout.rank_order); !why.empty()) {
    return parallel::LayoutIssue{"rank_order", "rank-order", why};
  }
  if (auto issue = resolve_split_accounting(model, layout)) return issue;
  if (auto issue = parallel::check_layout(model, world, training, layout)) return issue;
  return costmodel::domain_issue(layout, nvlink_domain);
}

}  // namespace tetra::scenarios::detail
