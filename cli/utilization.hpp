#pragma once
// The utilization numbers every step a command prints carries (docs/cli.md, "Utilization"):
// MFU with the peak it divides by, HFU beside it, and the utilization of the peak of the
// format the GEMMs run in (costmodel/utilization.hpp), as JSON keys and as text.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tetra/costmodel/utilization.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/model/model.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/search/search.hpp"

namespace tetra::cli {

/// The utilizations of a ranked layout: `training` with the layout's own FP8 recipe,
/// gradient dtype and compile switch (a search may vary them).
[[nodiscard]] costmodel::Utilization ranked_utilization(const model::Model& model, const parallel::Training& training,
                                                        const hw::Gpu& gpu, const search::RankedLayout& r);

/// Adds hfu, mfu_peak_precision, mfu_peak_tflops, precision_peak, precision_peak_tflops and
/// precision_peak_utilization to `j`; fractions rounded to `decimals` when it is ≥ 0.
void add_utilization_json(nlohmann::json& j, const costmodel::Utilization& u, int decimals = -1);

/// "BF16 dense peak 989 TFLOP/s" for precision "bf16" and 989 TFLOP/s.
[[nodiscard]] std::string peak_text(std::string_view precision, double tflops);
[[nodiscard]] std::string peak_text(const costmodel::Peak& peak);

/// Whether the GEMMs run in another format than MFU's peak (an FP8 or FP4 recipe), so that a
/// precision-peak column or row says something MFU does not.
[[nodiscard]] bool other_precision(const costmodel::Utilization& u);

}  // namespace tetra::cli
