#pragma once
// The one place tetrasim includes toml++ (reference/style.md H7, H16).
#include <toml++/toml.h>
