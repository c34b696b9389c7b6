#include "tetra/parallel/recompute_modules.hpp"

#include <array>
#include <utility>

#include "tetra/base/enum_names.hpp"

namespace tetra::parallel {
namespace {

constexpr EnumNames<RecomputeModule, 7> kModules = {{
    {RecomputeModule::core_attn, "core_attn"},
    {RecomputeModule::moe_act, "moe_act"},
    {RecomputeModule::layernorm, "layernorm"},
    {RecomputeModule::mla_up_proj, "mla_up_proj"},
    {RecomputeModule::mlp, "mlp"},
    {RecomputeModule::moe, "moe"},
    {RecomputeModule::shared_experts, "shared_experts"},
}};

}  // namespace

const char* to_string(RecomputeModule m) noexcept { return spell(kModules, m, "core_attn"); }

std::optional<RecomputeModule> parse_recompute_module(std::string_view name) noexcept {
  return lookup(kModules, name);
}

std::string format_recompute_modules(RecomputeModules modules) {
  return join_members(kModules, modules, "+");
}

RecomputeModulesParse parse_recompute_modules(std::string_view text) {
  RecomputeModulesParse out;
  out.unknown = read_plus_joined(kModules, text, out.modules);
  return out;
}

std::string recompute_module_names() { return all_spellings(kModules); }

}  // namespace tetra::parallel
