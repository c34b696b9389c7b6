#pragma once
/// Recorded calibration tables as CSV: the measured rows of a profile (docs/calibration.md) in a
/// form that a spreadsheet, a shell script or a published table can produce, so fits can be
/// run and tested without a GPU.
///
/// Format: lines starting with '#' and blank lines are ignored; a line `[name]` starts a
/// table (`meta`, `gemm`, `attention`, `memory_bound`, `collective`); the next line is its
/// header of column names; every following line until the next `[name]` is one row.
///   [meta]          key,value      (keys: gpu, sms, hosts, gpus_per_node, nccl, cuda, source)
///   [gemm]          m,n,k,dtype,seconds
///   [attention]     batch,seq,heads,kv_heads,head_dim,causal,pass,seconds
///   [memory_bound]  kernel,bytes,seconds
///   [collective]    op,ranks,ranks_per_node,bytes,seconds[,algorithm,protocol]
/// Columns may come in any order; unknown columns are errors.

#include <string>
#include <string_view>

#include "tetra/costmodel/profile.hpp"

namespace tetra::calib {

/// Parses table text (`origin` names it in errors). Throws tetra::UserError "origin:line:
/// what was wrong" on any malformed line; never crashes.
[[nodiscard]] costmodel::Profile parse_tables_csv(std::string_view text, const std::string& origin);

/// Reads a table file. Throws tetra::UserError when it cannot be read or parsed.
[[nodiscard]] costmodel::Profile read_tables_csv(const std::string& path);

/// Writes every row of `profile` (and its meta) in the format above; numbers use 17
/// significant digits so a write-read round trip is exact. Deterministic.
[[nodiscard]] std::string format_tables_csv(const costmodel::Profile& profile);

}  // namespace tetra::calib
