#pragma once
/// Reading an input file whole, bounded: no input is trusted to be small, or to end.

#include <cstddef>
#include <string>

namespace tetra {

/// Inputs larger than this are refused (scenarios, measurement files, profiles, traces as text).
inline constexpr std::size_t kMaxInputBytes = 64ull * 1024 * 1024;

/// The bytes of `path`. Reads at most `max_bytes` + 1 whatever the file claims to hold, so a
/// device or pipe that never ends (/dev/zero) is refused like a large file. Throws UserError
/// naming the file: no such file, a directory, cannot be opened (with the OS reason), a read
/// error, or larger than `max_bytes`.
[[nodiscard]] std::string read_input_file(const std::string& path, std::size_t max_bytes = kMaxInputBytes);

/// Whether this process read `path` (the same file, by any name) through read_input_file or
/// note_input: commands refuse to write an output over one of their inputs.
[[nodiscard]] bool read_as_input(const std::string& path);

/// Records `path` as an input of this process (for files read by other means).
void note_input(const std::string& path);

}  // namespace tetra
