// Debian's toml++ ships a compiled library; this translation unit only pins the configuration
// every other scenarios source includes (see toml.hpp in this folder).
#include "toml.hpp"
