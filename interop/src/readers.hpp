#pragma once
// The readers behind read_launch_config, one per launcher, and the integer parsing and text
// escaping they share.

#include <string>
#include <string_view>

#include "tetra/interop/import.hpp"

namespace tetra::interop::detail {

/// Megatron-LM arguments in a shell script or a text file (megatron_args.cpp).
[[nodiscard]] LaunchConfig read_megatron(std::string_view text, const std::string& path, const ImportOptions& options);

/// A torchtitan job TOML file (torchtitan_job.cpp).
[[nodiscard]] LaunchConfig read_torchtitan(std::string_view text, const std::string& path);

/// A Megatron-Bridge ConfigContainer or NeMo launcher YAML file (nemo_yaml.cpp); UserError
/// naming --gpus when the file gives no GPU count and options.gpus is 0.
[[nodiscard]] LaunchConfig read_nemo(std::string_view text, const std::string& path, const ImportOptions& options);

/// `text` as an integer in [lowest, 1e9]; UserError at `where` naming `key` otherwise.
[[nodiscard]] Number parse_number(const std::string& text, const std::string& key, const SourceLocation& where,
                                  long long lowest = 1);

/// A launcher file's bytes made printable ASCII: those outside 0x20..0x7E written as \xNN, so
/// a scenario comment stays valid UTF-8 TOML and an error message stays one line.
[[nodiscard]] std::string ascii_escaped(std::string_view s);

}  // namespace tetra::interop::detail
