#pragma once
// The SPEC spellings of the library's enums: each .cpp keeps a (value, spelling) table and
// looks it up both ways with these two functions.

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace tetra::llama {

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

}  // namespace tetra::llama
