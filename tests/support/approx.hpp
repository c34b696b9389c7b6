// Relative tolerance for doctest checks.
#pragma once

#include <cfloat>

#include <doctest/doctest.h>
#include "support/approx.hpp"

namespace tetra::test {

/// tetra::test::approx(x).epsilon(e) passes when |a - x| < e * (scale + max(|a|, |x|)) with a
/// scale of 1: for values well under 1 (the seconds of one collective, a fraction) that is an
/// absolute tolerance of e, and the check passes whatever the value. approx() sets the scale to
/// the smallest normal double, so e is relative; an exact zero still matches an exact zero.
inline doctest::Approx approx(double x) { return doctest::Approx(x).scale(DBL_MIN); }

}  // namespace tetra::test
