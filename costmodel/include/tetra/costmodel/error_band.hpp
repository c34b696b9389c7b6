#pragma once
/// The error band of a predicted step time (docs/accuracy.md, "Error bands"): the spread of the signed
/// errors the model made on published measurements, turned into an interval around a new
/// prediction. Zero-shot, the errors are those of the published rows run by the same framework
/// (data/error_bands.toml, written by `tetrasim bands`); with fitted factors, the
/// cross-validated errors of that fit (the fitted file's [band] table).

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tetra/parallel/layout.hpp"

namespace tetra::costmodel {

/// The regimes bands are kept by: the framework that runs the step. The model's habits differ
/// most between frameworks (which kernels run, which buffers are kept, what is fused), and the
/// published sources of one framework share its errors more than those of one GPU generation:
/// leaving each file out, 80 % of the rows land in their framework's band against 70 % in their
/// generation's (`tetrasim bands data/validation/*.csv`, docs/accuracy.md).
/// A band's key in the bands file and in JSON is the framework's scenario name
/// (parallel::to_string / parse_framework: "megatron", "deepspeed", "fsdp").
/// "Megatron-Core", "DeepSpeed", "PyTorch FSDP" (for sentences).
[[nodiscard]] const char* regime_name(parallel::Framework f) noexcept;

/// The band covers the 10th to the 90th percentile of the signed errors: a nominal 80 %
/// interval, wide enough to say how far off a prediction usually is and narrow enough that the
/// few worst rows of a regime do not set it.
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
  parallel::Framework framework = parallel::Framework::megatron;
  std::size_t rows = 0;                ///< its rows of that framework with a signed error
  ErrorBand band;                      ///< from the other files' rows of the framework
  /// The other files held too few rows of the framework: `band` is from all their rows, as a
  /// prediction for a framework with too few published rows gets the pooled band.
  bool pooled = false;
  std::size_t inside = 0;              ///< rows whose measured step lies in the band (0 without one)
};

/// The bands of every framework, with where they come from.
struct RegimeBands {
  std::string command;                 ///< the command that wrote them
  std::string commit;                  ///< the tetrasim commit that wrote them
  std::vector<std::string> sources;    ///< the measurement files, as given
  struct Entry {
    parallel::Framework framework = parallel::Framework::megatron;
    ErrorBand band;
  };
  std::vector<Entry> entries;          ///< in Framework order, each at most once
  ErrorBand pooled;                    ///< every row: the band of a framework with too few rows
  std::vector<BandCoverage> coverage;  ///< per file and framework, in file order

  /// The band of `f`; rows = 0 when the files held none of its rows.
  [[nodiscard]] ErrorBand find(parallel::Framework f) const noexcept;
};

/// The band a prediction carries, as commands report it.
struct StepBand {
  std::string basis;                   ///< "zero-shot" or "fit"
  std::string regime;                  ///< the run's framework (parallel::to_string), or "all" (the pooled band)
  ErrorBand band;
  std::string note;                    ///< why there is no band ("too few published rows for ..."), else empty

  /// The interval around a prediction (band_interval); none when the band is not available.
  [[nodiscard]] std::optional<StepInterval> interval(double predicted_s) const noexcept;
};

/// The zero-shot band of steps run by `framework`: its band in `bands`, or the pooled band when
/// its own rows are too few.
[[nodiscard]] StepBand zero_shot_band(const RegimeBands& bands, parallel::Framework framework);
/// The band of steps predicted with fitted factors: their cross-validated errors (`band`), or
/// a note when the fitted file `fit_file` has none or too few rows.
[[nodiscard]] StepBand fitted_band(const std::optional<ErrorBand>& band, const std::string& fit_file,
                                   parallel::Framework framework);

}  // namespace tetra::costmodel
