#pragma once
// A bounded reader of the shell subset launch scripts are written in: variable and array
// assignments, `${NAME:-default}`, `${ARRAY[@]}`, `$(( ))` on integers, line continuations,
// comments, quoting and if/elif/else on string and integer tests. It runs nothing; it finds the
// launch command and expands its words.

#include <string>
#include <string_view>
#include <vector>

namespace tetra::interop::detail {

/// One word of the launch command after expansion.
struct ShellWord {
  std::string text;        ///< expanded; an unresolvable `$NAME` stays as written
  int line = 0;            ///< 1-based line where the word (or the array element) was written
  std::string unresolved;  ///< the first `$NAME` the file does not set; "" when fully known
};

/// The words of the last command of `text` that runs a Megatron-LM program (a word ending in
/// `.py` among Megatron flags) or holds Megatron flags, expanded. Array elements are split
/// into words as an unquoted expansion splits them. A condition that is not a string or integer test is
/// taken as true for its first branch. UserError naming `path` when the text expands beyond
/// kMaxExpandedBytes in all. Empty when no command holds a Megatron flag.
[[nodiscard]] std::vector<ShellWord> launch_command(std::string_view text, const std::string& path);

/// Expansions stop here: a script whose variables grow past it is refused.
inline constexpr std::size_t kMaxExpandedBytes = 16u * 1024 * 1024;

/// Whether `word` is one of the Megatron-LM flags that mark a launch command.
[[nodiscard]] bool is_megatron_marker(std::string_view word);

}  // namespace tetra::interop::detail
