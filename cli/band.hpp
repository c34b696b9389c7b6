#pragma once
// The error band of predicted step times in command output (simulate, search, plan): which band
// applies (the framework's zero-shot band, or a fitted file's cross-validated one) and how
// it is written as JSON and text.

#include <string>

#include <nlohmann/json.hpp>

#include "tetra/costmodel/error_band.hpp"
#include "tetra/fit/fit.hpp"
#include "tetra/parallel/layout.hpp"

namespace tetra::cli {

/// The band of steps run by `framework`: the fitted file's (`fit` read from `fit_path`) when
/// one is given, else the built-in zero-shot band of the framework.
[[nodiscard]] costmodel::StepBand band_for(parallel::Framework framework, const fit::FitSummary* fit,
                                           const std::string& fit_path);

/// Where a band comes from: basis, framework, rows, quantiles, errors, note (no interval).
[[nodiscard]] nlohmann::json band_source_json(const costmodel::StepBand& band);
/// The band band_source_json wrote (what the --html pages read back from a command's JSON).
[[nodiscard]] costmodel::StepBand band_from_json(const nlohmann::json& j);
/// {"low", "high"} in seconds around `predicted_s` (null without a band).
[[nodiscard]] nlohmann::json interval_json(const costmodel::StepBand& band, double predicted_s);
/// {"low", "high", "basis", "framework", "rows", "low_quantile", "high_quantile",
/// "low_error", "high_error", "note"}: the interval and where it comes from; null values where
/// there is no band.
[[nodiscard]] nlohmann::json band_json(const costmodel::StepBand& band, double predicted_s);
/// What the band is, in words: "10th-90th percentile of the signed errors on 420 published
/// Megatron-Core rows" (or the note).
[[nodiscard]] std::string band_basis_text(const costmodel::StepBand& band);
/// "1.21 .. 1.47 s" or "-" without a band.
[[nodiscard]] std::string interval_text(const costmodel::StepBand& band, double predicted_s, int digits = 3);

}  // namespace tetra::cli
