#pragma once
/// `tetrasim search` (docs/cli.md): enumerate every layout of a scenario's [search] space,
/// prune by the analytical memory peak, simulate the survivors with the step simulator on a
/// thread pool, and rank them by predicted tokens/s (search/README.md).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tetra/costmodel/factors.hpp"
#include "tetra/costmodel/profile.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"
#include "tetra/search/enumerate.hpp"
#include "tetra/search/parallel.hpp"
#include "tetra/search/space.hpp"

namespace tetra::search {

/// What to search. References must outlive the call.
struct SearchInput {
  const model::Model* model = nullptr;
  const hw::Cluster* cluster = nullptr;
  const parallel::Training* training = nullptr;
  const SearchSpace* space = nullptr;
  parallel::Layout base;                          ///< fields the space does not vary (rank_order)
  const costmodel::Profile* profile = nullptr; ///< calibration profile; null: built-in
  costmodel::Factors factors;                  ///< cluster factors of a step fit (neutral: none)
};

/// How to run.
struct SearchOptions {
  int threads = 0;                 ///< worker threads; 0 = std::thread::hardware_concurrency()
  ProgressFn progress;             ///< called from the calling thread about 10 times a second
  bool share_layer_tables = true;  ///< reuse priced layer tables between layouts of one shape
};

/// One simulated layout.
struct RankedLayout {
  parallel::Layout layout;
  parallel::Fp8Training fp8;          ///< the precision it was simulated in (SearchSpace::precision)
  bool compile = false;            ///< torch.compile on (SearchSpace::compile)
  parallel::Precision grad_dtype = parallel::Precision::fp32;  ///< SearchSpace::grad_dtype
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;
  double mfu = 0;
  double bubble_fraction = 0;
  double peak_bytes = 0;           ///< simulated reserved peak of the fullest stage
  double estimate_peak_bytes = 0;  ///< analytical (pruning) peak of the fullest stage
  double headroom_bytes = 0;       ///< simulated MemoryReport::headroom_bytes
  int micro_batches = 0;
};

/// How many candidates each phase kept.
struct SearchSummary {
  std::uint64_t enumerated = 0;         ///< drawn from the space
  std::uint64_t invalid = 0;            ///< broke a layout rule
  std::map<std::string, std::uint64_t> invalid_by_rule;
  std::uint64_t valid = 0;              ///< passed every rule (memory estimated)
  std::uint64_t pruned_by_memory = 0;   ///< analytical peak > memory_fraction × capacity
  std::uint64_t simulated = 0;          ///< run through the step simulator
  std::uint64_t over_budget_simulated = 0;  ///< simulated peak above the budget (not ranked)
  std::uint64_t feasible = 0;           ///< ranked
  std::uint64_t layer_shapes = 0;       ///< distinct per-layer shapes priced (0 unshared)
  double capacity_bytes = 0;            ///< GPU memory
  double budget_bytes = 0;              ///< memory_fraction × capacity
};

/// The outcome: feasible layouts best first, and the summary.
struct SearchResult {
  std::vector<RankedLayout> layouts;
  SearchSummary summary;
};

/// The ranking order: higher tokens/s first; equal tokens/s: lower simulated peak first;
/// then layout_key() ascending, then the FP8 recipe. A strict weak order (total on distinct layouts).
[[nodiscard]] bool ranks_before(const RankedLayout& a, const RankedLayout& b);

/// Runs the search. The result is identical for every `threads` value (each layout is
/// simulated independently and written by index). Throws UserError when the space holds no
/// values of a knob; sim::GraphError (a simulator bug) propagates.
[[nodiscard]] SearchResult run_search(const SearchInput& in, const SearchOptions& options = {});

/// The best layout of a space and what finding it cost.
struct BestResult {
  std::optional<RankedLayout> best;   ///< run_search(...).layouts.front(); empty when none fits
  /// Counts as in run_search, except: `simulated` = layouts simulated before the bound
  /// stopped the search, `feasible` = those of them within the budget (not every layout).
  SearchSummary summary;
  std::uint64_t skipped_by_bound = 0; ///< within the memory budget, never simulated: their
                                      ///< step-time lower bound cannot reach `best`
};

/// Layouts simulated together by find_best between two updates of the best so far. Fixed
/// (not the thread count), so that what is simulated is the same for every `threads`.
inline constexpr std::size_t kBestWave = 8;

/// The first layout of run_search(in, options) (same rules, memory pruning, simulation and
/// order), found without simulating the layouts that cannot rank first: every layout within
/// the memory budget gets sim::Simulator::step_lower_bound; layouts are simulated in waves of
/// kBestWave, highest tokens / bound first, until the next one's tokens / bound is below the
/// tokens/s of the best layout found so far (its simulated step cannot be shorter than its
/// bound, so it cannot rank before that layout). Layouts whose bound ties are simulated.
/// Deterministic for every `threads`. `options.progress` is not called.
[[nodiscard]] BestResult find_best(const SearchInput& in, const SearchOptions& options = {});

}  // namespace tetra::search
