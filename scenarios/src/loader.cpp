#include "loader.hpp"

#include "section.hpp"

#include "tetra/base/text_file.hpp"
#include "tetra/scenarios/keys.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "tetra/costmodel/collective.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/base/units.hpp"
#include "tetra/model/presets.hpp"

namespace tetra::scenarios::detail {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Locations and errors

std::string key_name(const Doc& doc, std::string_view section, std::string_view key) {
  if (doc.bare_keys) return doc.key_prefix + std::string(key);
  std::string out = "[" + std::string(section) + "]";
  if (!key.empty()) out += "." + std::string(key);
  return out;
}

SourceLocation where(const Doc& doc, const toml::source_region& region) {
  if (region.begin.line > 0) {
    return SourceLocation{doc.file, static_cast<int>(region.begin.line),
                          static_cast<int>(region.begin.column)};
  }
  return SourceLocation{doc.file, doc.fixed_line, 0};
}

void fail(const Doc& doc, const toml::source_region& region, const std::string& key,
          const std::string& message) {
  throw UserError(where(doc, region), key, message);
}

const toml::table* table_or_fail(const Doc& doc, const toml::table& root, std::string_view name) {
  const toml::node* n = root.get(name);
  if (n == nullptr) return nullptr;
  const auto* t = n->as_table();
  if (t == nullptr) {
    fail(doc, n->source(), "[" + std::string(name) + "]",
         "expected a table ([" + std::string(name) + "]), got a value");
  }
  return t;
}

namespace {


}  // namespace




// ---------------------------------------------------------------------------------------------
// Parsing

toml::table parse_toml_text(std::string_view text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& pos = e.source().begin;
    throw UserError(SourceLocation{origin, static_cast<int>(pos.line), static_cast<int>(pos.column)},
                    "", std::string(e.description()));
  }
}

toml::table parse_toml_file(const std::string& path) {
  return parse_toml_text(read_input_file(path), path);
}

toml::table parse_key_values(std::string_view text, char separator, const Doc& doc) {
  toml::table out;
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  const SourceLocation loc{doc.file, doc.fixed_line, 0};
  if (trim(text).empty()) return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(separator, start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = trim(text.substr(start, end - start));
    start = end + 1;
    if (item.empty()) {
      throw UserError(loc, doc.key_prefix.empty() ? "" : doc.key_prefix.substr(0, doc.key_prefix.find(':')),
                      std::string("empty entry (expected key=value") + separator + "key=value)");
    }
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw UserError(loc, doc.key_prefix + std::string(item), "expected key=value");
    }
    const std::string key(trim(item.substr(0, eq)));
    const std::string value(trim(item.substr(eq + 1)));
    if (key.empty()) throw UserError(loc, "", "empty key in \"" + std::string(item) + "\"");
    if (out.contains(key)) throw UserError(loc, doc.key_prefix + key, "given twice");
    if (value.empty()) throw UserError(loc, doc.key_prefix + key, "empty value");
    if (value == "true" || value == "false") {
      out.insert(key, value == "true");
      continue;
    }
    long long i = 0;
    const char* b = value.data();
    const char* e = value.data() + value.size();
    const char* ib = (*b == '+') ? b + 1 : b;
    if (auto r = std::from_chars(ib, e, i); r.ptr == e) {
      if (r.ec != std::errc{}) {
        throw UserError(loc, doc.key_prefix + key, "integer " + value + " is out of range");
      }
      out.insert(key, static_cast<std::int64_t>(i));
      continue;
    }
    double d = 0;
    if (auto r = std::from_chars(ib, e, d); r.ec == std::errc{} && r.ptr == e && std::isfinite(d)) {
      out.insert(key, d);
      continue;
    }
    out.insert(key, value);
  }
  return out;
}

}  // namespace tetra::scenarios::detail
