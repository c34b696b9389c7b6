#pragma once
/// Learning a cluster's unknowns from measured steps (`tetrasim fit`, fit/README.md): the
/// cluster factors of costmodel/factors.hpp are fitted by bounded non-linear least squares on
/// the relative error of simulated step times, with sensitivities taken from the step
/// simulator itself (finite differences), and a fit is scored on rows it never saw
/// (cross-validation, `cross_validate`).

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tetra/costmodel/error_band.hpp"
#include "tetra/costmodel/factors.hpp"
#include "tetra/hw/cluster.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"

namespace tetra::fit {

/// One measured step: what ran (pointers must outlive every call that takes the case) and how
/// long the step took.
struct StepCase {
  std::string id;                           ///< row id, recorded in fitted files
  std::string group;                        ///< the sweep the row belongs to
  const model::Model* model = nullptr;
  const hw::Cluster* cluster = nullptr;
  const parallel::Training* training = nullptr;
  parallel::Layout layout;                     ///< must pass parallel::check_layout
  double measured_s = 0;                    ///< > 0
};

/// The range a factor may take, and why (physical limits, not fitted to any file).
struct FactorBound {
  costmodel::Factor factor = costmodel::Factor::gemm;
  double lower = 0;
  double upper = 0;
  const char* reason = "";
};

/// The bound of one factor (fit/src/bounds.cpp gives the reason of each).
[[nodiscard]] const FactorBound& bound(costmodel::Factor factor) noexcept;

/// How a fit treated one factor.
enum class FactorStatus {
  fitted,          ///< estimated, strictly inside its bound
  at_bound,        ///< estimated, but the best value lies on (or beyond) a bound
  unconstrained,   ///< no row spends a measurable share of its step on it: left neutral
  not_fitted,      ///< not asked for (--factors): left neutral
};
[[nodiscard]] const char* to_string(FactorStatus s) noexcept;

/// One factor after a fit.
struct FactorFit {
  costmodel::Factor factor = costmodel::Factor::gemm;
  FactorStatus status = FactorStatus::not_fitted;
  double value = 0;       ///< seconds for step_overhead, else a multiplier of the modelled speed
  double lower = 0, upper = 0;
  /// One standard error of `value` from the fit's covariance (σ² (JᵀJ)⁻¹ with σ² the residual
  /// variance); < 0 when not estimable (not fitted, or no more rows than fitted factors).
  double std_error = -1;
  /// Mean share of a fitted row's step that moves with the factor (|d ln t / d ln f|; for
  /// step_overhead the overhead's share of the step), at the fitted values.
  double share = 0;
};

/// What a fit found, as a fitted file records it.
struct FitSummary {
  costmodel::Factors factors;            ///< the values to apply
  std::vector<FactorFit> per_factor;     ///< every factor, in costmodel::kFactors order
  std::vector<std::string> rows;         ///< ids of the rows fitted
  double rms_error = 0;                  ///< RMS relative step-time error on those rows
  double mape = 0;                       ///< mean absolute relative error on those rows
  int iterations = 0;
  bool converged = false;
  std::string csv;                       ///< provenance, set by the caller
  std::string cluster;                   ///< cluster the rows were selected by ("" = all)
  /// Signed errors of the rows, each predicted by a fit that did not see it (cross-validation;
  /// set by the caller), as the band of steps predicted with these factors; none in files
  /// written before bands were recorded.
  std::optional<costmodel::ErrorBand> band;
  std::string band_scheme;               ///< the cross-validation the band comes from
  /// Per fitted row, its step time at the fitted factors (not written to fitted files).
  std::vector<double> predicted_s;
};

/// The factors a fit estimates when none are named: every factor but `host`. Where the GPUs do
/// not wait for the host a host factor moves the steps by a few per cent at most, and fitted
/// anyway it trades the rank order of layouts for a fraction of a per cent of error
/// (fit/README.md, "The host"); it is fitted where it is named.
inline constexpr std::array<costmodel::Factor, 6> kDefaultFactors{
    costmodel::Factor::gemm,       costmodel::Factor::attention,  costmodel::Factor::memory_bound,
    costmodel::Factor::intra_node, costmodel::Factor::inter_node, costmodel::Factor::step_overhead};

struct FitOptions {
  /// Factors to fit; the others stay neutral. Empty: kDefaultFactors.
  std::vector<costmodel::Factor> factors;
  int threads = 0;                       ///< simulation workers; 0 = every core
  int max_iterations = 40;
};

/// Step time of every case under `factors`, simulated; `failure` says why a case could not be
/// simulated (its `seconds` is then 0).
struct StepPrediction {
  double seconds = 0;
  std::string failure;
};
[[nodiscard]] std::vector<StepPrediction> predict_steps(const std::vector<StepCase>& cases,
                                                        const costmodel::Factors& factors,
                                                        int threads = 0);

/// Fits the factors on `cases` (all of which must simulate; see predict_steps). Minimises
/// Σ ((t_i(f) − m_i) / m_i)² over the box of each factor's bound by a projected
/// Levenberg–Marquardt iteration on Eigen matrices: rate factors in log space, the overhead in
/// seconds; the Jacobian of the rate factors by forward differences of the simulator, of the
/// overhead exactly (it adds to the step). Deterministic for every thread count.
/// Throws UserError when there are fewer cases than the requested factors that move their
/// steps (a factor no case depends on needs no case), or no case at all. A factor that moves
/// no step where the fit ends but does at one of its bounds (a kink: the slower of two paces)
/// gets a second fit from that bound; the lower error wins.
[[nodiscard]] FitSummary fit_factors(const std::vector<StepCase>& cases, const FitOptions& options);

/// `n` cases chosen to constrain the factors best without looking at what was measured: a
/// greedy D-optimal design over each case's zero-shot sensitivities (d ln t / d ln f for the
/// factors to fit): every pick maximises det(Σ s sᵀ) of the picks so far, ties to the earlier
/// case. Indices into `cases`, in pick order; all of them when n >= cases.size().
[[nodiscard]] std::vector<std::size_t> spanning_cases(const std::vector<StepCase>& cases, std::size_t n,
                                                      const FitOptions& options);

/// Cross-validation folds: `fold[i]` is the fold of case i, folds numbered 0..k-1.
struct Folds {
  std::vector<int> fold;
  int count = 0;
};
/// k folds by position (case i in fold i mod k); k = cases.size() is leave-one-out.
[[nodiscard]] Folds folds_by_position(std::size_t cases, int k);
/// One fold per distinct `group` (leave one sweep out), folds in order of first appearance.
[[nodiscard]] Folds folds_by_group(const std::vector<StepCase>& cases);

/// The outcome of a cross-validation.
struct CrossValidation {
  std::vector<double> predicted_s;       ///< per case, by the fit that did not see it
  std::vector<FitSummary> fits;          ///< per fold
};
/// For each fold: fit on the other folds, predict this one. Throws UserError when a fold's
/// training rows are fewer than the factors that move their steps.
[[nodiscard]] CrossValidation cross_validate(const std::vector<StepCase>& cases, const Folds& folds,
                                             const FitOptions& options);

}  // namespace tetra::fit
