#pragma once
/// Low-precision GEMMs as Transformer Engine runs them under Megatron-Core
/// (`NVIDIA/TransformerEngine: transformer_engine/common/recipe/__init__.py`): a recipe names
/// how tensors are scaled into FP8 (or FP4) before a GEMM. The linear layers of attention and
/// MLP run their forward, dgrad and wgrad GEMMs in the recipe's format; core attention, the
/// embedding and the LM head stay in the training precision. Weights, gradients and optimizer
/// states keep their usual dtypes; FP8 adds quantised copies (costmodel/memory.hpp) and the
/// kernels that make them (ops/ops.hpp).

#include <optional>
#include <string>
#include <string_view>

#include "tetra/hw/cluster.hpp"

namespace tetra::parallel {

/// TE recipes. `none` = every GEMM in the training precision.
enum class Fp8Recipe {
  none,
  delayed,    ///< DelayedScaling: per-tensor scale from an amax history of earlier steps
  current,    ///< Float8CurrentScaling: per-tensor scale from this tensor's amax
  blockwise,  ///< Float8BlockScaling: 1x128 (activations) / 128x128 (weights) FP32 scales
  mxfp8,      ///< MXFP8BlockScaling: 1x32 blocks with E8M0 scales (Blackwell)
  nvfp4,      ///< NVFP4BlockScaling: FP4 E2M1 values, 1x16 blocks with E4M3 scales (Blackwell)
  /// torchao Float8 linears as torchtitan converts them (`torchao/float8/config.py`):
  tensorwise, ///< dynamic per-tensor scales, cuBLAS FP8 GEMMs
  rowwise,    ///< per-row (axis-wise) scales; backward GEMMs rescale their output in a kernel
};

/// torchao's recipes (tensorwise, rowwise): no weight cache across micro-batches, high-precision
/// inputs saved for backward, every cast preceded by its own amax reduction.
[[nodiscard]] bool torchao_recipe(Fp8Recipe recipe) noexcept;

/// Transformer Engine recipes whose quantizer reads the operand once for a per-tensor amax
/// before the cast (`transformer_engine/pytorch/csrc/quantizer.cpp`): current scaling, and
/// NVFP4 for the per-tensor scale above its block scales (`nvte_hadamard_transform_amax` under
/// its default random Hadamard transform). Delayed scaling takes earlier steps' amax; MXFP8
/// and blockwise compute their scales per block inside the cast.
[[nodiscard]] bool reads_tensor_amax(Fp8Recipe recipe) noexcept;

/// Whether TE's fused norm computes that amax in its own pass, sparing the quantizer's
/// (`csrc/extensions/normalization.cpp`): current scaling (FUSED_NORM_AMAX_FP8); not NVFP4,
/// whose Hadamard transform leaves the norm unfused (Impl::UNFUSED).
[[nodiscard]] bool norm_computes_amax(Fp8Recipe recipe) noexcept;

/// Whether TE casts the experts' splits of a grouped linear in kernels over all splits, not
/// per split (`csrc/extensions/cast.cpp` split_quantize): delayed scaling's multi-tensor
/// cast-transpose and NVFP4's grouped amax and cast (FUSED_NVFP4).
[[nodiscard]] bool casts_splits_together(Fp8Recipe recipe) noexcept;

/// The element format a GEMM's inputs are quantised to.
enum class GemmFormat { training, fp8, fp4 };

/// FP8 settings of a training run ([training] precision = "fp8", fp8_recipe, fp8_param_gather).
struct Fp8Training {
  Fp8Recipe recipe = Fp8Recipe::none;
  /// Megatron-Core `--fp8-param-gather`: the linear weights live as FP8 tensors (no BF16 copy)
  /// and the distributed optimizer all-gathers them in FP8.
  bool param_gather = false;
  /// The GPU's FP8 GEMMs take their operands in any layout (fp8_gemms_take_any_layout); set
  /// for the run's GPU by fp8_on, where kernels and memory are priced. False until then: the
  /// TN-only GEMMs of Hopper and Ada.
  bool any_layout_gemms = false;

  [[nodiscard]] bool enabled() const noexcept { return recipe != Fp8Recipe::none; }
  /// FP8 copies Transformer Engine keeps of one quantised tensor: the row-wise copy and the
  /// one the other GEMM of its pair reads, transposed where the GEMMs take only the TN layout
  /// and column-wise under the block-scaled recipes (scaled along the other axis). A
  /// per-tensor-scaled tensor (delayed, current) on GPUs whose GEMMs take any layout has one:
  /// `transformer_engine/pytorch/csrc/quantizer.cpp` creates the transpose only when
  /// `columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()` (Float8Quantizer and
  /// Float8CurrentScalingQuantizer, TE 2.1 on).
  [[nodiscard]] double copies() const noexcept;
};

/// Whether `gpu`'s FP8 GEMMs take operands in any layout, not only TN (Transformer Engine
/// `nvte_is_non_tn_fp8_gemm_supported`, `transformer_engine/common/transformer_engine.cpp`:
/// compute capability 10.x and 11.x, and 13.0 on; Hopper, Ada and 12.x are TN-only).
[[nodiscard]] bool fp8_gemms_take_any_layout(const hw::Gpu& gpu) noexcept;

/// `fp8` as it runs on `gpu` (any_layout_gemms set): what the simulator's kernels and the
/// memory model's FP8 copies read.
[[nodiscard]] Fp8Training fp8_on(Fp8Training fp8, const hw::Gpu& gpu) noexcept;

/// Format of the linear layers' GEMMs under the recipe.
[[nodiscard]] GemmFormat gemm_format(Fp8Recipe recipe) noexcept;

/// Bytes of the scale factors per quantised element: 0 for per-tensor recipes, 1/32 for MXFP8
/// (one E8M0 byte per 32), 4/128 for blockwise (one FP32 per 128), 1/16 for NVFP4 (one E4M3
/// per 16).
[[nodiscard]] double scale_bytes_per_element(Fp8Recipe recipe) noexcept;

/// Bytes of one quantised element: 1 (FP8) or 0.5 (FP4), plus its share of the scales.
[[nodiscard]] double quantized_bytes_per_element(Fp8Recipe recipe) noexcept;

/// Why `gpu` cannot run the recipe (empty when it can): FP8 needs FP8 tensor cores (Hopper,
/// Ada, Blackwell), MXFP8 and NVFP4 need Blackwell's block-scaled tensor cores
/// (compute capability 10.0 or later), NVFP4 also FP4 tensor cores.
[[nodiscard]] std::string recipe_problem(Fp8Recipe recipe, const hw::Gpu& gpu);

/// Scenario spellings: none | delayed | current | blockwise | mxfp8 | nvfp4.
[[nodiscard]] const char* to_string(Fp8Recipe r) noexcept;
[[nodiscard]] std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view name) noexcept;

}  // namespace tetra::parallel
