#pragma once
// A bounded YAML reader over libyaml's event API: one document, as a tree of scalars,
// sequences and mappings that remember their line and column. Only yaml_tree.cpp sees libyaml.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tetra::interop::detail {

/// Bounds of parse_yaml; a file beyond them is a UserError, never a long parse.
inline constexpr std::size_t kMaxYamlBytes = 4u << 20;  ///< launcher dumps are tens of KiB
inline constexpr int kMaxYamlDepth = 64;                ///< nested sequences and mappings
inline constexpr std::size_t kMaxYamlNodes = 200000;    ///< scalars, sequences and mappings

struct YamlEntry;

/// One node of the document.
struct YamlNode {
  enum class Kind { scalar, sequence, mapping };
  Kind kind = Kind::scalar;
  std::string value;             ///< a scalar's text, without quotes
  bool plain = true;             ///< a scalar written unquoted: null, booleans and numbers apply
  int line = 0, column = 0;      ///< 1-based start in the file
  std::vector<YamlNode> items;   ///< a sequence's elements
  std::vector<YamlEntry> entries;  ///< a mapping's keys and values, in file order

  /// An unquoted `null`, `~` or nothing.
  [[nodiscard]] bool is_null() const noexcept;
  /// true / True / TRUE, false / False / FALSE (quoted too, as OmegaConf reads a boolean field):
  /// 1 / 0; -1 when the node is no boolean.
  [[nodiscard]] int boolean() const noexcept;
};

/// One `key: value` of a mapping.
struct YamlEntry {
  std::string key;
  YamlNode value;
};

/// File text inside a one-line message: its first 80 bytes, those outside printable ASCII as
/// \xNN.
[[nodiscard]] std::string printable(std::string_view s);

/// The one document of `text`. UserError at `path`:line:column for a syntax error (libyaml's
/// message), an alias (`*name`: not expanded), a non-scalar or repeated key, a second
/// document, or a file beyond the bounds above; `key` of the error is the dotted path of the
/// mapping keys around the fault.
[[nodiscard]] YamlNode parse_yaml(std::string_view text, const std::string& path);

}  // namespace tetra::interop::detail
