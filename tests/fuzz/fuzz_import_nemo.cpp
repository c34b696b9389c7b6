// libFuzzer entry point for the import_nemo reader (tests/fuzz/targets.hpp).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tetra::fuzz::import_nemo(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
