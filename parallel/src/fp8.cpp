// FP8 / FP4 recipes of Transformer Engine. Scale layouts:
// `NVIDIA/TransformerEngine: transformer_engine/common/recipe/__init__.py` (MXFP8BlockScaling:
// "block size of 32", E8M0 scales; Float8BlockScaling: 1x128 and 128x128 blocks with FP32
// scales; NVFP4BlockScaling: 16-element blocks with E4M3 scales); the OCP Microscaling
// Formats (MX) v1.0 specification (32-element blocks, E8M0 shared scale).
#include "tetra/parallel/fp8.hpp"

#include <array>
#include <utility>

#include "tetra/base/enum_names.hpp"

namespace tetra::parallel {
namespace {

constexpr EnumNames<Fp8Recipe, 8> kRecipes = {{
    {Fp8Recipe::none, "none"},
    {Fp8Recipe::delayed, "delayed"},
    {Fp8Recipe::current, "current"},
    {Fp8Recipe::blockwise, "blockwise"},
    {Fp8Recipe::mxfp8, "mxfp8"},
    {Fp8Recipe::nvfp4, "nvfp4"},
    {Fp8Recipe::tensorwise, "tensorwise"},
    {Fp8Recipe::rowwise, "rowwise"},
}};

/// Blackwell (sm_100) is the first architecture with block-scaled MXFP8 / NVFP4 tensor-core
/// instructions (CUDA C++ Programming Guide, compute capability 10.0 feature table).
constexpr int kBlockScaledCapability = 100;
/// FP8 tensor cores arrive with Ada / Hopper (compute capability 8.9 / 9.0).
constexpr int kFp8Capability = 89;

}  // namespace

double Fp8Training::copies() const noexcept {
  const bool per_tensor = recipe == Fp8Recipe::delayed || recipe == Fp8Recipe::current;
  return per_tensor && any_layout_gemms ? 1.0 : 2.0;
}

bool fp8_gemms_take_any_layout(const hw::Gpu& gpu) noexcept {
  const int cc = gpu.compute_capability;
  return (cc >= 100 && cc < 120) || cc >= 130;
}

Fp8Training fp8_on(Fp8Training fp8, const hw::Gpu& gpu) noexcept {
  fp8.any_layout_gemms = fp8_gemms_take_any_layout(gpu);
  return fp8;
}

bool torchao_recipe(Fp8Recipe recipe) noexcept {
  return recipe == Fp8Recipe::tensorwise || recipe == Fp8Recipe::rowwise;
}

bool reads_tensor_amax(Fp8Recipe recipe) noexcept {
  return recipe == Fp8Recipe::current || recipe == Fp8Recipe::nvfp4;
}

bool norm_computes_amax(Fp8Recipe recipe) noexcept { return recipe == Fp8Recipe::current; }

bool casts_splits_together(Fp8Recipe recipe) noexcept {
  return recipe == Fp8Recipe::delayed || recipe == Fp8Recipe::nvfp4;
}

GemmFormat gemm_format(Fp8Recipe recipe) noexcept {
  switch (recipe) {
    case Fp8Recipe::none:
      return GemmFormat::training;
    case Fp8Recipe::nvfp4:
      return GemmFormat::fp4;
    default:
      return GemmFormat::fp8;
  }
}

double scale_bytes_per_element(Fp8Recipe recipe) noexcept {
  switch (recipe) {
    case Fp8Recipe::mxfp8:
      return 1.0 / 32.0;
    case Fp8Recipe::blockwise:
      return 4.0 / 128.0;
    case Fp8Recipe::nvfp4:
      return 1.0 / 16.0;
    default:
      return 0.0;
  }
}

double quantized_bytes_per_element(Fp8Recipe recipe) noexcept {
  if (recipe == Fp8Recipe::none) return 0.0;
  const double value = gemm_format(recipe) == GemmFormat::fp4 ? 0.5 : 1.0;
  return value + scale_bytes_per_element(recipe);
}

std::string recipe_problem(Fp8Recipe recipe, const hw::Gpu& gpu) {
  if (recipe == Fp8Recipe::none) return {};
  const std::string name = gpu.name.empty() ? "this GPU" : gpu.name;
  const bool fp8_cores = gpu.fp8_peak_flops > 0 && gpu.compute_capability >= kFp8Capability;
  if (!fp8_cores) {
    return "fp8_recipe \"" + std::string(to_string(recipe)) + "\" needs FP8 tensor cores, which " +
           name + " does not have (Hopper or Blackwell)";
  }
  if ((recipe == Fp8Recipe::mxfp8 || recipe == Fp8Recipe::nvfp4) &&
      gpu.compute_capability < kBlockScaledCapability) {
    return "fp8_recipe \"" + std::string(to_string(recipe)) +
           "\" needs Blackwell block-scaled tensor cores; " + name + " has compute capability " +
           std::to_string(gpu.compute_capability / 10) + "." +
           std::to_string(gpu.compute_capability % 10) + " (use \"current\" or \"delayed\")";
  }
  if (recipe == Fp8Recipe::nvfp4 && gpu.fp4_peak_flops <= 0) {
    return "fp8_recipe \"nvfp4\" needs FP4 tensor cores, which " + name + " does not have";
  }
  return {};
}

const char* to_string(Fp8Recipe r) noexcept { return spell(kRecipes, r, "none"); }

std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view name) noexcept {
  return lookup(kRecipes, name);
}

}  // namespace tetra::parallel
