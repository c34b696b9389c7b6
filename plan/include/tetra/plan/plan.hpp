#pragma once
/// `tetrasim plan`: which cluster, and how many of its GPUs, trains a model on a number of
/// tokens soonest and cheapest. For every candidate (a cluster at one GPU count) the best
/// layout of the scenario's [search] space (search::find_best: the layout `tetrasim search`
/// ranks first), its step time, and from them the days, GPU-hours, cost and energy
/// (energy.hpp) of the whole run with the time lost to failures and checkpoints
/// (goodput.hpp); then the ranking by days and
/// by cost, the Pareto front of (days, cost) and the candidates that meet the deadline and the
/// budget.
///
/// Two phases, so that candidates can be evaluated on many machines and combined
/// (`--shard` / `--merge`): evaluate() is the expensive, independent part of one candidate;
/// assemble() turns all evaluations into the report, deterministically.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tetra/costmodel/error_band.hpp"
#include "tetra/costmodel/factors.hpp"
#include "tetra/costmodel/profile.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"
#include "tetra/plan/energy.hpp"
#include "tetra/plan/goodput.hpp"
#include "tetra/search/search.hpp"
#include "tetra/search/space.hpp"

namespace tetra::plan {

/// One cluster at one GPU count.
struct Candidate {
  std::string name;                        ///< the cluster preset, file or given name
  hw::Cluster cluster;                     ///< sized to the GPU count (total_gpus())
  std::optional<costmodel::Profile> profile;  ///< calibration profile of a cluster file
  costmodel::Factors factors;              ///< fitted cluster factors (--fit), neutral if none
  std::optional<double> price_per_gpu_hour;  ///< the user's price, currency-free; none: no cost
  /// The error band of its predicted steps (costmodel/error_band.hpp), set by the caller:
  /// the fit's when `factors` are fitted, else the zero-shot band of the GPU's generation.
  costmodel::StepBand band;
};

/// What to train and the [plan] keys.
struct PlanSettings {
  double tokens = 0;                        ///< tokens to train, > 0
  std::optional<double> deadline_days;      ///< > 0
  std::optional<double> budget;             ///< > 0, in the prices' currency
  GoodputParams goodput;
  double pue = kDefaultPue;                 ///< [plan] pue, kMinPue .. kMaxPue (energy.hpp)
};

/// Everything a plan reads. Pointers must outlive the calls.
struct PlanInput {
  const model::Model* model = nullptr;
  const parallel::Training* training = nullptr;
  const search::SearchSpace* space = nullptr;
  parallel::Layout base;                       ///< fields the space does not vary (rank_order)
  PlanSettings settings;
  std::vector<Candidate> candidates;        ///< in scenario order (ids are indices)
};

/// The expensive part of one candidate: its search. Plain numbers only, so that a shard can
/// write it and a merge read it back exactly.
struct Evaluation {
  std::optional<search::RankedLayout> best;  ///< empty: no layout fits the memory budget
  search::SearchSummary summary;             ///< find_best's counts
  std::uint64_t skipped_by_bound = 0;        ///< find_best's
};

/// Runs search::find_best for candidate `index` (threads and progress from `options`).
[[nodiscard]] Evaluation evaluate(const PlanInput& in, std::size_t index,
                                  const search::SearchOptions& options = {});

/// evaluate() of candidates `indices`, in that order. The candidates run side by side on
/// `options.threads` workers (each candidate's search on threads / workers of them), those
/// with the fewest GPUs (the most micro-batches, the slowest to simulate) first; the result
/// does not depend on the thread count. `options.progress` is called as candidates finish.
[[nodiscard]] std::vector<Evaluation> evaluate_all(const PlanInput& in, const std::vector<std::size_t>& indices,
                                                   const search::SearchOptions& options = {});

/// Bytes of one checkpoint: the weights and the optimizer states of one whole (unsharded)
/// copy of the model, as the memory model counts them for a one-GPU replica without ZeRO
/// (costmodel::estimate_memory's params + optimizer: the weights in the training precision,
/// Adam's fp32 master weights and two moments; 14 B per parameter in BF16).
[[nodiscard]] double checkpoint_bytes(const model::Model& model, const parallel::Training& training,
                                      const hw::Cluster& cluster);

/// A low .. high range of a quantity (days, cost).
struct Range {
  double low = 0;
  double high = 0;
};

/// Whether a candidate keeps a limit (deadline or budget), read off its band: the band spans
/// the 10th to the 90th percentile of the model's signed errors on published runs
/// (costmodel/error_band.hpp), so its slow end is the days or cost that nine runs in ten
/// stay under, its fast end the ones that only one in ten does.
enum class Verdict {
  meets,    ///< within the limit at the band's slow end: about 90 % likely or more
  at_risk,  ///< the limit falls inside the band: between about 10 % and 90 % likely
  misses,   ///< beyond the limit even at the band's fast end: about 10 % likely or less
};
/// "meets", "at risk", "misses".
[[nodiscard]] const char* to_string(Verdict v) noexcept;

/// The verdict of `value` (days or cost) against `limit`, with the band's `range` of it when
/// there is one; without a band the prediction decides (meets or misses).
[[nodiscard]] Verdict verdict_of(double value, const std::optional<Range>& range, double limit) noexcept;

/// One candidate in the report.
struct Row {
  std::size_t index = 0;          ///< into PlanInput::candidates
  bool fits = false;              ///< a layout fits the memory budget; nothing below otherwise
  search::RankedLayout best;      ///< the layout and its simulated step
  Goodput goodput;
  double compute_days = 0;        ///< tokens / tokens/s, without failures
  double days = 0;                ///< compute_days / goodput (+inf if goodput is 0)
  double gpu_hours = 0;           ///< GPUs × days × 24
  std::optional<double> cost;     ///< gpu_hours × price, when priced
  double gpu_power_w = 0;         ///< training_power_w of the candidate's GPU (energy.hpp)
  /// energy_mwh over gpu_hours at gpu_power_w and the plan's PUE; empty when the GPU's power
  /// is unknown or the run never finishes.
  std::optional<double> energy_mwh;
  /// The candidate's band around the best step, and the days and cost it implies (both scale
  /// with the step time: goodput does not depend on it); empty without a band.
  std::optional<costmodel::StepInterval> step_band_s;
  std::optional<Range> days_band;
  std::optional<Range> cost_band;
  /// The energy at the band's ends (energy scales with the days); empty without a band or an
  /// energy.
  std::optional<Range> energy_band;
  double headroom_bytes = 0;      ///< GPU memory left on the fullest stage (MemoryReport::headroom_bytes)
  bool finishes = true;           ///< goodput > 0
  bool pareto = false;            ///< on the front of (days, cost), or fastest without prices
  std::optional<Verdict> deadline;  ///< when a deadline is given (misses if it never finishes)
  std::optional<Verdict> budget;    ///< when a budget is given (needs prices)
  int rank_days = 0;              ///< 1 = fastest; 0 when it does not fit or never finishes
  int rank_cost = 0;              ///< 1 = cheapest; 0 without prices
};

/// The whole plan.
struct Report {
  std::vector<Row> rows;                 ///< one per candidate, in candidate order
  bool priced = false;                   ///< every candidate has a price
  double checkpoint_bytes = 0;
  std::vector<std::size_t> by_days;      ///< row indices that finish, fastest first (ties:
                                         ///< cheaper, then candidate order)
  std::vector<std::size_t> by_cost;      ///< the same by cost (ties: faster, then order); empty
                                         ///< without prices
  std::vector<std::size_t> pareto;       ///< front rows in by_days order
  std::vector<std::size_t> meeting;      ///< rows whose verdicts on the deadline and the budget
                                         ///< given are both `meets` (all that finish when
                                         ///< neither is), by_cost order when priced, else
                                         ///< by_days order
  std::vector<std::size_t> at_risk;      ///< rows not meeting, none of whose verdicts is
                                         ///< `misses`, in the same order
};

/// The report of `evals` (one per candidate, in order). Preconditions: evals.size() ==
/// in.candidates.size(); prices on every candidate or on none; a budget only with prices.
[[nodiscard]] Report assemble(const PlanInput& in, const std::vector<Evaluation>& evals);

/// Which of `points` (x, y) no other point dominates (x' ≤ x and y' ≤ y, one strictly).
/// Equal points are all on the front. O(n²).
[[nodiscard]] std::vector<bool> pareto_front(const std::vector<std::pair<double, double>>& points);

/// Candidate indices of shard `shard` (1-based) of `shards`: every index i with
/// i mod shards == shard − 1 (round robin, so each shard gets small and large GPU counts).
/// Preconditions: 1 ≤ shard ≤ shards.
[[nodiscard]] std::vector<std::size_t> shard_indices(std::size_t count, int shard, int shards);

}  // namespace tetra::plan
