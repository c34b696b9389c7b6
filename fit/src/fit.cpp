// The bounded least-squares fit of the cluster factors (fit.hpp): a projected
// Levenberg–Marquardt iteration whose linear algebra is Eigen's.

#include "tetra/fit/fit.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>

#include <Eigen/Dense>

#include "step_model.hpp"
#include "tetra/base/error.hpp"
#include "tetra/search/parallel.hpp"

namespace tetra::fit {

namespace {

using costmodel::Factor;
using costmodel::Factors;

/// A rate factor moving no row's step by more than this share (|d ln t / d ln f|) is
/// unconstrained: any value inside its bound predicts the same steps.
constexpr double kMinShare = 1e-3;
/// Forward-difference step in ln factor (0.1 %): far above the simulator's picosecond
/// resolution, small against the curvature of a step time in its factors.
constexpr double kDiffStep = 1e-3;

/// The factors a fit estimates, in kFactors order without repeats (empty request: the
/// default set).
std::vector<Factor> requested(const FitOptions& o) {
  std::vector<Factor> out;
  for (Factor f : costmodel::kFactors) {
    const bool named = std::find(o.factors.begin(), o.factors.end(), f) != o.factors.end();
    const bool by_default = std::find(kDefaultFactors.begin(), kDefaultFactors.end(), f) != kDefaultFactors.end();
    if (o.factors.empty() ? by_default : named) out.push_back(f);
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The fit's parameter vector: ln f for a rate factor, the overhead in units of the median
/// measured step (so every parameter moves the residuals on the same scale).
struct Parameters {
  std::vector<Factor> factors;
  std::vector<double> lower, upper;
  double overhead_unit = 1;

  [[nodiscard]] std::size_t size() const { return factors.size(); }
  [[nodiscard]] double to_theta(Factor f, double value) const {
    return f == Factor::step_overhead ? value / overhead_unit : std::log(value);
  }
  [[nodiscard]] Factors to_factors(const Eigen::VectorXd& theta) const {
    Factors out;
    for (std::size_t j = 0; j < size(); ++j) {
      const Factor f = factors[j];
      const double x = theta(static_cast<Eigen::Index>(j));
      const double v = f == Factor::step_overhead ? x * overhead_unit : std::exp(x);
      out.set(f, std::clamp(v, bound(f).lower, bound(f).upper));
    }
    return out;
  }
};

/// Relative residuals (t_i + overhead) / m_i − 1 and half their sum of squares.
double residuals(const std::vector<StepCase>& cases, const std::vector<double>& t, double overhead,
                 Eigen::VectorXd& r) {
  r.resize(static_cast<Eigen::Index>(cases.size()));
  for (std::size_t i = 0; i < cases.size(); ++i) {
    r(static_cast<Eigen::Index>(i)) = (t[i] + overhead) / cases[i].measured_s - 1.0;
  }
  return 0.5 * r.squaredNorm();
}

/// "1 row", "3 rows".
std::string count(std::size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

void check_cases(const std::vector<StepCase>& cases) {
  if (cases.empty()) throw UserError("fit: no usable step-time rows");
  for (const StepCase& c : cases) {
    if (!(c.measured_s > 0) || !std::isfinite(c.measured_s)) {
      throw UserError("fit: row " + c.id + ": the measured step time must be a positive number");
    }
  }
}

/// Fewer rows than the factors that move their steps: fit_factors and cross_validate word it
/// for their callers.
struct TooFewRows {
  std::size_t rows = 0;
  std::size_t factors = 0;
};

/// What the iteration of fit_factors works on: the parameters, which columns are rate factors
/// (their slopes come from the simulator) and which is the overhead (its column is exact),
/// and the measured steps.
struct Problem {
  Parameters par;
  std::vector<Factor> rates;
  std::vector<Eigen::Index> rate_col;
  Eigen::Index overhead_col = -1;
  std::vector<double> measured;
  Eigen::Index k = 0;  // parameters
  Eigen::Index n = 0;  // cases
};

Problem make_problem(const std::vector<StepCase>& cases, const std::vector<Factor>& wanted) {
  Problem pb;
  for (const StepCase& c : cases) pb.measured.push_back(c.measured_s);
  Parameters& par = pb.par;
  par.factors = wanted;
  par.overhead_unit = median(pb.measured);
  for (Factor f : wanted) {
    par.lower.push_back(par.to_theta(f, bound(f).lower));
    par.upper.push_back(par.to_theta(f, bound(f).upper));
  }
  pb.k = static_cast<Eigen::Index>(par.size());
  pb.n = static_cast<Eigen::Index>(cases.size());
  for (Eigen::Index j = 0; j < pb.k; ++j) {
    if (par.factors[static_cast<std::size_t>(j)] == Factor::step_overhead) {
      pb.overhead_col = j;
    } else {
      pb.rates.push_back(par.factors[static_cast<std::size_t>(j)]);
      pb.rate_col.push_back(j);
    }
  }
  return pb;
}

// The start: every factor neutral, inside its bounds.
Eigen::VectorXd start_theta(const Parameters& par) {
  const auto k = static_cast<Eigen::Index>(par.size());
  Eigen::VectorXd theta = Eigen::VectorXd::Zero(k);
  for (Eigen::Index j = 0; j < k; ++j) {
    const Factor f = par.factors[static_cast<std::size_t>(j)];
    theta(j) = std::clamp(par.to_theta(f, Factors::neutral(f)), par.lower[static_cast<std::size_t>(j)],
                          par.upper[static_cast<std::size_t>(j)]);
  }
  return theta;
}

// Forward differences step inward from an upper bound.
std::vector<double> diff_steps(const Problem& pb, const Eigen::VectorXd& th) {
  std::vector<double> step;
  for (std::size_t r = 0; r < pb.rates.size(); ++r) {
    const auto j = static_cast<std::size_t>(pb.rate_col[r]);
    step.push_back(th(pb.rate_col[r]) + kDiffStep > pb.par.upper[j] ? -kDiffStep : kDiffStep);
  }
  return step;
}

double overhead_of(const Problem& pb, const Eigen::VectorXd& th) {
  return pb.overhead_col >= 0 ? pb.par.to_factors(th).step_overhead_s : 0.0;
}

// d r_i / d theta_j: the rate columns from the slopes at the step times t, the overhead
// column exact.
Eigen::MatrixXd jacobian(const Problem& pb, const std::vector<double>& t, const Eigen::MatrixXd& slopes) {
  Eigen::MatrixXd jac = Eigen::MatrixXd::Zero(pb.n, pb.k);
  for (Eigen::Index i = 0; i < pb.n; ++i) {
    const double m = pb.measured[static_cast<std::size_t>(i)];
    for (std::size_t r = 0; r < pb.rates.size(); ++r) {
      jac(i, pb.rate_col[r]) = slopes(i, static_cast<Eigen::Index>(r)) * t[static_cast<std::size_t>(i)] / m;
    }
    if (pb.overhead_col >= 0) jac(i, pb.overhead_col) = pb.par.overhead_unit / m;
  }
  return jac;
}

// Unconstrained rate factors stay neutral and out of the iteration.
std::vector<bool> active_parameters(const Problem& pb, const Eigen::MatrixXd& slopes) {
  std::vector<bool> active(static_cast<std::size_t>(pb.k), true);
  for (std::size_t r = 0; r < pb.rates.size(); ++r) {
    if (slopes.col(static_cast<Eigen::Index>(r)).cwiseAbs().maxCoeff() < kMinShare) {
      active[static_cast<std::size_t>(pb.rate_col[r])] = false;
    }
  }
  return active;
}

/// The state of the iteration: the parameters, the step times, slopes, residuals, error and
/// Jacobian there, the damping, and scratch for trial steps.
struct FitState {
  Eigen::VectorXd theta;
  std::vector<double> t;
  Eigen::MatrixXd slopes;
  Eigen::VectorXd res;
  double cost = 0;
  Eigen::MatrixXd jac;
  double lambda = 1e-3;
  int iterations = 0;
  bool converged = false;
  std::vector<double> t_try;
  Eigen::VectorXd res_try;
};

constexpr double kBoundTol = 1e-9;

// Free parameters: active, and not pressed against a bound by the gradient.
std::vector<Eigen::Index> free_parameters(const Problem& pb, const std::vector<bool>& active,
                                          const Eigen::VectorXd& theta, const Eigen::VectorXd& grad) {
  std::vector<Eigen::Index> free;
  for (Eigen::Index j = 0; j < pb.k; ++j) {
    if (!active[static_cast<std::size_t>(j)]) continue;
    const bool at_lo = theta(j) <= pb.par.lower[static_cast<std::size_t>(j)] + kBoundTol && grad(j) > 0;
    const bool at_hi = theta(j) >= pb.par.upper[static_cast<std::size_t>(j)] - kBoundTol && grad(j) < 0;
    if (!at_lo && !at_hi) free.push_back(j);
  }
  return free;
}

// One Levenberg–Marquardt step over the free parameters: the damping grows tenfold until a
// projected step lowers the error (at most 16 tries). Returns whether one did; sets
// s.converged when the fit is done.
bool damped_step(FitState& s, const Problem& pb, const std::vector<StepCase>& cases, detail::StepModel& model,
                 const std::vector<Eigen::Index>& free, const Eigen::VectorXd& grad) {
  const auto nf = static_cast<Eigen::Index>(free.size());
  Eigen::MatrixXd jf(pb.n, nf);
  Eigen::VectorXd gf(nf);
  for (Eigen::Index c = 0; c < nf; ++c) {
    jf.col(c) = s.jac.col(free[static_cast<std::size_t>(c)]);
    gf(c) = grad(free[static_cast<std::size_t>(c)]);
  }
  const Eigen::MatrixXd normal = jf.transpose() * jf;
  const double diag_floor = std::max(normal.diagonal().maxCoeff() * 1e-12, 1e-300);
  for (int attempt = 0; attempt < 16; ++attempt) {
    Eigen::MatrixXd damped = normal;
    for (Eigen::Index c = 0; c < nf; ++c) damped(c, c) += s.lambda * std::max(normal(c, c), diag_floor);
    const Eigen::VectorXd delta = damped.ldlt().solve(-gf);
    Eigen::VectorXd trial = s.theta;
    for (Eigen::Index c = 0; c < nf; ++c) {
      const Eigen::Index j = free[static_cast<std::size_t>(c)];
      trial(j) = std::clamp(s.theta(j) + delta(c), pb.par.lower[static_cast<std::size_t>(j)],
                            pb.par.upper[static_cast<std::size_t>(j)]);
    }
    if ((trial - s.theta).cwiseAbs().maxCoeff() < 1e-9) {
      s.converged = true;
      return false;
    }
    model.times(pb.par.to_factors(trial), s.t_try);
    const double cost_try = residuals(cases, s.t_try, overhead_of(pb, trial), s.res_try);
    if (cost_try < s.cost) {
      const double gain = s.cost - cost_try;
      const double moved = (trial - s.theta).cwiseAbs().maxCoeff();
      s.theta = trial;
      s.t.swap(s.t_try);
      s.res = s.res_try;
      s.cost = cost_try;
      s.lambda = std::max(s.lambda * 0.3, 1e-9);
      ++s.iterations;
      // Done when the error stops falling (relative 1e-6) or no factor moves by more than
      // 1e-4 of itself: far below what a prediction can resolve.
      s.converged = gain <= 1e-6 * (s.cost + 1e-12) || moved < 1e-4;
      return true;
    }
    s.lambda *= 10;
  }
  return false;
}

// Standard errors: the variance of each parameter inside its bounds from the final Jacobian
// (-1 where none: at a bound, unconstrained, or not identified by the rows).
Eigen::VectorXd variances(const Problem& pb, const std::vector<bool>& active, const FitState& s) {
  const Eigen::Index k = pb.k;
  const Eigen::Index n = pb.n;
  std::vector<Eigen::Index> estimated;  // inside their bounds: the covariance is theirs
  for (Eigen::Index j = 0; j < k; ++j) {
    const auto js = static_cast<std::size_t>(j);
    if (active[js] && s.theta(j) > pb.par.lower[js] + 1e-6 && s.theta(j) < pb.par.upper[js] - 1e-6) {
      estimated.push_back(j);
    }
  }
  Eigen::VectorXd variance = Eigen::VectorXd::Constant(k, -1.0);
  const auto ne = static_cast<Eigen::Index>(estimated.size());
  if (ne > 0 && n > ne) {
    Eigen::MatrixXd je(n, ne);
    for (Eigen::Index c = 0; c < ne; ++c) je.col(c) = s.jac.col(estimated[static_cast<std::size_t>(c)]);
    const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(je.transpose() * je);
    const double sigma2 = s.res.squaredNorm() / static_cast<double>(n - ne);
    const Eigen::VectorXd ev = eig.eigenvalues();
    const double tiny = std::max(ev.cwiseAbs().maxCoeff(), 1e-300) * 1e-12;
    for (Eigen::Index c = 0; c < ne; ++c) {
      double v = 0;
      bool identified = true;
      for (Eigen::Index e = 0; e < ne; ++e) {
        const double w = eig.eigenvectors()(c, e);
        if (ev(e) <= tiny) {
          if (std::abs(w) > 1e-6) identified = false;
          continue;
        }
        v += w * w / ev(e);
      }
      variance(estimated[static_cast<std::size_t>(c)]) = identified ? sigma2 * v : -1.0;
    }
  }
  return variance;
}

// The report of factor f: value, bounds, status, standard error and share of the steps.
FactorFit factor_fit(Factor f, const Problem& pb, const std::vector<bool>& active, const FitState& s,
                     const Eigen::VectorXd& variance, const Factors& fitted) {
  const Parameters& par = pb.par;
  const double overhead = fitted.step_overhead_s;
  FactorFit ff;
  ff.factor = f;
  ff.lower = bound(f).lower;
  ff.upper = bound(f).upper;
  ff.value = fitted.get(f);
  const auto it = std::find(par.factors.begin(), par.factors.end(), f);
  if (it == par.factors.end()) {
    ff.status = FactorStatus::not_fitted;
    return ff;
  }
  const auto j = static_cast<Eigen::Index>(it - par.factors.begin());
  const auto js = static_cast<std::size_t>(j);
  if (!active[js]) {
    ff.status = FactorStatus::unconstrained;
  } else {
    const bool inside = s.theta(j) > par.lower[js] + 1e-6 && s.theta(j) < par.upper[js] - 1e-6;
    ff.status = inside ? FactorStatus::fitted : FactorStatus::at_bound;
  }
  if (variance(j) >= 0) {
    const double se_theta = std::sqrt(variance(j));
    ff.std_error = f == Factor::step_overhead ? se_theta * par.overhead_unit : se_theta * ff.value;
  }
  double share = 0;
  for (Eigen::Index i = 0; i < pb.n; ++i) {
    const double ti = s.t[static_cast<std::size_t>(i)];
    if (f == Factor::step_overhead) {
      share += overhead / (ti + overhead);
    } else {
      const auto r = static_cast<Eigen::Index>(std::find(pb.rates.begin(), pb.rates.end(), f) - pb.rates.begin());
      share += std::abs(s.slopes(i, r)) * ti / (ti + overhead);
    }
  }
  ff.share = share / static_cast<double>(pb.n);
  return ff;
}

}  // namespace

std::vector<StepPrediction> predict_steps(const std::vector<StepCase>& cases, const Factors& factors,
                                          int threads) {
  std::vector<StepPrediction> out(cases.size());
  detail::StepModel model(cases, threads);
  search::parallel_for(cases.size(), model.threads(), [&](int worker, std::size_t i) {
    try {
      const double t = model.run(i, worker, factors) + factors.step_overhead_s;
      if (t > 0 && std::isfinite(t)) {
        out[i].seconds = t;
      } else {
        out[i].failure = "the simulated step takes no time";
      }
    } catch (const std::exception& e) {
      out[i].failure = std::string("cannot be simulated: ") + e.what();
    }
  });
  return out;
}

namespace {

/// Starts the fit at `theta`: the step times and slopes there, which factors move the steps
/// (active) and the error.
FitState start_at(const Eigen::VectorXd& theta, const Problem& pb, const std::vector<StepCase>& cases,
                  detail::StepModel& model, std::vector<bool>& active) {
  FitState s;
  s.theta = theta;
  model.sensitivities(pb.par.to_factors(s.theta), pb.rates, diff_steps(pb, s.theta), s.t, false, s.slopes);
  active = active_parameters(pb, s.slopes);
  s.cost = residuals(cases, s.t, overhead_of(pb, s.theta), s.res);
  s.jac = jacobian(pb, s.t, s.slopes);
  return s;
}

/// Projected Levenberg–Marquardt from `s`: new slopes (a simulation per rate factor) after
/// each step.
void iterate(FitState& s, const Problem& pb, const std::vector<StepCase>& cases, detail::StepModel& model,
             const std::vector<bool>& active, int max_iterations) {
  for (int it = 0; it < max_iterations && !s.converged; ++it) {
    const Eigen::VectorXd grad = s.jac.transpose() * s.res;
    const std::vector<Eigen::Index> free = free_parameters(pb, active, s.theta, grad);
    if (free.empty()) {
      s.converged = true;
      break;
    }
    if (!damped_step(s, pb, cases, model, free, grad)) {
      s.converged = true;  // no step lowers the error: a (bounded) minimum
      break;
    }
    if (!s.converged) {
      model.sensitivities(pb.par.to_factors(s.theta), pb.rates, diff_steps(pb, s.theta), s.t, true, s.slopes);
      s.jac = jacobian(pb, s.t, s.slopes);
    }
  }
}

/// A rate factor that moves no step where the fit stands may still move them beyond a kink: a
/// step is the slower of two paces (the GPUs, or a data loader that builds masks on the host),
/// so a host factor below 1 starts to bind only once the loader falls behind. For each such
/// factor the steps are priced at each of its bounds; the first bound that moves some step is
/// where a second fit starts. Nothing when every factor moves the steps where it stands.
std::optional<Eigen::VectorXd> beyond_a_kink(const FitState& s, const Problem& pb, const std::vector<bool>& active,
                                             detail::StepModel& model) {
  std::vector<double> t;
  for (std::size_t r = 0; r < pb.rates.size(); ++r) {
    const Eigen::Index j = pb.rate_col[r];
    const auto js = static_cast<std::size_t>(j);
    if (active[js]) continue;
    for (const double edge : {pb.par.lower[js], pb.par.upper[js]}) {
      if (std::abs(edge - s.theta(j)) < kDiffStep) continue;
      Eigen::VectorXd theta = s.theta;
      theta(j) = edge;
      try {
        model.times(pb.par.to_factors(theta), t);
      } catch (const UserError&) {
        continue;  // a step too long to replay at that bound: no second start from it
      }
      for (std::size_t i = 0; i < t.size(); ++i) {
        if (std::abs(std::log(t[i] / s.t[i])) >= kMinShare * std::abs(edge - s.theta(j))) return theta;
      }
    }
  }
  return std::nullopt;
}

/// fit_factors, throwing TooFewRows when the rows are fewer than the factors they depend on: a
/// factor no row's step moves with (a host factor where the GPU never waits for the host)
/// needs no row of its own.
FitSummary fit_or_too_few(const std::vector<StepCase>& cases, const FitOptions& options) {
  const std::vector<Factor> wanted = requested(options);
  check_cases(cases);
  detail::StepModel model(cases, options.threads);
  const Problem pb = make_problem(cases, wanted);
  std::vector<bool> active;
  FitState s = start_at(start_theta(pb.par), pb, cases, model, active);
  const auto in_play = static_cast<std::size_t>(std::count(active.begin(), active.end(), true));
  if (cases.size() < in_play) throw TooFewRows{cases.size(), in_play};
  iterate(s, pb, cases, model, active, options.max_iterations);
  // A second start where a factor binds only beyond a kink; the lower error wins.
  if (const auto kink = beyond_a_kink(s, pb, active, model)) {
    std::vector<bool> active2;
    FitState s2 = start_at(*kink, pb, cases, model, active2);
    const auto in_play2 = static_cast<std::size_t>(std::count(active2.begin(), active2.end(), true));
    if (cases.size() >= in_play2) {
      iterate(s2, pb, cases, model, active2, options.max_iterations);
      if (s2.cost < s.cost) {
        s2.iterations += s.iterations;
        s = std::move(s2);
        active = std::move(active2);
      }
    }
  }

  // Report: values, status, standard errors from the final Jacobian, shares of the step.
  FitSummary out;
  out.factors = pb.par.to_factors(s.theta);
  out.iterations = s.iterations;
  out.converged = s.converged;
  for (const StepCase& c : cases) out.rows.push_back(c.id);
  const double overhead = out.factors.step_overhead_s;
  for (double ti : s.t) out.predicted_s.push_back(ti + overhead);
  double abs_sum = 0;
  for (Eigen::Index i = 0; i < pb.n; ++i) abs_sum += std::abs(s.res(i));
  out.rms_error = std::sqrt(s.res.squaredNorm() / static_cast<double>(pb.n));
  out.mape = abs_sum / static_cast<double>(pb.n);
  const Eigen::VectorXd variance = variances(pb, active, s);
  for (Factor f : costmodel::kFactors) out.per_factor.push_back(factor_fit(f, pb, active, s, variance, out.factors));
  return out;
}

}  // namespace

FitSummary fit_factors(const std::vector<StepCase>& cases, const FitOptions& options) {
  try {
    return fit_or_too_few(cases, options);
  } catch (const TooFewRows& e) {
    throw UserError("fit: " + count(e.rows, "step-time row") + " for " + count(e.factors, "factor") +
                    " that move their steps; give at least " + count(e.factors, "row") +
                    " or fewer factors (--factors)");
  }
}

std::vector<std::size_t> spanning_cases(const std::vector<StepCase>& cases, std::size_t n,
                                        const FitOptions& options) {
  std::vector<std::size_t> picks;
  if (n >= cases.size()) {
    picks.resize(cases.size());
    std::iota(picks.begin(), picks.end(), std::size_t{0});
    return picks;
  }
  const std::vector<Factor> wanted = requested(options);
  std::vector<Factor> rates;
  for (Factor f : wanted) {
    if (f != Factor::step_overhead) rates.push_back(f);
  }
  const bool overhead = rates.size() < wanted.size();
  detail::StepModel model(cases, options.threads);
  std::vector<double> t;
  Eigen::MatrixXd slopes;
  model.sensitivities(Factors{}, rates, std::vector<double>(rates.size(), kDiffStep), t, false, slopes);

  // Sensitivity of each case to each factor: the slopes, and for the overhead
  // d ln t / d(overhead / median t) = median t / t. Columns scaled to unit RMS so the design
  // does not depend on units; a column no case is sensitive to is dropped.
  const auto rows = static_cast<Eigen::Index>(cases.size());
  Eigen::MatrixXd s(rows, slopes.cols() + (overhead ? 1 : 0));
  s.leftCols(slopes.cols()) = slopes;
  if (overhead) {
    const double mid = median(t);
    for (Eigen::Index i = 0; i < rows; ++i) s(i, slopes.cols()) = t[static_cast<std::size_t>(i)] > 0 ? mid / t[static_cast<std::size_t>(i)] : 0;
  }
  std::vector<Eigen::Index> keep;
  for (Eigen::Index c = 0; c < s.cols(); ++c) {
    const double rms = std::sqrt(s.col(c).squaredNorm() / static_cast<double>(rows));
    if (s.col(c).cwiseAbs().maxCoeff() >= kMinShare && rms > 0) {
      s.col(c) /= rms;
      keep.push_back(c);
    }
  }
  Eigen::MatrixXd x(rows, static_cast<Eigen::Index>(keep.size()));
  for (std::size_t c = 0; c < keep.size(); ++c) x.col(static_cast<Eigen::Index>(c)) = s.col(keep[c]);

  // Greedy D-optimal: det(M + s sᵀ) = det(M)(1 + sᵀ M⁻¹ s), so each pick maximises sᵀ M⁻¹ s.
  const Eigen::Index d = x.cols();
  Eigen::MatrixXd info = 1e-6 * Eigen::MatrixXd::Identity(d, d);
  std::vector<bool> taken(cases.size(), false);
  while (picks.size() < n) {
    const Eigen::MatrixXd inv = info.ldlt().solve(Eigen::MatrixXd::Identity(d, d));
    double best = -1;
    std::size_t best_i = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (taken[i]) continue;
      const Eigen::VectorXd si = x.row(static_cast<Eigen::Index>(i)).transpose();
      const double gain = si.dot(inv * si);
      if (gain > best) {
        best = gain;
        best_i = i;
      }
    }
    taken[best_i] = true;
    picks.push_back(best_i);
    const Eigen::VectorXd sb = x.row(static_cast<Eigen::Index>(best_i)).transpose();
    info += sb * sb.transpose();
  }
  return picks;
}

Folds folds_by_position(std::size_t cases, int k) {
  Folds f;
  f.count = std::max(k, 1);
  for (std::size_t i = 0; i < cases; ++i) f.fold.push_back(static_cast<int>(i % static_cast<std::size_t>(f.count)));
  return f;
}

Folds folds_by_group(const std::vector<StepCase>& cases) {
  Folds f;
  std::vector<std::string> seen;
  for (const StepCase& c : cases) {
    auto it = std::find(seen.begin(), seen.end(), c.group);
    if (it == seen.end()) {
      seen.push_back(c.group);
      it = seen.end() - 1;
    }
    f.fold.push_back(static_cast<int>(it - seen.begin()));
  }
  f.count = static_cast<int>(seen.size());
  return f;
}

CrossValidation cross_validate(const std::vector<StepCase>& cases, const Folds& folds,
                               const FitOptions& options) {
  CrossValidation cv;
  cv.predicted_s.assign(cases.size(), 0.0);
  for (int fold = 0; fold < folds.count; ++fold) {
    std::vector<StepCase> train, test;
    std::vector<std::size_t> test_index;
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (folds.fold[i] == fold) {
        test.push_back(cases[i]);
        test_index.push_back(i);
      } else {
        train.push_back(cases[i]);
      }
    }
    if (test.empty()) continue;
    FitSummary fitted;
    try {
      if (train.empty()) throw TooFewRows{0, requested(options).size()};
      fitted = fit_or_too_few(train, options);
    } catch (const TooFewRows& e) {
      throw UserError("validate --cv: fold " + std::to_string(fold + 1) + " leaves " + count(e.rows, "row") +
                      " to fit " + count(e.factors, "factor") +
                      "; use fewer folds or fewer factors (--factors)");
    }
    detail::StepModel model(test, options.threads);
    std::vector<double> t;
    model.times(fitted.factors, t);
    for (std::size_t j = 0; j < test.size(); ++j) {
      cv.predicted_s[test_index[j]] = t[j] + fitted.factors.step_overhead_s;
    }
    cv.fits.push_back(std::move(fitted));
  }
  return cv;
}

}  // namespace tetra::fit
