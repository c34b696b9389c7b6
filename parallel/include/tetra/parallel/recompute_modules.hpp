#pragma once
/// Megatron-Core's selective recomputation by module (`recompute_granularity = "selective"`
/// with `recompute_modules`, `megatron/core/transformer/transformer_config.py`): each listed
/// part of a layer is re-run in backward instead of keeping what it produced. "moe_act",
/// "layernorm" and "mla_up_proj" free their output after its consumers saved it and refill it
/// before the backward reads it (CheckpointWithoutOutput); "core_attn", "mlp", "moe" and
/// "shared_experts" checkpoint the submodule from its input. An empty list means Megatron-Core's
/// default, core attention.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tetra::parallel {

enum class RecomputeModule : std::uint8_t {
  core_attn,       ///< core attention
  moe_act,         ///< the routed experts' activation function
  layernorm,       ///< input_layernorm and pre_mlp_layernorm
  mla_up_proj,     ///< MLA's query and key/value up projections and RoPE
  mlp,             ///< the MLP of a dense layer
  moe,             ///< the MoE block of a MoE layer, dispatch and combine included
  shared_experts,  ///< the shared experts of a MoE layer
};

/// A set of modules (bit i = RecomputeModule i).
struct RecomputeModules {
  std::uint8_t bits = 0;

  [[nodiscard]] bool empty() const noexcept { return bits == 0; }
  [[nodiscard]] bool has(RecomputeModule m) const noexcept {
    return (bits >> static_cast<unsigned>(m)) & 1U;
  }
  void add(RecomputeModule m) noexcept { bits = static_cast<std::uint8_t>(bits | (1U << static_cast<unsigned>(m))); }
  friend bool operator==(const RecomputeModules&, const RecomputeModules&) = default;
};

/// Megatron-Core spellings: core_attn | moe_act | layernorm | mla_up_proj | mlp | moe |
/// shared_experts.
[[nodiscard]] const char* to_string(RecomputeModule m) noexcept;
[[nodiscard]] std::optional<RecomputeModule> parse_recompute_module(std::string_view name) noexcept;

/// "moe_act+layernorm" (the form of a --layout value and a measurement row's options); the
/// modules in enum order. Empty set: "".
[[nodiscard]] std::string format_recompute_modules(RecomputeModules modules);
/// Reads the '+'-separated form; the first unknown name when one is not a module.
struct RecomputeModulesParse {
  RecomputeModules modules;
  std::string unknown;
};
[[nodiscard]] RecomputeModulesParse parse_recompute_modules(std::string_view text);

/// The names, "core_attn, moe_act, ...", for error messages.
[[nodiscard]] std::string recompute_module_names();

}  // namespace tetra::parallel
