// Memory pruning, parallel simulation and ranking for `tetrasim search` (search/README.md).

#include "tetra/search/search.hpp"

#include <algorithm>
#include <limits>
#include <optional>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/base/error.hpp"
#include "tetra/search/parallel.hpp"
#include "tetra/sim/layer_cache.hpp"
#include "tetra/sim/simulator.hpp"

namespace tetra::search {

bool ranks_before(const RankedLayout& a, const RankedLayout& b) {
  if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
  // At equal speed, fewer offloaded layers: their host copies overlap compute in the step
  // time, but they still load the host link and the CPU's memory.
  if (a.layout.offload_layers != b.layout.offload_layers) return a.layout.offload_layers < b.layout.offload_layers;
  if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
  if (const std::string ka = layout_key(a.layout), kb = layout_key(b.layout); ka != kb) return ka < kb;
  if (a.fp8.recipe != b.fp8.recipe) return a.fp8.recipe < b.fp8.recipe;
  if (a.fp8.param_gather != b.fp8.param_gather) return a.fp8.param_gather > b.fp8.param_gather;
  if (a.grad_dtype != b.grad_dtype) return a.grad_dtype < b.grad_dtype;
  return a.compile < b.compile;
}

namespace {

/// Each training of `in` once per listed value, set by `apply`; an empty list keeps `in`. A
/// value `apply` refuses (returns false for) does not apply to that training, which is kept
/// once as it is.
template <class Value, class Apply>
std::vector<parallel::Training> vary(const std::vector<parallel::Training>& in, const std::vector<Value>& values,
                                  Apply apply) {
  if (values.empty()) return in;
  std::vector<parallel::Training> out;
  for (const parallel::Training& t : in) {
    for (const Value& v : values) {
      parallel::Training c = t;
      if (!apply(c, v)) {
        out.push_back(t);
        break;
      }
      out.push_back(c);
    }
  }
  return out;
}

/// The trainings the space asks for: the scenario's own, or one per listed precision, compile
/// setting, FP8 parameter gather and gradient dtype.
std::vector<parallel::Training> training_variants(const parallel::Training& training,
                                               const SearchSpace& space) {
  std::vector<parallel::Training> out{training};
  out = vary(out, space.precision, [](parallel::Training& t, parallel::Fp8Recipe r) {
    t.fp8.recipe = r;
    if (r == parallel::Fp8Recipe::none) t.fp8.param_gather = false;
    return true;
  });
  out = vary(out, space.compile, [](parallel::Training& t, bool compile) {
    t.torch.compile = compile;
    // Async TP needs compile (check_torch_native): it goes with it.
    if (!compile) t.torch.async_tp = false;
    return true;
  });
  // FP8 parameter gather on the FP8 variants only.
  out = vary(out, space.fp8_param_gather, [](parallel::Training& t, bool gather) {
    t.fp8.param_gather = gather;
    return t.fp8.enabled();
  });
  return vary(out, space.grad_dtype, [](parallel::Training& t, parallel::Precision p) {
    t.grad_dtype = p;
    return true;
  });
}

/// Steps 1 and 2 of the search for one training variant: the valid layouts, their
/// analytical peaks, and the indices of those within the memory budget; counts added to `sum`.
struct Candidates {
  Enumeration en;
  std::vector<double> estimate;        ///< analytical peak of each valid layout
  std::vector<std::size_t> survivors;  ///< indices into en.valid within the budget
};

Candidates enumerate_and_prune(const SearchInput& in, const parallel::Training& training, int threads,
                               SearchSummary& sum) {
  const model::Model& model = *in.model;
  const hw::Cluster& cluster = *in.cluster;
  const SearchSpace& space = *in.space;
  Candidates out;

  // 1. Enumerate and check the rules.
  out.en = enumerate_layouts(model, cluster.total_gpus(), training, space, in.base,
                             cluster.nvlink_domain());
  Enumeration& en = out.en;
  sum.enumerated += en.enumerated;
  sum.invalid += en.invalid;
  for (const auto& [rule, n] : en.invalid_by_rule) sum.invalid_by_rule[rule] += n;
  sum.valid += en.valid.size();

  // 2. Analytical memory peak (schedule-rule in-flight counts), pruned against the budget.
  costmodel::MemoryOptions mem_options;
  mem_options.memory_fraction = space.memory_fraction;
  const std::size_t n_valid = en.valid.size();
  out.estimate.assign(n_valid, 0.0);
  parallel_for(
      n_valid, threads,
      [&](int, std::size_t i) {
        const costmodel::MemoryReport rep =
            costmodel::estimate_memory(model, cluster, training, en.valid[i], mem_options);
        out.estimate[i] = rep.peak_bytes;
      },
      nullptr);
  sum.capacity_bytes = cluster.gpu.memory_bytes;
  sum.budget_bytes = sum.capacity_bytes * space.memory_fraction;
  out.survivors.reserve(n_valid);
  for (std::size_t i = 0; i < n_valid; ++i) {
    if (out.estimate[i] <= sum.budget_bytes) {
      out.survivors.push_back(i);
    } else {
      ++sum.pruned_by_memory;
    }
  }
  return out;
}

/// The ranked row of one simulated layout.
RankedLayout ranked(const parallel::Layout& layout, const parallel::Training& training, const sim::Result& r,
                    double estimate) {
  RankedLayout rl;
  rl.layout = layout;
  rl.fp8 = training.fp8;
  rl.compile = training.torch.compile;
  rl.grad_dtype = training.grad_dtype;
  rl.step_time_s = r.step_time_s;
  rl.tokens_per_s = r.tokens_per_s;
  rl.tflops_per_gpu = r.tflops_per_gpu;
  rl.mfu = r.mfu;
  rl.bubble_fraction = r.bubble_fraction;
  rl.peak_bytes = r.peak_bytes;
  rl.estimate_peak_bytes = estimate;
  rl.headroom_bytes = r.memory.headroom_bytes;
  rl.micro_batches = r.micro_batches;
  return rl;
}

/// Steps 1-4 of the search for one training variant, added to `out`.
void search_training(const SearchInput& in, const parallel::Training& training,
                      const SearchOptions& options, SearchResult& out) {
  const model::Model& model = *in.model;
  const hw::Cluster& cluster = *in.cluster;
  const SearchSpace& space = *in.space;
  const int threads = resolve_threads(options.threads);
  SearchSummary& sum = out.summary;
  const Candidates cand = enumerate_and_prune(in, training, threads, sum);
  const auto& survivors = cand.survivors;

  // 3. Simulate the survivors: one Simulator per worker, results by index.
  costmodel::CostParams costs = costmodel::cost_params(cluster, in.profile);
  costmodel::apply_factors(in.factors, costs);
  std::vector<sim::Simulator> sims(static_cast<std::size_t>(threads));
  std::vector<RankedLayout> simulated(survivors.size());
  sim::LayerCache layer_cache;  // one per search: model, training, cluster and params fixed
  sim::SimOptions sim_options;
  sim_options.memory_fraction = space.memory_fraction;
  sim_options.layer_cache = options.share_layer_tables ? &layer_cache : nullptr;
  parallel_for(
      survivors.size(), threads,
      [&](int worker, std::size_t k) {
        const parallel::Layout& layout = cand.en.valid[survivors[k]];
        const sim::Result r = sims[static_cast<std::size_t>(worker)].run(
            sim::sim_input(model, cluster, training, layout, costs), sim_options);
        simulated[k] = ranked(layout, training, r, cand.estimate[survivors[k]]);
      },
      options.progress);
  sum.simulated += survivors.size();
  sum.layer_shapes += layer_cache.size();

  // 4. Keep what fits the budget at the simulated in-flight counts.
  for (auto& rl : simulated) {
    if (rl.peak_bytes <= sum.budget_bytes) {
      out.layouts.push_back(std::move(rl));
    } else {
      ++sum.over_budget_simulated;
    }
  }
}

/// One layout that may be simulated by find_best.
struct Bounded {
  std::size_t precision = 0;  ///< index into the precision variants
  std::size_t valid = 0;      ///< index into that variant's valid layouts
  bool extrapolated = false;  ///< more micro-batches than a replay: the bound needs a replay
  double tokens_bound = 0;    ///< tokens / lower bound (not extrapolated): no simulation can exceed it
  double order = 0;           ///< sort key: tokens_bound, or an estimate for extrapolated ones
};

/// find_best's outcome for one layout of a wave.
struct WaveItem {
  bool simulated = false;
  RankedLayout row;
};

}  // namespace

BestResult find_best(const SearchInput& in, const SearchOptions& options) {
  const model::Model& model = *in.model;
  const hw::Cluster& cluster = *in.cluster;
  const SearchSpace& space = *in.space;
  const int threads = resolve_threads(options.threads);
  BestResult out;
  SearchSummary& sum = out.summary;
  const std::vector<parallel::Training> trainings = training_variants(*in.training, space);
  std::vector<Candidates> cands;
  cands.reserve(trainings.size());
  for (const parallel::Training& t : trainings) cands.push_back(enumerate_and_prune(in, t, threads, sum));

  costmodel::CostParams costs = costmodel::cost_params(cluster, in.profile);
  costmodel::apply_factors(in.factors, costs);
  std::vector<sim::Simulator> sims(static_cast<std::size_t>(threads));
  // One layer cache per training variant (its contract: one training per cache).
  std::vector<sim::LayerCache> caches(trainings.size());
  auto options_of = [&](std::size_t pr) {
    sim::SimOptions o;
    o.memory_fraction = space.memory_fraction;
    o.layer_cache = options.share_layer_tables ? &caches[pr] : nullptr;
    return o;
  };
  auto input_of = [&](const Bounded& b) {
    return sim::sim_input(model, cluster, trainings[b.precision], cands[b.precision].en.valid[b.valid], costs);
  };

  // Lower bound of every survivor replayed in full (one layer replay per new shape, then
  // arithmetic); extrapolated steps are ordered by Simulator::step_estimate, and their bound
  // waits for their turn in a wave (it costs a replay).
  std::vector<Bounded> all;
  for (std::size_t pr = 0; pr < cands.size(); ++pr) {
    for (const std::size_t i : cands[pr].survivors) {
      Bounded b{pr, i, false, 0.0, 0.0};
      b.extrapolated = parallel::micro_batches(cands[pr].en.valid[i], trainings[pr]) > sim::kMaxSimulatedMicroBatches;
      all.push_back(b);
    }
  }
  const double tokens = static_cast<double>(in.training->global_batch) * in.training->seq_len;
  parallel_for(
      all.size(), threads,
      [&](int worker, std::size_t k) {
        Bounded& b = all[k];
        sim::Simulator& sim = sims[static_cast<std::size_t>(worker)];
        if (b.extrapolated) {
          b.tokens_bound = std::numeric_limits<double>::infinity();
          const double est = sim.step_estimate(input_of(b), options_of(b.precision));
          b.order = est > 0 ? tokens / est : std::numeric_limits<double>::infinity();
        } else {
          const double lb = sim.step_lower_bound(input_of(b), options_of(b.precision));
          b.tokens_bound = b.order = lb > 0 ? tokens / lb : std::numeric_limits<double>::infinity();
        }
      },
      nullptr);
  // Most promising first; ties in enumeration order (deterministic).
  std::stable_sort(all.begin(), all.end(), [](const Bounded& a, const Bounded& b) { return a.order > b.order; });

  // Branch and bound in waves of a fixed size, so that the layouts simulated (and the counts
  // reported) do not depend on the thread count. A wave takes the next kBestWave layouts that
  // may still rank first against the best ranked layout at the wave's start: a layout whose
  // bound is known and below it is skipped, and since the known bounds fall along the list
  // the first such layout ends the search for all of them; an extrapolated layout first gets
  // its bound (a replay), then is simulated only if that bound can still beat or tie.
  std::optional<RankedLayout> best;
  bool bounded_done = false;  // every remaining non-extrapolated layout is below `best`
  std::size_t next = 0;
  std::vector<std::size_t> wave;
  std::vector<WaveItem> wave_out;
  while (next < all.size()) {
    wave.clear();
    for (; next < all.size() && wave.size() < kBestWave; ++next) {
      const Bounded& b = all[next];
      if (!b.extrapolated) {
        if (bounded_done) continue;
        if (best && b.tokens_bound < best->tokens_per_s) {
          bounded_done = true;
          continue;
        }
      }
      wave.push_back(next);
    }
    if (wave.empty()) break;
    const double beat = best ? best->tokens_per_s : -1.0;
    wave_out.assign(wave.size(), WaveItem{});
    parallel_for(
        wave.size(), threads,
        [&](int worker, std::size_t k) {
          const Bounded& b = all[wave[k]];
          sim::Simulator& sim = sims[static_cast<std::size_t>(worker)];
          const sim::SimInput input = input_of(b);
          const sim::SimOptions so = options_of(b.precision);
          if (b.extrapolated) {
            // Its bound needs a replay unless the cheap one already rules it out; a replay is
            // kept for run().
            const double enough = beat > 0 ? tokens / beat : std::numeric_limits<double>::infinity();
            const double lb = sim.step_lower_bound(input, so, enough);
            if (lb > 0 && tokens / lb < beat) return;
          }
          const sim::Result r = sim.run(input, so);
          wave_out[k].simulated = true;
          wave_out[k].row = ranked(input.layout, trainings[b.precision], r, cands[b.precision].estimate[b.valid]);
        },
        nullptr);
    for (WaveItem& w : wave_out) {
      if (!w.simulated) continue;
      ++sum.simulated;
      if (w.row.peak_bytes > sum.budget_bytes) {
        ++sum.over_budget_simulated;
        continue;
      }
      ++sum.feasible;
      if (!best || ranks_before(w.row, *best)) best = std::move(w.row);
    }
  }
  out.skipped_by_bound = all.size() - sum.simulated;
  for (const auto& c : caches) sum.layer_shapes += c.size();
  out.best = std::move(best);
  return out;
}

SearchResult run_search(const SearchInput& in, const SearchOptions& options) {
  SearchResult out;
  for (const parallel::Training& t : training_variants(*in.training, *in.space)) {
    search_training(in, t, options, out);
  }
  std::sort(out.layouts.begin(), out.layouts.end(), ranks_before);
  out.summary.feasible = out.layouts.size();
  return out;
}

}  // namespace tetra::search
