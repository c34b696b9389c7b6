// One `tetrasim fit` of the 401 step-time rows of data/validation/hagemann2023.csv (every
// factor, both cores): the fit's cost is the step simulations of its Jacobians and trial
// steps. The target (fit/README.md): at most 30 s on 2 cores.

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "tetra/fit/fit.hpp"
#include "tetra/scenarios/measurements.hpp"

namespace {

using namespace tetra;

void BM_fit_hagemann_401_rows(benchmark::State& state) {
  const auto rows =
      scenarios::read_measurements(std::string(TETRA_SOURCE_DIR) + "/data/validation/hagemann2023.csv");
  std::vector<fit::StepCase> cases;
  for (const auto& r : rows) {
    if (r.skip_reason.empty() && r.metric == scenarios::Metric::step_time_s) cases.push_back(scenarios::step_case(r));
  }
  fit::FitOptions options;
  options.threads = 2;
  int iterations = 0;
  for (auto _ : state) {
    const fit::FitSummary s = fit::fit_factors(cases, options);
    iterations = s.iterations;
    benchmark::DoNotOptimize(s.factors);
  }
  state.counters["rows"] = static_cast<double>(cases.size());
  state.counters["lm_iterations"] = iterations;
}
BENCHMARK(BM_fit_hagemann_401_rows)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
