#include "predict.hpp"

#include <algorithm>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/base/units.hpp"
#include "tetra/sim/simulator.hpp"

namespace tetra::cli {

namespace {

Prediction predict_memory(const scenarios::MeasurementRow& row) {
  const costmodel::MemoryReport rep =
      costmodel::estimate_memory(row.model, row.cluster, row.training, row.layout);
  // peak_alloc_gib / peak_reserved_gib are torch.cuda.max_memory_allocated / _reserved: the
  // caching allocator's view, without the CUDA context and NCCL's own buffers.
  double allocated = 0;
  double torch_reserved = 0;
  for (const auto& s : rep.stages) {
    allocated = std::max(allocated, s.allocated_bytes - s.outside_allocator_bytes);
    torch_reserved = std::max(torch_reserved, s.torch_reserved_bytes - s.outside_allocator_bytes);
  }
  switch (row.metric) {
    case scenarios::Metric::outcome:
      return {rep.fits ? 1.0 : 0.0, {},
              MemoryVerdict{rep.peak_stage, rep.peak_bytes / units::kGiB, rep.capacity_bytes / units::kGiB}};
    case scenarios::Metric::peak_alloc_gib:
      return {allocated / units::kGiB, {}, {}};
    default:
      return {torch_reserved / units::kGiB, {}, {}};
  }
}

// step_time_s / tokens_per_s_per_gpu / mfu from one simulated step (MFU over the model FLOPs of
// parallel::spec_step_flops and the dense bf16 peak).
Prediction predict_step(const scenarios::MeasurementRow& row, const costmodel::Factors& factors) {
  costmodel::CostParams costs = costmodel::cost_params(row.cluster);
  costmodel::apply_factors(factors, costs);
  const sim::Result r = sim::simulate(sim::sim_input(row.model, row.cluster, row.training, row.layout, costs));
  switch (row.metric) {
    case scenarios::Metric::tokens_per_s_per_gpu: return {r.tokens_per_s_per_gpu, {}, {}};
    case scenarios::Metric::mfu: return {r.mfu, {}, {}};
    default: return {r.step_time_s, {}, {}};
  }
}

}  // namespace

Prediction predict(const scenarios::MeasurementRow& row, const costmodel::Factors& factors) {
  switch (row.metric) {
    case scenarios::Metric::outcome:
    case scenarios::Metric::peak_alloc_gib:
    case scenarios::Metric::peak_reserved_gib:
      return predict_memory(row);
    case scenarios::Metric::step_time_s:
    case scenarios::Metric::tokens_per_s_per_gpu:
    case scenarios::Metric::mfu:
      return predict_step(row, factors);
  }
  return {0, "unknown metric", {}};
}

}  // namespace tetra::cli
