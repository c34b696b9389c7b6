#include "tetra/interop/import.hpp"

#include <charconv>

#include "readers.hpp"
#include "shell_words.hpp"
#include "tetra/base/error.hpp"

namespace tetra::interop {

const char* to_string(Launcher launcher) noexcept {
  switch (launcher) {
    case Launcher::torchtitan: return "torchtitan";
    case Launcher::nemo: return "nemo";
    default: return "megatron";
  }
}

std::optional<Launcher> parse_launcher(std::string_view name) noexcept {
  if (name == "megatron") return Launcher::megatron;
  if (name == "torchtitan") return Launcher::torchtitan;
  if (name == "nemo") return Launcher::nemo;
  return std::nullopt;
}

namespace detail {

Number parse_number(const std::string& text, const std::string& key, const SourceLocation& where, long long lowest) {
  constexpr long long kHighest = 1000000000;  // no degree, batch or width is larger
  long long v = 0;
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end) {
    throw UserError(where, key, "'" + text.substr(0, 40) + "' is not an integer");
  }
  if (v < lowest || v > kHighest) {
    throw UserError(where, key, std::to_string(v) + " is outside " + std::to_string(lowest) + ".." +
                                    std::to_string(kHighest));
  }
  return Number{v, key, where};
}

std::string ascii_escaped(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    if (b >= 0x20 && b < 0x7F) {
      out += ch;
    } else {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 0xF];
    }
  }
  return out;
}

}  // namespace detail

std::optional<Launcher> detect_launcher(std::string_view text) {
  // A torchtitan job file is TOML with its own tables; a line starting with one of them is
  // enough to tell it from a script (which has no '[' at the start of a line but `[[ ... ]]`).
  for (const std::string_view table : {"[parallelism]", "[training]", "[job]", "[activation_checkpoint]"}) {
    for (std::size_t at = text.find(table); at != std::string_view::npos; at = text.find(table, at + 1)) {
      if (at == 0 || text[at - 1] == '\n') return Launcher::torchtitan;
    }
  }
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t at = text.find("--", start);
    if (at == std::string_view::npos) break;
    std::size_t end = at;
    while (end < text.size() && text[end] != ' ' && text[end] != '\t' && text[end] != '\n' && text[end] != '=' &&
           text[end] != '"' && text[end] != '\\') {
      ++end;
    }
    if (detail::is_megatron_marker(text.substr(at, end - at))) return Launcher::megatron;
    start = at + 2;
  }
  return std::nullopt;
}

LaunchConfig read_launch_config(std::string_view text, const std::string& path, const ImportOptions& options) {
  std::optional<Launcher> launcher = options.from;
  // YAML is NeMo's (Megatron-Bridge, the NeMo launcher) by its name: its content has no marker
  // as reliable as a TOML table or a Megatron-LM flag.
  if (!launcher && (path.ends_with(".yaml") || path.ends_with(".yml"))) launcher = Launcher::nemo;
  if (!launcher) launcher = detect_launcher(text);
  if (!launcher) {
    throw UserError(SourceLocation{path, 1}, "--from", "not a launcher configuration tetrasim reads: neither Megatron-LM "
                                              "arguments (--num-layers, --tensor-model-parallel-size, ...) nor a "
                                              "torchtitan job file ([parallelism], [training]) nor a .yaml file; "
                                              "--from names the launcher");
  }
  switch (*launcher) {
    case Launcher::torchtitan: return detail::read_torchtitan(text, path);
    case Launcher::nemo: return detail::read_nemo(text, path, options);
    default: return detail::read_megatron(text, path, options);
  }
}

std::string import_scenario(std::string_view text, const std::string& path, const ImportOptions& options) {
  return scenario_toml(read_launch_config(text, path, options), options);
}

}  // namespace tetra::interop
