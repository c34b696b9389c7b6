#pragma once
// A simulated step's Chrome trace as one string, for tests that compare or parse it whole.
#include <sstream>
#include <string>

#include "tetra/sim/simulator.hpp"

namespace tetra::test {

inline std::string trace_text(const sim::Simulator& s, sim::TraceDetail detail = sim::TraceDetail::full) {
  std::ostringstream out;
  s.write_chrome_trace(out, detail);
  return std::move(out).str();
}

}  // namespace tetra::test
