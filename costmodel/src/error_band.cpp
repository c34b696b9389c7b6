#include "tetra/costmodel/error_band.hpp"

#include <algorithm>
#include <cmath>


namespace tetra::costmodel {

namespace {
std::string too_few(std::size_t rows, const std::string& what) {
  return "too few " + what + " (" + std::to_string(rows) + ", a band needs " + std::to_string(kMinBandRows) + ")";
}
}  // namespace

const char* regime_name(parallel::Framework f) noexcept {
  switch (f) {
    case parallel::Framework::megatron: return "Megatron-Core";
    case parallel::Framework::deepspeed: return "DeepSpeed";
    case parallel::Framework::fsdp: return "PyTorch FSDP";
  }
  return "Megatron-Core";
}

double signed_error(double predicted_s, double measured_s) noexcept { return predicted_s / measured_s - 1.0; }

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (pos - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

ErrorBand band_of_errors(const std::vector<double>& errors) {
  ErrorBand b;
  b.rows = errors.size();
  if (b.available()) {
    b.low_error = quantile(errors, b.low_quantile);
    b.high_error = quantile(errors, b.high_quantile);
  }
  return b;
}

StepInterval band_interval(const ErrorBand& band, double predicted_s) noexcept {
  return {predicted_s / (1.0 + band.high_error), predicted_s / (1.0 + band.low_error)};
}

ErrorBand RegimeBands::find(parallel::Framework f) const noexcept {
  for (const Entry& e : entries) {
    if (e.framework == f) return e.band;
  }
  return {};
}

std::optional<StepInterval> StepBand::interval(double predicted_s) const noexcept {
  if (!band.available()) return std::nullopt;
  return band_interval(band, predicted_s);
}

StepBand zero_shot_band(const RegimeBands& bands, parallel::Framework framework) {
  StepBand out;
  out.basis = "zero-shot";
  out.regime = parallel::to_string(framework);
  out.band = bands.find(framework);
  if (!out.band.available() && bands.pooled.available()) {
    out.regime = "all";
    out.band = bands.pooled;
  }
  if (!out.band.available()) out.note = too_few(out.band.rows, std::string("published rows for ") + regime_name(framework));
  return out;
}

StepBand fitted_band(const std::optional<ErrorBand>& band, const std::string& fit_file,
                     parallel::Framework framework) {
  StepBand out;
  out.basis = "fit";
  out.regime = parallel::to_string(framework);
  if (!band) {
    out.note = fit_file + " has no [band] table (fitted before bands were recorded; fit again)";
    return out;
  }
  out.band = *band;
  if (!out.band.available()) out.note = too_few(out.band.rows, "cross-validated rows in " + fit_file);
  return out;
}

}  // namespace tetra::costmodel
