// `tetrasim plan`: per-candidate searches and the report over them (plan.hpp).

#include "tetra/plan/plan.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "tetra/costmodel/memory.hpp"
#include "tetra/base/error.hpp"
#include "tetra/search/parallel.hpp"

namespace tetra::plan {

Evaluation evaluate(const PlanInput& in, std::size_t index, const search::SearchOptions& options) {
  const Candidate& c = in.candidates.at(index);
  search::SearchInput si;
  si.model = in.model;
  si.cluster = &c.cluster;
  si.training = in.training;
  si.space = in.space;
  si.base = in.base;
  si.profile = c.profile ? &*c.profile : nullptr;
  si.factors = c.factors;
  search::BestResult r = search::find_best(si, options);
  Evaluation e;
  e.best = std::move(r.best);
  e.summary = std::move(r.summary);
  e.skipped_by_bound = r.skipped_by_bound;
  return e;
}

std::vector<Evaluation> evaluate_all(const PlanInput& in, const std::vector<std::size_t>& indices,
                                     const search::SearchOptions& options) {
  const int threads = search::resolve_threads(options.threads);
  const std::size_t n = indices.size();
  const int workers = static_cast<int>(std::max<std::size_t>(1, std::min<std::size_t>(static_cast<std::size_t>(threads), n)));
  search::SearchOptions inner;
  inner.threads = std::max(1, threads / workers);
  inner.share_layer_tables = options.share_layer_tables;
  // Longest first: fewer GPUs mean more micro-batches per step, longer replays.
  std::vector<std::size_t> order(n);
  for (std::size_t k = 0; k < n; ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return in.candidates.at(indices[a]).cluster.total_gpus() < in.candidates.at(indices[b]).cluster.total_gpus();
  });
  std::vector<Evaluation> out(n);
  search::parallel_for(
      n, workers, [&](int, std::size_t k) { out[order[k]] = evaluate(in, indices[order[k]], inner); },
      options.progress);
  return out;
}

double checkpoint_bytes(const model::Model& model, const parallel::Training& training,
                        const hw::Cluster& cluster) {
  // One replica on one GPU, no ZeRO, Megatron's habits (the states a checkpoint holds,
  // without FP8 weight caches); only the model states of the report are read.
  parallel::Training t = training;
  t.zero_stage = 0;
  t.framework = parallel::Framework::megatron;
  t.fp8 = parallel::Fp8Training{};
  t.global_batch = 1;
  parallel::Layout one;
  hw::Cluster single = cluster;
  single.gpus_per_node = 1;
  single.nodes = 1;
  single.intra.domain_gpus = 0;
  const costmodel::MemoryReport rep = costmodel::estimate_memory(model, single, t, one);
  double bytes = 0;
  for (const auto& s : rep.stages) bytes += s.params_bytes + s.optimizer_bytes;
  return bytes;
}

std::vector<bool> pareto_front(const std::vector<std::pair<double, double>>& points) {
  std::vector<bool> front(points.size(), true);
  for (std::size_t i = 0; i < points.size(); ++i) {
    for (std::size_t j = 0; j < points.size() && front[i]; ++j) {
      const auto& a = points[j];
      const auto& b = points[i];
      if (a.first <= b.first && a.second <= b.second && (a.first < b.first || a.second < b.second)) {
        front[i] = false;
      }
    }
  }
  return front;
}

std::vector<std::size_t> shard_indices(std::size_t count, int shard, int shards) {
  std::vector<std::size_t> out;
  for (std::size_t i = static_cast<std::size_t>(shard - 1); i < count; i += static_cast<std::size_t>(shards)) {
    out.push_back(i);
  }
  return out;
}

const char* to_string(Verdict v) noexcept {
  switch (v) {
    case Verdict::meets: return "meets";
    case Verdict::at_risk: return "at risk";
    case Verdict::misses: return "misses";
  }
  return "misses";
}

Verdict verdict_of(double value, const std::optional<Range>& range, double limit) noexcept {
  if (!range) return value <= limit ? Verdict::meets : Verdict::misses;
  if (range->high <= limit) return Verdict::meets;
  if (range->low <= limit) return Verdict::at_risk;
  return Verdict::misses;
}

Report assemble(const PlanInput& in, const std::vector<Evaluation>& evals) {
  Report rep;
  const std::size_t n = in.candidates.size();
  if (evals.size() != n) throw std::logic_error("plan::assemble: one evaluation per candidate");
  rep.priced = n > 0 && std::all_of(in.candidates.begin(), in.candidates.end(),
                                    [](const Candidate& c) { return c.price_per_gpu_hour.has_value(); });
  const PlanSettings& set = in.settings;
  if (!in.candidates.empty()) {
    rep.checkpoint_bytes = checkpoint_bytes(*in.model, *in.training, in.candidates.front().cluster);
  }

  std::vector<std::size_t> finishing;
  for (std::size_t i = 0; i < n; ++i) {
    const Candidate& c = in.candidates[i];
    Row row;
    row.index = i;
    if (evals[i].best) {
      row.fits = true;
      row.best = *evals[i].best;
      const std::int64_t gpus = c.cluster.total_gpus();
      row.goodput = goodput(gpus, rep.checkpoint_bytes, set.goodput);
      row.compute_days = set.tokens / row.best.tokens_per_s / 86400.0;
      row.finishes = row.goodput.goodput > 0;
      row.days = row.finishes ? row.compute_days / row.goodput.goodput
                              : std::numeric_limits<double>::infinity();
      row.gpu_hours = static_cast<double>(gpus) * row.days * 24.0;
      if (c.price_per_gpu_hour) row.cost = row.gpu_hours * *c.price_per_gpu_hour;
      row.gpu_power_w = training_power_w(c.cluster.gpu);
      if (row.gpu_power_w > 0 && row.finishes) {
        row.energy_mwh = energy_mwh(static_cast<double>(gpus), row.gpu_power_w, row.days * 24.0, set.pue);
      }
      row.step_band_s = c.band.interval(row.best.step_time_s);
      if (row.step_band_s && row.finishes) {
        const double low = row.step_band_s->low_s / row.best.step_time_s;
        const double high = row.step_band_s->high_s / row.best.step_time_s;
        row.days_band = Range{row.days * low, row.days * high};
        if (row.cost) row.cost_band = Range{*row.cost * low, *row.cost * high};
        if (row.energy_mwh) row.energy_band = Range{*row.energy_mwh * low, *row.energy_mwh * high};
      }
      row.headroom_bytes = row.best.headroom_bytes;
      if (row.finishes) {
        if (set.deadline_days) row.deadline = verdict_of(row.days, row.days_band, *set.deadline_days);
        if (set.budget && row.cost) row.budget = verdict_of(*row.cost, row.cost_band, *set.budget);
        finishing.push_back(i);
      } else {
        if (set.deadline_days) row.deadline = Verdict::misses;
        if (set.budget) row.budget = Verdict::misses;
      }
    }
    rep.rows.push_back(row);
  }

  auto cost_of = [&](std::size_t i) { return rep.rows[i].cost.value_or(0.0); };
  rep.by_days = finishing;
  std::stable_sort(rep.by_days.begin(), rep.by_days.end(), [&](std::size_t a, std::size_t b) {
    if (rep.rows[a].days != rep.rows[b].days) return rep.rows[a].days < rep.rows[b].days;
    return cost_of(a) < cost_of(b);
  });
  for (std::size_t k = 0; k < rep.by_days.size(); ++k) rep.rows[rep.by_days[k]].rank_days = static_cast<int>(k + 1);
  if (rep.priced) {
    rep.by_cost = finishing;
    std::stable_sort(rep.by_cost.begin(), rep.by_cost.end(), [&](std::size_t a, std::size_t b) {
      if (cost_of(a) != cost_of(b)) return cost_of(a) < cost_of(b);
      return rep.rows[a].days < rep.rows[b].days;
    });
    for (std::size_t k = 0; k < rep.by_cost.size(); ++k) rep.rows[rep.by_cost[k]].rank_cost = static_cast<int>(k + 1);
  }

  // Pareto front over (days, cost); by days alone without prices (cost 0 for all).
  std::vector<std::pair<double, double>> points;
  for (const std::size_t i : rep.by_days) points.emplace_back(rep.rows[i].days, cost_of(i));
  const std::vector<bool> front = pareto_front(points);
  for (std::size_t k = 0; k < rep.by_days.size(); ++k) {
    if (front[k]) {
      rep.rows[rep.by_days[k]].pareto = true;
      rep.pareto.push_back(rep.by_days[k]);
    }
  }

  for (const std::size_t i : rep.priced ? rep.by_cost : rep.by_days) {
    const Row& r = rep.rows[i];
    const Verdict d = r.deadline.value_or(Verdict::meets);
    const Verdict b = r.budget.value_or(Verdict::meets);
    if (d == Verdict::meets && b == Verdict::meets) {
      rep.meeting.push_back(i);
    } else if (d != Verdict::misses && b != Verdict::misses) {
      rep.at_risk.push_back(i);
    }
  }
  return rep;
}

}  // namespace tetra::plan
