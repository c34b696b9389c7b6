#pragma once
// The scenario-file spellings of enums (docs/scenario-format.md): each .cpp
// keeps a (value, spelling) table and looks it up both ways with these two functions.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace tetra {

template <typename E, std::size_t N>
using EnumNames = std::array<std::pair<E, const char*>, N>;

/// The value spelled `name`, if the table has it.
template <typename E, std::size_t N>
std::optional<E> lookup(const EnumNames<E, N>& table, std::string_view name) noexcept {
  for (const auto& [value, spelling] : table) {
    if (name == spelling) return value;
  }
  return std::nullopt;
}

/// The spelling of `value`, or `fallback` for a value the table lacks.
template <typename E, std::size_t N>
const char* spell(const EnumNames<E, N>& table, E value, const char* fallback = "unknown") noexcept {
  for (const auto& [v, spelling] : table) {
    if (v == value) return spelling;
  }
  return fallback;
}

/// Reads a '+'-joined list of spellings into a set with `add(E)`; the first unknown name, or
/// "" when every name is in the table.
template <typename Set, typename E, std::size_t N>
std::string read_plus_joined(const EnumNames<E, N>& table, std::string_view text, Set& set) {
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('+', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view name = text.substr(start, end - start);
    start = end + 1;
    const auto v = lookup(table, name);
    if (!v) return std::string(name);
    set.add(*v);
  }
  return "";
}

/// The spellings of the set's members (`has(E)`) in table order, joined by `sep`.
template <typename Set, typename E, std::size_t N>
std::string join_members(const EnumNames<E, N>& table, const Set& set, std::string_view sep) {
  std::string out;
  for (const auto& [v, spelling] : table) {
    if (!set.has(v)) continue;
    if (!out.empty()) out += sep;
    out += spelling;
  }
  return out;
}

/// Every spelling of the table, joined by ", " (error messages).
template <typename E, std::size_t N>
std::string all_spellings(const EnumNames<E, N>& table) {
  std::string out;
  for (const auto& [v, spelling] : table) {
    if (!out.empty()) out += ", ";
    out += spelling;
  }
  return out;
}

}  // namespace tetra
