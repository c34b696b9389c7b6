// Memory pruning, parallel simulation and ranking for `tetrasim search` (DESIGN section 2).

#include "tetra/search/search.hpp"

#include <algorithm>

#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/hw/error.hpp"
#include "tetra/search/parallel.hpp"
#include "tetra/sim/layer_cache.hpp"
#include "tetra/sim/simulator.hpp"

namespace tetra::search {

bool ranks_before(const RankedLayout& a, const RankedLayout& b) {
  if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
  if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
  if (const std::string ka = layout_key(a.layout), kb = layout_key(b.layout); ka != kb) return ka < kb;
  if (a.fp8.recipe != b.fp8.recipe) return a.fp8.recipe < b.fp8.recipe;
  return a.compile < b.compile;
}

namespace {

/// The trainings the space asks for: the scenario's own, or one per listed precision and
/// compile setting.
std::vector<llama::Training> training_variants(const llama::Training& training,
                                               const SearchSpace& space) {
  std::vector<llama::Training> by_precision;
  if (space.precision.empty()) by_precision.push_back(training);
  for (const llama::Fp8Recipe r : space.precision) {
    llama::Training t = training;
    t.fp8.recipe = r;
    if (r == llama::Fp8Recipe::none) t.fp8.param_gather = false;
    by_precision.push_back(t);
  }
  if (space.compile.empty()) return by_precision;
  std::vector<llama::Training> out;
  for (const llama::Training& t : by_precision) {
    for (const bool compile : space.compile) {
      llama::Training c = t;
      c.torch.compile = compile;
      // Async TP needs compile (check_torch_native): it goes with it.
      if (!compile) c.torch.async_tp = false;
      out.push_back(c);
    }
  }
  return out;
}

/// Steps 1-4 of the search for one training variant, added to `out`.
void search_training(const SearchInput& in, const llama::Training& training,
                      const SearchOptions& options, SearchResult& out) {
  const llama::Model& model = *in.model;
  const hw::Cluster& cluster = *in.cluster;
  const SearchSpace& space = *in.space;
  const int threads = resolve_threads(options.threads);
  SearchSummary& sum = out.summary;

  // 1. Enumerate and check the rules.
  Enumeration en = enumerate_layouts(model, cluster.total_gpus(), training, space, in.base,
                                     cluster.nvlink_domain());
  sum.enumerated += en.enumerated;
  sum.invalid += en.invalid;
  for (const auto& [rule, n] : en.invalid_by_rule) sum.invalid_by_rule[rule] += n;
  sum.valid += en.valid.size();

  // 2. Analytical memory peak (schedule-rule in-flight counts), pruned against the budget.
  costmodel::MemoryOptions mem_options;
  mem_options.memory_fraction = space.memory_fraction;
  const std::size_t n_valid = en.valid.size();
  std::vector<double> estimate(n_valid, 0.0);
  parallel_for(
      n_valid, threads,
      [&](int, std::size_t i) {
        const costmodel::MemoryReport rep =
            costmodel::estimate_memory(model, cluster, training, en.valid[i], mem_options);
        estimate[i] = rep.peak_bytes;
      },
      nullptr);
  sum.capacity_bytes = cluster.gpu.memory_bytes;
  sum.budget_bytes = sum.capacity_bytes * space.memory_fraction;
  std::vector<std::size_t> survivors;
  survivors.reserve(n_valid);
  for (std::size_t i = 0; i < n_valid; ++i) {
    if (estimate[i] <= sum.budget_bytes) {
      survivors.push_back(i);
    } else {
      ++sum.pruned_by_memory;
    }
  }

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
        const llama::Layout& layout = en.valid[survivors[k]];
        const sim::Result r = sims[static_cast<std::size_t>(worker)].run(
            sim::sim_input(model, cluster, training, layout, costs), sim_options);
        RankedLayout& rl = simulated[k];
        rl.layout = layout;
        rl.fp8 = training.fp8;
        rl.compile = training.torch.compile;
        rl.step_time_s = r.step_time_s;
        rl.tokens_per_s = r.tokens_per_s;
        rl.tflops_per_gpu = r.tflops_per_gpu;
        rl.mfu = r.mfu;
        rl.bubble_fraction = r.bubble_fraction;
        rl.peak_bytes = r.peak_bytes;
        rl.estimate_peak_bytes = estimate[survivors[k]];
        rl.micro_batches = r.micro_batches;
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

}  // namespace

SearchResult run_search(const SearchInput& in, const SearchOptions& options) {
  SearchResult out;
  for (const llama::Training& t : training_variants(*in.training, *in.space)) {
    search_training(in, t, options, out);
  }
  std::sort(out.layouts.begin(), out.layouts.end(), ranks_before);
  out.summary.feasible = out.layouts.size();
  return out;
}

}  // namespace tetra::search
