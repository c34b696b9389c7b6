// MFU, HFU and the utilization of the GEMMs' own peak (utilization.hpp).

#include "tetra/costmodel/utilization.hpp"

#include <algorithm>
#include <vector>

#include "tetra/model/moe.hpp"
#include "tetra/ops/ops.hpp"
#include "tetra/parallel/flops.hpp"

namespace tetra::costmodel {

namespace {

double recomputed(const std::vector<ops::Op>& list) {
  double flops = 0;
  for (const ops::Op& op : list) {
    if (op.recompute) flops += op.total_flops();
  }
  return flops;
}

}  // namespace

double recomputed_step_flops(const model::Model& model, const parallel::Training& training,
                             const parallel::Layout& layout) {
  if (layout.recompute == parallel::Recompute::none) return 0;
  // One rank's share of one layer of each kind, one micro-batch (as the simulator replays it).
  double dense = 0, moe = 0;
  for (const parallel::BlockKind& kind : parallel::block_kinds(layout)) {
    parallel::Layout one = layout;
    one.recompute = kind.recompute;
    dense += kind.share * recomputed(ops::layer_ops(model, training, one));
    if (model.is_moe()) moe += kind.share * recomputed(ops::moe_layer_ops(model, training, one));
  }
  // Every MTP module runs one more layer of the kind of the model's last layer (as
  // sim/src/simulator.cpp counts it).
  const double mtp = std::max(0, model.mtp_layers);
  double moe_layers = model::moe_layer_count(model);
  double dense_layers = model.layers - moe_layers;
  (model::is_moe_layer(model, model.layers - 1) ? moe_layers : dense_layers) += mtp;
  const double ranks = static_cast<double>(layout.tp) * layout.cp * layout.dp;
  const double micro = parallel::micro_batches(layout, training);
  return ranks * micro * (dense_layers * dense + moe_layers * moe);
}

Peak mfu_peak(const hw::Gpu& gpu) noexcept { return {"bf16", gpu.bf16_peak_flops}; }

Peak gemm_peak(const hw::Gpu& gpu, const parallel::Training& training) noexcept {
  switch (parallel::gemm_format(training.fp8.recipe)) {
    case parallel::GemmFormat::fp8: return {"fp8", gpu.fp8_peak_flops};
    case parallel::GemmFormat::fp4: return {"fp4", gpu.fp4_peak_flops};
    case parallel::GemmFormat::training: break;
  }
  return {training.precision == parallel::Precision::fp16 ? "fp16" : "bf16", gpu.bf16_peak_flops};
}

Utilization utilization(const model::Model& model, const parallel::Training& training,
                        const parallel::Layout& layout, const hw::Gpu& gpu, double model_flops_per_gpu_s) {
  Utilization u;
  u.mfu_peak = mfu_peak(gpu);
  u.precision_peak = gemm_peak(gpu, training);
  const double model_flops = parallel::spec_step_flops(model, training, layout);
  // Hardware over model FLOPs: the same step time and GPUs divide both.
  const double hardware = model_flops > 0 ? 1.0 + recomputed_step_flops(model, training, layout) / model_flops : 1.0;
  if (u.mfu_peak.flops > 0) {
    u.mfu = model_flops_per_gpu_s / u.mfu_peak.flops;
    u.hfu = u.mfu * hardware;
  }
  if (u.precision_peak.flops > 0) u.precision_peak_utilization = model_flops_per_gpu_s / u.precision_peak.flops;
  return u;
}

}  // namespace tetra::costmodel
