// Layout enumeration and rule counting for `tetrasim search`.

#include "tetra/search/enumerate.hpp"

#include <algorithm>

#include "tetra/costmodel/collective.hpp"
#include "tetra/base/error.hpp"
#include "tetra/parallel/params.hpp"
#include "tetra/parallel/validate.hpp"

namespace tetra::search {

std::vector<int> pp_values(const SearchSpace& space, int layers) {
  if (!space.pp_divisors) return space.pp;
  std::vector<int> out;
  for (int d = 1; d <= layers; ++d) {
    // The divisors, and the powers of two that an uneven first / last stage split serves
    // (Megatron-Core `decoder_first_pipeline_num_layers` / `decoder_last_pipeline_num_layers`):
    // Llama 3.1 405B's 126 layers run on pp 8 and 16 that way (arXiv 2407.21783 section 3.3.2).
    const bool power_of_two = (d & (d - 1)) == 0;
    if (layers % d == 0 || (power_of_two && parallel::uneven_split(layers, d))) out.push_back(d);
  }
  return out;
}

std::string layout_key(const parallel::Layout& l) {
  // Fixed-width numbers so that the string order equals the numeric order.
  auto num = [](int v) {
    std::string s = std::to_string(v);
    return std::string(s.size() < 6 ? 6 - s.size() : 0, '0') + s;
  };
  std::string k;
  k.reserve(96);
  k += "tp=" + num(l.tp) + ",cp=" + num(l.cp) + ",pp=" + num(l.pp) + ",dp=" + num(l.dp) +
       ",vp=" + num(l.vp) + ",mbs=" + num(l.mbs) + ",sp=" + (l.sp ? "1" : "0") +
       ",recompute=" + std::to_string(static_cast<int>(l.recompute)) + ",ac=" + num(l.ac_freq) +
       ",replicas=" + num(l.dp_replicate) +
       ",schedule=" + std::to_string(static_cast<int>(l.schedule)) +
       ",first=" + num(l.first_stage_layers) + ",last=" + num(l.last_stage_layers) +
       ",order=" + l.rank_order;
  // Expert sizes only where they are not 1, so that dense keys keep their spelling.
  if (l.ep != 1 || l.etp != 1) k += ",ep=" + num(l.ep) + ",etp=" + num(l.etp);
  if (l.offload_layers > 0) k += ",offload=" + num(l.offload_layers);
  if (l.cp_comm != parallel::CpComm::p2p) k += ",cp_comm=" + std::to_string(static_cast<int>(l.cp_comm));
  if (l.cp_a2a != 1) k += ",cp_a2a=" + num(l.cp_a2a);
  return k;
}

namespace {

/// The all-to-all levels (Layout::cp_a2a) a2a_p2p tries at `cp`: every split of cp into two
/// levels of two or more ranks, or the base's where it names one for this cp (1 where cp has
/// none, which check_layout rejects).
std::vector<int> hierarchical_levels(int cp, const parallel::Layout& base) {
  if (base.cp_comm == parallel::CpComm::a2a_p2p && base.cp == cp && base.cp_a2a > 1) return {base.cp_a2a};
  std::vector<int> levels;
  for (int a = 2; a < cp; ++a) {
    if (cp % a == 0) levels.push_back(a);
  }
  if (levels.empty()) levels.push_back(1);
  return levels;
}

}  // namespace

Enumeration enumerate_layouts(const model::Model& model, long long world,
                              const parallel::Training& training, const SearchSpace& space,
                              const parallel::Layout& base, int nvlink_domain) {
  const std::vector<int> pps = pp_values(space, model.layers);
  auto require = [](bool nonempty, const char* key) {
    if (!nonempty) {
      throw UserError(SourceLocation{}, std::string("[search].") + key,
                      "the list is empty: give at least one value");
    }
  };
  require(!space.tp.empty(), "tp");
  require(!space.cp.empty(), "cp");
  require(!pps.empty(), "pp");
  require(!space.vp.empty(), "vp");
  require(!space.mbs.empty(), "mbs");
  require(!space.recompute.empty(), "recompute");
  require(!space.schedule.empty(), "schedule");
  require(!space.sp.empty(), "sp");
  require(!space.dp_replicate.empty(), "dp_replicate");
  require(!space.ac_freq.empty(), "ac_freq");
  require(!space.ep.empty(), "ep");
  require(!space.etp.empty(), "etp");
  const std::vector<int> one{1};
  const std::vector<int>& eps = model.is_moe() ? space.ep : one;
  const std::vector<int>& etps = model.is_moe() ? space.etp : one;
  // Bounded before anything is drawn: every candidate is checked one by one.
  const double candidates = static_cast<double>(space.tp.size()) * static_cast<double>(space.cp.size()) *
                            static_cast<double>(pps.size()) * static_cast<double>(space.vp.size()) *
                            static_cast<double>(space.mbs.size()) * static_cast<double>(space.recompute.size()) *
                            static_cast<double>(space.schedule.size()) * static_cast<double>(space.sp.size()) *
                            static_cast<double>(space.dp_replicate.size()) * static_cast<double>(space.ac_freq.size()) *
                            static_cast<double>(eps.size()) * static_cast<double>(etps.size()) *
                            static_cast<double>(std::max<std::size_t>(1, space.rank_order.size())) *
                            static_cast<double>(std::max<std::size_t>(1, space.cp_comm.size()));
  if (candidates > kMaxCandidates) {
    throw UserError(SourceLocation{}, "[search]",
                    "the lists span " + std::to_string(static_cast<long long>(candidates)) +
                        " candidates (the product of their lengths), more than " +
                        std::to_string(static_cast<long long>(kMaxCandidates)) + ": shorten them");
  }

  // sp values: as listed where tp > 1 (duplicates removed, order kept), sp = false at tp = 1.
  std::vector<bool> sp_multi;
  for (const bool v : space.sp) {
    if (std::find(sp_multi.begin(), sp_multi.end(), v) == sp_multi.end()) sp_multi.push_back(v);
  }
  const std::vector<bool> sp_single{false};

  Enumeration out;
  auto consider = [&](const parallel::Layout& l) {
    ++out.enumerated;
    auto issue = parallel::check_layout(model, world, training, l);
    if (!issue && nvlink_domain > 0) issue = costmodel::domain_issue(l, nvlink_domain);
    if (issue) {
      ++out.invalid;
      ++out.invalid_by_rule[issue->rule];
    } else {
      out.valid.push_back(l);
    }
  };
  // The knobs of one (tp, cp, pp, vp, mbs, recompute) cell: checkpoint frequency, HSDP
  // replicas, schedule and sp.
  const std::vector<int> one_ac_freq{parallel::Layout{}.ac_freq};
  const std::vector<std::string> orders =
      space.rank_order.empty() ? std::vector<std::string>{base.rank_order} : space.rank_order;
  auto cell = [&](parallel::Layout l, const std::vector<bool>& sps) {
    const bool per_layer = l.recompute == parallel::Recompute::selective_layer;
    for (const int ac_freq : per_layer ? space.ac_freq : one_ac_freq) {
      for (const int replicas : space.dp_replicate) {
        for (const parallel::Schedule sched : space.schedule) {
          for (const bool sp : sps) {
            for (const int ep : eps) {
              for (const int etp : etps) {
                for (const std::string& order : orders) {
                  l.ac_freq = ac_freq;
                  l.dp_replicate = replicas;
                  l.schedule = sched;
                  l.sp = sp;
                  l.ep = ep;
                  l.etp = etp;
                  l.rank_order = order;
                  consider(l);
                }
              }
            }
          }
        }
      }
    }
  };
  // Offloaded layer counts: the space's, else the base's.
  const std::vector<int> offloads =
      space.offload_layers.empty() ? std::vector<int>{base.offload_layers} : space.offload_layers;
  const std::vector<int> no_offload{0};
  // Context-parallel exchanges where cp > 1: the space's, else the base's; p2p at cp = 1, where
  // there is nothing to exchange.
  const std::vector<parallel::CpComm> cp_comms =
      space.cp_comm.empty() ? std::vector<parallel::CpComm>{base.cp_comm} : space.cp_comm;
  const std::vector<parallel::CpComm> no_exchange{parallel::CpComm::p2p};
  // Hierarchical CP's all-to-all levels per cp of the space; one level under the others.
  std::vector<std::vector<int>> hcp_levels;
  for (const int cp : space.cp) hcp_levels.push_back(hierarchical_levels(cp, base));
  const std::vector<int> one_level{1};
  parallel::Layout l = base;
  l.dp_shard = 0;  // derived from dp and dp_replicate
  for (const int tp : space.tp) {
    const std::vector<bool>& sps = tp > 1 ? sp_multi : sp_single;
    for (std::size_t ci = 0; ci < space.cp.size(); ++ci) {
      const int cp = space.cp[ci];
      for (const int pp : pps) {
        const long long cells = static_cast<long long>(tp) * cp * pp;
        const long long dp = cells > 0 && world % cells == 0 ? world / cells
                                                             : std::max(1LL, cells > 0 ? world / cells : 1LL);
        for (const int vp : space.vp) {
          const auto split = parallel::uneven_chunk_split(model.layers, pp, vp);
          for (const int mbs : space.mbs) {
            for (const parallel::Recompute rc : space.recompute) {
              l.tp = tp;
              l.cp = cp;
              l.pp = pp;
              l.dp = static_cast<int>(std::min<long long>(dp, 1LL << 30));
              l.vp = vp;
              l.mbs = mbs;
              l.recompute = rc;
              // The base's recompute modules belong to selective recompute, its offloaded
              // layers to a layout Megatron-Core can offload (no pipeline, no recompute).
              l.recompute_modules = rc == parallel::Recompute::selective ? base.recompute_modules
                                                                      : parallel::RecomputeModules{};
              // The base's own split at its pp and vp; elsewhere an uneven split where the
              // layers do not divide into pp·vp chunks and the split exists; otherwise the even
              // split is tried and "layers-divide" rejects what does not divide.
              const bool base_split = pp == base.pp && vp == base.vp &&
                                      (base.first_stage_layers > 0 || base.last_stage_layers > 0);
              l.first_stage_layers = base_split ? base.first_stage_layers : split ? split->first_stage_layers : 0;
              l.last_stage_layers = base_split ? base.last_stage_layers : split ? split->last_stage_layers : 0;
              // Offloading where Megatron-Core allows it; elsewhere the cell once, without.
              const bool can_offload = pp == 1 && rc == parallel::Recompute::none;
              for (const parallel::CpComm comm : cp > 1 ? cp_comms : no_exchange) {
                l.cp_comm = comm;
                for (const int a2a : comm == parallel::CpComm::a2a_p2p ? hcp_levels[ci] : one_level) {
                  l.cp_a2a = a2a;
                  for (const int off : can_offload ? offloads : no_offload) {
                    l.offload_layers = off;
                    cell(l, sps);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace tetra::search
