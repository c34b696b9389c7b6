#pragma once
/// Calibration profile files (docs/calibration.md): TOML with `[meta]`, `[[gemm]]`, `[[attention]]`,
/// `[[memory_bound]]`, `[[collective]]` rows and an optional `[fit]` table (with
/// `[[fit.collective]]` and `[[fit.memory_bound]]`). Row values carry their unit in the key
/// (`seconds`, `bytes`, `_s`, `_Bps`, `_flops`); `[meta].device_memory` is a size string
/// ("80GiB"). Unknown keys, missing keys, wrong types and impossible values are
/// tetra::UserError with file:line:col and the key. A file without `[fit]` loads with
/// `fit.valid == false` (the fit is then recomputed by the caller).

#include <string>
#include <string_view>

#include "tetra/costmodel/error_band.hpp"
#include "tetra/costmodel/profile.hpp"
#include "tetra/fit/fit.hpp"

namespace tetra::scenarios {

/// Reads a profile file.
[[nodiscard]] costmodel::Profile read_profile(const std::string& path);

/// Parses profile text; `origin` names it in errors.
[[nodiscard]] costmodel::Profile parse_profile(std::string_view text, const std::string& origin);

/// The TOML text of a profile (deterministic: same profile, same bytes; every number as the
/// shortest text that reads back as the same double, so parse_profile(format_profile(p)) == p).
/// The fit table is written only when `fit.valid`.
[[nodiscard]] std::string format_profile(const costmodel::Profile& profile);

/// Fitted-factor files (`tetrasim fit -o`, read by `--fit`): an optional `[fitted]` table
/// (csv, cluster, rows = [ids], rms_error, mape, iterations, converged) and one
/// `[factors.NAME]` table per factor with `value` (required), `lower`, `upper`, `std_error`,
/// `share` and `status`, and an optional `[band]` table (scheme, rows, low_quantile,
/// high_quantile, low_error, high_error: the cross-validated band, costmodel/error_band.hpp);
/// step_overhead's values are seconds and their keys say so (`value_s`,
/// `lower_s`, ...). A factor without a table stays neutral. A value outside the factor's
/// bound (fit::bound), an unknown factor or key is a UserError with file:line:col.
[[nodiscard]] fit::FitSummary read_fitted(const std::string& path);
[[nodiscard]] fit::FitSummary parse_fitted(std::string_view text, const std::string& origin);

/// The TOML text of a fit (deterministic; numbers as in format_profile, so
/// parse_fitted(format_fitted(f)) gives the same factors).
[[nodiscard]] std::string format_fitted(const fit::FitSummary& fit);

/// Error-band files (data/error_bands.toml, written by `tetrasim bands`): `[provenance]`
/// (command, commit, sources = [files]), one `[band.FRAMEWORK]` table per framework and `[band.all]` for every row (rows,
/// low_quantile, high_quantile and, from costmodel::kMinBandRows rows, low_error and
/// high_error) and `[[coverage]]` tables (file, framework, pooled, rows, band_rows, inside and, when
/// the band exists, low_error and high_error). Errors name file:line:col and the key.
[[nodiscard]] costmodel::RegimeBands parse_error_bands(std::string_view text, const std::string& origin);
/// The TOML text of error bands (deterministic; parse_error_bands reads it back).
[[nodiscard]] std::string format_error_bands(const costmodel::RegimeBands& bands);
/// The bands of data/error_bands.toml as the build embedded it (parsed once).
[[nodiscard]] const costmodel::RegimeBands& builtin_error_bands();

}  // namespace tetra::scenarios
