#pragma once
/// Self-contained HTML reports of `tetrasim plan`, `search` and `simulate`: one page each, with
/// inline SVG plots and CSS and no script or network reference, so that it opens offline.
///
/// The inputs are plain values that the CLI fills from the numbers it prints with `--json`.
/// Every plotted mark and every table cell that shows a number carries it verbatim (shortest
/// round-trip decimal) in `data-v-<key>` attributes next to `data-ref`, a JSON pointer
/// (RFC 6901) to the object of the `--json` output that holds `<key>`; a test can therefore
/// check the page against `--json` number for number.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace tetra::report {

/// A predicted step time's uncertainty, seconds; drawn as a band or whiskers when both are set.
struct StepBand {
  std::optional<double> step_time_low_s;
  std::optional<double> step_time_high_s;
  [[nodiscard]] bool present() const noexcept { return step_time_low_s && step_time_high_s; }
};

/// A labelled number of a summary table (`key` is its key in the object at `ref`).
struct Fact {
  std::string label;
  std::string ref;   ///< JSON pointer of the object holding `key`
  std::string key;
  double value = 0;
  /// How the value reads: "s" (seconds, ms below one), "%" (a fraction, shown in percent),
  /// "GiB", "TFLOP/s", "days", "SI" (k / M / G / T), other text after the number, "" plain.
  std::string unit;
};

// --- plan -----------------------------------------------------------------------------------

/// One candidate (cluster at one GPU count) of a plan; `ref` points at its JSON object.
struct PlanCandidate {
  std::string ref;
  std::size_t id = 0;
  std::string name;       ///< candidate name (cluster preset)
  std::string gpu;        ///< GPU type: one scaling curve per type
  int gpus = 0;
  bool fits = false;      ///< has a layout that fits; the numbers below are set only then
  std::string layout;     ///< best layout, human-readable
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;                   ///< mfu with the recomputed FLOPs counted
  double mfu_peak_tflops = 0;       ///< what mfu and hfu divide by: the GPU's dense BF16 peak
  std::optional<double> days;       ///< unset: never finishes
  std::optional<double> gpu_hours;
  std::optional<double> cost;       ///< set when the plan has prices
  double gpu_power_w = 0;           ///< the GPU's power under training load (0 = unknown)
  std::optional<double> energy_mwh; ///< unset: unknown power, or never finishes
  bool pareto = false;
  /// plan::Verdict in words ("meets", "at risk", "misses") when the plan has the limit.
  std::optional<std::string> deadline_verdict;
  std::optional<std::string> budget_verdict;
  StepBand band;
  std::optional<double> price_per_gpu_hour;
  /// Days, cost and energy at the band's ends (`days_band` / `cost_band` / `energy_band` {low,
  /// high} of its JSON object); high is the band's slow end.
  std::optional<double> days_low, days_high, cost_low, cost_high, energy_low, energy_high;
};

struct PlanPage {
  std::string title;
  std::vector<Fact> facts;
  bool priced = false;                  ///< days vs cost; otherwise days vs GPU-hours
  std::optional<double> deadline_days;  ///< drawn as a vertical line
  std::optional<double> budget;         ///< drawn as a horizontal line (priced plans)
  double pue = 0;                       ///< the energy's power usage effectiveness
  std::vector<PlanCandidate> candidates;
  /// The verdict (ids): the cheapest (priced) or fastest that meets the deadline and the
  /// budget at its band's slow end; unset when none does. `fastest` and `cheapest` regardless of the limits.
  std::optional<std::size_t> recommended, fastest, cheapest;
  std::string band_basis;  ///< what the step-time band is, in words ("" without one)
};

// --- search ---------------------------------------------------------------------------------

/// One ranked layout; `ref` points at its JSON object.
struct RankedLayout {
  std::string ref;
  int rank = 0;           ///< 1 = best
  std::string layout;     ///< human-readable
  std::string schedule;   ///< pipeline schedule: the colour of its mark
  double step_time_s = 0;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;           ///< mfu with the recomputed FLOPs counted
  double peak_gib = 0;
  StepBand band;
};

struct SearchPage {
  std::string title;
  std::vector<Fact> facts;
  std::optional<double> capacity_gib;  ///< drawn as vertical lines on the memory axis
  std::optional<double> budget_gib;
  std::vector<RankedLayout> layouts;   ///< best first; all are plotted
  std::size_t table_rows = 10;         ///< the top-N table
  std::string mfu_peak;                ///< what MFU divides by, "BF16 dense peak 989 TFLOP/s"
};

// --- simulate -------------------------------------------------------------------------------

/// Memory of one GPU of one pipeline stage, GiB; `ref` points at the object with these keys
/// (params_gib, fp8_cache_gib, grads_gib, optimizer_gib, activations_gib, buffers_gib,
/// reserved_gib). The part of reserved_gib above the others is allocator fragmentation.
struct StageMemory {
  std::string ref;
  /// MoE models: the routed experts' part of params..optimizer and of activations
  /// (expert_states_gib, expert_activations_gib); unset on a dense model.
  std::optional<double> expert_states_gib, expert_activations_gib;
  int stage = 0;
  double params_gib = 0;
  double fp8_cache_gib = 0;
  double grads_gib = 0;
  double optimizer_gib = 0;
  double activations_gib = 0;
  double buffers_gib = 0;
  double reserved_gib = 0;
};

/// One busy interval of a stream, seconds from the start of the step.
struct Slice {
  double start_s = 0;
  double end_s = 0;
  std::string kind;  ///< the trace category: colour and legend entry ("F", "B", "tp", "ep", ...)
};

/// One stream of a stage (compute, TP, CP, EP, PP, DP, ...).
struct Lane {
  std::string name;
  std::vector<Slice> slices;
};

/// One kind of exchange (TP, CP, EP, DP, PP) and the size of its group in the layout.
struct Exchange {
  std::string name;
  int degree = 1;
};

/// One stage's step. Gaps of the first lane (the compute stream) are drawn as bubbles.
struct StageTimeline {
  std::string ref;      ///< object with busy_s and idle_s
  int stage = 0;
  double busy_s = 0;
  double idle_s = 0;
  std::vector<Lane> lanes;
};

struct SimulatePage {
  std::string title;
  std::string layout;            ///< compact layout, shown under the title
  std::vector<Fact> facts;
  StepBand band;                 ///< of the step time
  double step_time_s = 0;        ///< the timeline's extent
  double capacity_gib = 0;
  std::optional<double> usable_gib;  ///< the planning margin
  std::string memory_ref;            ///< object with capacity_gib (and usable_gib)
  std::vector<StageMemory> memory;
  std::vector<StageTimeline> timeline;
  std::vector<Exchange> exchanges;   ///< every kind, listed in the timeline's legend
  int micro_batches = 0;
};

/// The pages, as complete HTML documents.
[[nodiscard]] std::string plan_html(const PlanPage& page);
[[nodiscard]] std::string search_html(const SearchPage& page);
[[nodiscard]] std::string simulate_html(const SimulatePage& page);

/// The colour of a GPU type ("h100-sxm-80gb") in every chart of every page: fixed for the
/// preset GPUs, derived from the name for others.
[[nodiscard]] std::string gpu_colour(const std::string& gpu);

// --- building blocks, public for tests ------------------------------------------------------

/// Text with &, <, >, " and ' replaced by entities, safe in element text and quoted attributes.
[[nodiscard]] std::string escape(const std::string& text);

/// Shortest decimal that reads back as exactly `x` ("0.1", "53.376", "1e+20"); "nan"/"inf" as such.
[[nodiscard]] std::string number(double x);

/// Tick positions of a linear axis over [lo, hi]: multiples of 1, 2 or 5 × 10^k, about `target`
/// of them (at least two when lo < hi), all inside [lo, hi] up to rounding.
[[nodiscard]] std::vector<double> linear_ticks(double lo, double hi, int target = 6);

/// Tick positions of a logarithmic axis over [lo, hi] (0 < lo ≤ hi): 1, 2, 5 × 10^k when the
/// range spans up to three decades, powers of ten beyond; at least two ticks.
[[nodiscard]] std::vector<double> log_ticks(double lo, double hi);

/// Slices of one lane sorted by start with neighbours of the same kind joined when the gap
/// between them is at most `gap_s` (a drawing at one pixel per `gap_s` shows no difference).
[[nodiscard]] std::vector<Slice> merge_slices(std::vector<Slice> slices, double gap_s);

/// Slices of one lane over [t0, t1) in `bins` equal columns: one slice per column that is at
/// least half busy, of the kind busy longest in it (neighbours of one kind joined). A lane of
/// hundreds of micro-batches reads as its phases rather than as sub-pixel stripes.
[[nodiscard]] std::vector<Slice> bin_slices(const std::vector<Slice>& slices, double t0, double t1,
                                            std::size_t bins);

}  // namespace tetra::report
