#include "tetra/costmodel/error_band.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "tetra/costmodel/builtin_profiles.hpp"

namespace tetra::costmodel {

namespace {
constexpr std::array<GpuGeneration, 4> kGenerations{GpuGeneration::ampere, GpuGeneration::hopper,
                                                    GpuGeneration::blackwell, GpuGeneration::other};

std::string too_few(std::size_t rows, const std::string& what) {
  return "too few " + what + " (" + std::to_string(rows) + ", a band needs " + std::to_string(kMinBandRows) + ")";
}
}  // namespace

GpuGeneration gpu_generation(const hw::Gpu& gpu) noexcept {
  switch (gpu_family(gpu)) {
    case GpuFamily::a100: return GpuGeneration::ampere;
    case GpuFamily::h100:
    case GpuFamily::h200: return GpuGeneration::hopper;
    case GpuFamily::b200:
    case GpuFamily::b300:
    case GpuFamily::gb200:
    case GpuFamily::gb300: return GpuGeneration::blackwell;
    case GpuFamily::other: break;
  }
  return GpuGeneration::other;
}

const char* to_string(GpuGeneration g) noexcept {
  switch (g) {
    case GpuGeneration::ampere: return "ampere";
    case GpuGeneration::hopper: return "hopper";
    case GpuGeneration::blackwell: return "blackwell";
    case GpuGeneration::other: return "other";
  }
  return "other";
}

const char* display_name(GpuGeneration g) noexcept {
  switch (g) {
    case GpuGeneration::ampere: return "Ampere";
    case GpuGeneration::hopper: return "Hopper";
    case GpuGeneration::blackwell: return "Blackwell";
    case GpuGeneration::other: return "other GPUs";
  }
  return "other GPUs";
}

std::optional<GpuGeneration> parse_generation(std::string_view name) noexcept {
  for (GpuGeneration g : kGenerations) {
    if (name == to_string(g)) return g;
  }
  return std::nullopt;
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

ErrorBand GenerationBands::find(GpuGeneration g) const noexcept {
  for (const Entry& e : entries) {
    if (e.generation == g) return e.band;
  }
  return {};
}

std::optional<StepInterval> StepBand::interval(double predicted_s) const noexcept {
  if (!band.available()) return std::nullopt;
  return band_interval(band, predicted_s);
}

StepBand zero_shot_band(const GenerationBands& bands, const hw::Gpu& gpu) {
  const GpuGeneration g = gpu_generation(gpu);
  StepBand out;
  out.basis = "zero-shot";
  out.generation = to_string(g);
  out.band = bands.find(g);
  if (!out.band.available()) out.note = too_few(out.band.rows, std::string("published rows for ") + display_name(g));
  return out;
}

StepBand fitted_band(const std::optional<ErrorBand>& band, const std::string& fit_file, const hw::Gpu& gpu) {
  StepBand out;
  out.basis = "fit";
  out.generation = to_string(gpu_generation(gpu));
  if (!band) {
    out.note = fit_file + " has no [band] table (fitted before bands were recorded; fit again)";
    return out;
  }
  out.band = *band;
  if (!out.band.available()) out.note = too_few(out.band.rows, "cross-validated rows in " + fit_file);
  return out;
}

}  // namespace tetra::costmodel
