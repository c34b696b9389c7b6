#pragma once
/// Calibration profile files (SPEC section 3): TOML with `[meta]`, `[[gemm]]`, `[[attention]]`,
/// `[[memory_bound]]`, `[[collective]]` rows and an optional `[fit]` table (with
/// `[[fit.collective]]` and `[[fit.memory_bound]]`). Row values carry their unit in the key
/// (`seconds`, `bytes`, `_s`, `_Bps`, `_flops`); `[meta].device_memory` is a size string
/// ("80GiB"). Unknown keys, missing keys, wrong types and impossible values are
/// tetra::UserError with file:line:col and the key. A file without `[fit]` loads with
/// `fit.valid == false` (the fit is then recomputed by the caller).

#include <string>
#include <string_view>

#include "tetra/costmodel/profile.hpp"

namespace tetra::scenarios {

/// Reads a profile file.
[[nodiscard]] costmodel::Profile read_profile(const std::string& path);

/// Parses profile text; `origin` names it in errors.
[[nodiscard]] costmodel::Profile parse_profile(std::string_view text, const std::string& origin);

/// The TOML text of a profile (deterministic: same profile, same bytes; numbers with 17
/// significant digits so that parse_profile(format_profile(p)) == p). The fit table is
/// written only when `fit.valid`.
[[nodiscard]] std::string format_profile(const costmodel::Profile& profile);

}  // namespace tetra::scenarios
