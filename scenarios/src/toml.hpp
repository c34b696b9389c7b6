#pragma once
// The one place tetrasim includes toml++: configuration is parsed once, at the edge, into
// value structs, and toml++ is compiled in this library only.
#include <toml++/toml.h>
