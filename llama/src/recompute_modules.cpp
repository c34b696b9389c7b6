#include "tetra/llama/recompute_modules.hpp"

#include <array>
#include <utility>

#include "enum_names.hpp"

namespace tetra::llama {
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
  std::string out;
  for (const auto& [v, s] : kModules) {
    if (!modules.has(v)) continue;
    if (!out.empty()) out += '+';
    out += s;
  }
  return out;
}

RecomputeModulesParse parse_recompute_modules(std::string_view text) {
  RecomputeModulesParse out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('+', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view name = text.substr(start, end - start);
    start = end + 1;
    const auto m = parse_recompute_module(name);
    if (!m) {
      out.unknown = std::string(name);
      return out;
    }
    out.modules.add(*m);
  }
  return out;
}

std::string recompute_module_names() {
  std::string out;
  for (const auto& [v, s] : kModules) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

}  // namespace tetra::llama
