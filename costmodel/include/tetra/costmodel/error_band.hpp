#pragma once
/// The error band of a predicted step time (docs/accuracy.md, "Error bands"): the spread of the signed
/// errors the model made on published measurements, turned into an interval around a new
/// prediction. Zero-shot, the errors are those of the published rows of the same GPU
/// generation (data/error_bands.toml, written by `tetrasim bands`); with fitted factors, the
/// cross-validated errors of that fit (the fitted file's [band] table).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tetra/hw/cluster.hpp"

namespace tetra::costmodel {

/// GPU generations the bands are kept by; the one place GPUs are mapped to them.
enum class GpuGeneration { ampere, hopper, blackwell, other };

/// Ampere: A100; Hopper: H100, H200; Blackwell: B200, B300, GB200, GB300 (by the GPU family of
/// builtin_profiles.hpp: preset name, else compute capability); anything else: other.
[[nodiscard]] GpuGeneration gpu_generation(const hw::Gpu& gpu) noexcept;
/// "ampere", "hopper", "blackwell", "other" (the keys of the bands file).
[[nodiscard]] const char* to_string(GpuGeneration g) noexcept;
/// "Ampere", "Hopper", "Blackwell", "other GPUs" (for sentences).
[[nodiscard]] const char* display_name(GpuGeneration g) noexcept;
/// Inverse of to_string; nothing for an unknown name.
[[nodiscard]] std::optional<GpuGeneration> parse_generation(std::string_view name) noexcept;

/// The band covers the 10th to the 90th percentile of the signed errors: a nominal 80 %
/// interval, wide enough to say how far off a prediction usually is and narrow enough that the
/// few worst rows of a generation do not set it.
inline constexpr double kBandLowQuantile = 0.10;
inline constexpr double kBandHighQuantile = 0.90;
/// Fewest rows a band is computed from: below 10 the 10th and 90th percentiles are the
/// smallest and largest error, which says nothing about the spread.
inline constexpr std::size_t kMinBandRows = 10;

/// Signed error of a predicted step: predicted / measured - 1 (> 0: the model is slow).
/// Preconditions: both > 0.
[[nodiscard]] double signed_error(double predicted_s, double measured_s) noexcept;

/// The q-quantile (0 <= q <= 1) of the values by linear interpolation between order statistics
/// (Hyndman and Fan type 7, R's and NumPy's default): position q (n - 1) in the sorted values.
/// Precondition: values not empty.
[[nodiscard]] double quantile(std::vector<double> values, double q);

/// The spread of signed step-time errors a band is built from.
struct ErrorBand {
  std::size_t rows = 0;             ///< rows whose errors were measured
  double low_quantile = kBandLowQuantile;
  double high_quantile = kBandHighQuantile;
  double low_error = 0;             ///< the low_quantile of the signed errors
  double high_error = 0;            ///< the high_quantile of the signed errors
  /// When the errors are too few for a band (rows < kMinBandRows): low/high are meaningless.
  [[nodiscard]] bool available() const noexcept { return rows >= kMinBandRows; }
};

/// The band of a list of signed errors: its size and, when at least kMinBandRows, the
/// kBandLowQuantile and kBandHighQuantile of the errors.
[[nodiscard]] ErrorBand band_of_errors(const std::vector<double>& errors);

/// Step times a measurement would lie between, given a prediction and a band: the measured
/// step is predicted / (1 + e) for the error e the model makes, so low = predicted / (1 +
/// high_error) and high = predicted / (1 + low_error). Preconditions: the band is available,
/// both errors > -1.
struct StepInterval {
  double low_s = 0;
  double high_s = 0;
};
[[nodiscard]] StepInterval band_interval(const ErrorBand& band, double predicted_s) noexcept;

/// How often one file's measured steps fall inside the band built without that file's rows
/// (leave one file out): the check that a band means what it says.
struct BandCoverage {
  std::string file;                    ///< the measurement file, as given
  GpuGeneration generation = GpuGeneration::other;
  std::size_t rows = 0;                ///< its rows of that generation with a signed error
  ErrorBand band;                      ///< from the other files' rows of the generation
  std::size_t inside = 0;              ///< rows whose measured step lies in the band (0 without one)
};

/// The bands of every generation, with where they come from.
struct GenerationBands {
  std::string command;                 ///< the command that wrote them
  std::string commit;                  ///< the tetrasim commit that wrote them
  std::vector<std::string> sources;    ///< the measurement files, as given
  struct Entry {
    GpuGeneration generation = GpuGeneration::other;
    ErrorBand band;
  };
  std::vector<Entry> entries;          ///< in GpuGeneration order, each at most once
  std::vector<BandCoverage> coverage;  ///< per file and generation, in file order

  /// The band of `g`; rows = 0 when the files held none of its rows.
  [[nodiscard]] ErrorBand find(GpuGeneration g) const noexcept;
};

/// The band a prediction carries, as commands report it.
struct StepBand {
  std::string basis;                   ///< "zero-shot" or "fit"
  std::string generation;              ///< to_string of the GPU's generation
  ErrorBand band;
  std::string note;                    ///< why there is no band ("too few published rows for ..."), else empty

  /// The interval around a prediction (band_interval); none when the band is not available.
  [[nodiscard]] std::optional<StepInterval> interval(double predicted_s) const noexcept;
};

/// The zero-shot band of steps predicted on `gpu`: the band of its generation in `bands`.
[[nodiscard]] StepBand zero_shot_band(const GenerationBands& bands, const hw::Gpu& gpu);
/// The band of steps predicted with fitted factors: their cross-validated errors (`band`), or
/// a note when the fitted file `fit_file` has none or too few rows.
[[nodiscard]] StepBand fitted_band(const std::optional<ErrorBand>& band, const std::string& fit_file,
                                   const hw::Gpu& gpu);

}  // namespace tetra::costmodel
