#include "tetra/model/model.hpp"

namespace tetra::model {

const char* to_string(Arch arch) noexcept {
  switch (arch) {
    case Arch::llama:
      return "llama";
    case Arch::gpt:
      return "gpt";
    case Arch::gpt_oss:
      return "gpt-oss";
  }
  return "unknown";
}

std::optional<Arch> parse_arch(std::string_view name) noexcept {
  if (name == "llama") return Arch::llama;
  if (name == "gpt") return Arch::gpt;
  if (name == "gpt-oss") return Arch::gpt_oss;
  return std::nullopt;
}

}  // namespace tetra::model
