#pragma once
/// How much of a GPU's peak a simulated step uses, three ways (docs/cli.md, "Utilization"):
///   MFU  model FLOPs per second per GPU over the dense BF16 peak: Megatron-LM's count
///        (parallel::spec_step_flops: forward + backward, causal attention at half, no
///        recomputation), as PaLM defines model FLOPs utilization (Chowdhery et al., "PaLM",
///        arXiv 2204.02311, appendix B);
///   HFU  hardware FLOPs over the same peak: the model FLOPs plus the forward FLOPs that
///        activation recomputation runs again, the FLOPs the GPU executes (PaLM appendix B;
///        Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
///        arXiv 2205.05198, report both);
///   precision-peak utilization  model FLOPs over the dense peak of the format the linear
///        layers' GEMMs run in: FP8 for the FP8 and MXFP8 recipes, FP4 for NVFP4 (BF16, and
///        so equal to MFU, without a recipe). Core attention and the LM head stay in BF16
///        (parallel/fp8.hpp), so it stays below what the GEMMs alone reach.
/// Pure functions of value types.

#include "tetra/hw/cluster.hpp"
#include "tetra/model/model.hpp"
#include "tetra/parallel/layout.hpp"

namespace tetra::costmodel {

/// FLOPs that activation recomputation runs again in one step, all GPUs: the ops marked
/// `recompute` in the op list of a layer (ops::layer_ops / ops::moe_layer_ops, each kind of
/// block by its share, parallel::block_kinds), times the layers of that kind (MTP modules
/// counted as the model's last layer), the tp·cp·dp ranks of a stage and the micro-batches.
/// Counted as Megatron counts model FLOPs (ops.hpp); the embedding and the LM head are never
/// recomputed. 0 without recomputation. Full recomputation of a dense model adds one forward
/// of every layer: a third of the layers' model FLOPs.
[[nodiscard]] double recomputed_step_flops(const model::Model& model, const parallel::Training& training,
                                           const parallel::Layout& layout);

/// A dense tensor-core peak and the format it is quoted for.
struct Peak {
  const char* precision = "bf16";  ///< "bf16", "fp16", "fp8" or "fp4"
  double flops = 0;                ///< FLOP/s; 0 when the GPU has no such tensor cores
};

/// The dense BF16 peak, MFU's denominator (hw::Gpu::bf16_peak_flops).
[[nodiscard]] Peak mfu_peak(const hw::Gpu& gpu) noexcept;

/// The dense peak of the format the linear layers' GEMMs run in: fp8_peak_flops under an FP8
/// or MXFP8 recipe, fp4_peak_flops under NVFP4, else the 16-bit peak (bf16_peak_flops; FP16's
/// dense rate equals BF16's on every preset GPU).
[[nodiscard]] Peak gemm_peak(const hw::Gpu& gpu, const parallel::Training& training) noexcept;

/// The three utilizations of one step (fractions of a peak; 0 where the peak is 0).
struct Utilization {
  double mfu = 0;
  double hfu = 0;
  Peak mfu_peak;                          ///< what mfu and hfu divide by
  Peak precision_peak;                    ///< gemm_peak
  double precision_peak_utilization = 0;  ///< model FLOP rate over precision_peak
};

/// The utilizations of a step whose model FLOP rate per GPU is `model_flops_per_gpu_s`
/// (sim::Result::tflops_per_gpu × 1e12). Costs one op list per kind of block under
/// recomputation.
[[nodiscard]] Utilization utilization(const model::Model& model, const parallel::Training& training,
                                      const parallel::Layout& layout, const hw::Gpu& gpu,
                                      double model_flops_per_gpu_s);

}  // namespace tetra::costmodel
