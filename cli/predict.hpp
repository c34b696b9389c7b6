#pragma once
// The prediction tetrasim validate compares with one measured row (docs/accuracy.md).

#include <optional>
#include <string>

#include "tetra/costmodel/factors.hpp"
#include "tetra/scenarios/measurements.hpp"

namespace tetra::cli {

/// What an outcome verdict rests on: the fullest pipeline stage's memory (what must fit, as
/// MemoryReport::peak_bytes counts it) and the GPU's capacity.
struct MemoryVerdict {
  int stage = 0;
  double peak_gib = 0;
  double capacity_gib = 0;
};

/// A value in the unit of the row's metric (outcome: 1 = fits, 0 = out of memory), or the
/// reason the row cannot be predicted.
struct Prediction {
  double value = 0;
  std::string skip_reason;  ///< empty when `value` holds a prediction
  std::optional<MemoryVerdict> verdict;  ///< outcome rows: the memory behind the verdict
};

/// Predicts one row whose skip_reason is empty. outcome: fits iff the peak reserved memory of
/// every stage is at most the GPU's capacity (the whole memory, not the planning margin:
/// docs/memory.md); peak_alloc_gib / peak_reserved_gib: the largest stage of the memory model;
/// step_time_s, tokens_per_s_per_gpu, mfu: the step simulator under the cluster `factors`.
[[nodiscard]] Prediction predict(const scenarios::MeasurementRow& row, const costmodel::Factors& factors = {});

}  // namespace tetra::cli
