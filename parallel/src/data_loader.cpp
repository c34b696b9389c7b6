#include "tetra/parallel/data_loader.hpp"

#include "tetra/base/enum_names.hpp"
#include "tetra/parallel/layout.hpp"

namespace tetra::parallel {

namespace {

constexpr EnumNames<LoaderMask, 3> kLoaderMask = {{
    {LoaderMask::none, "none"}, {LoaderMask::cached, "cached"}, {LoaderMask::per_sample, "per_sample"}}};

}  // namespace

LoaderMask loader_mask(const Training& training) noexcept {
  if (training.dataloader_mask) return *training.dataloader_mask;
  return training.framework == Framework::megatron ? LoaderMask::cached : LoaderMask::none;
}

const char* to_string(LoaderMask mask) noexcept { return spell(kLoaderMask, mask); }

std::optional<LoaderMask> parse_loader_mask(std::string_view name) noexcept { return lookup(kLoaderMask, name); }

}  // namespace tetra::parallel
