// Layout enumeration and rule counting for `tetrasim search`.

#include "tetra/search/enumerate.hpp"

#include <algorithm>

#include "tetra/hw/error.hpp"
#include "tetra/llama/validate.hpp"

namespace tetra::search {

std::optional<UnevenSplit> uneven_split(int layers, int pp) noexcept {
  if (pp < 2 || layers < pp || layers % pp == 0) return std::nullopt;
  if (pp == 2) {
    // No middle ranks: the two ends share every layer, the first the smaller half.
    return UnevenSplit{layers / 2, layers - layers / 2};
  }
  // Middle ranks hold k = ceil(L/pp); the ends share L − (pp−2)·k ≤ 2k.
  const int k = (layers + pp - 1) / pp;
  const long long rest = static_cast<long long>(layers) - static_cast<long long>(pp - 2) * k;
  if (rest < 2) return std::nullopt;
  const int first = static_cast<int>(rest / 2);
  return UnevenSplit{first, static_cast<int>(rest) - first};
}

std::vector<int> pp_values(const SearchSpace& space, int layers) {
  if (!space.pp_divisors) return space.pp;
  std::vector<int> out;
  for (int d = 1; d <= layers; ++d) {
    if (layers % d == 0) out.push_back(d);
  }
  return out;
}

std::string layout_key(const llama::Layout& l) {
  // Fixed-width numbers so that the string order equals the numeric order.
  auto num = [](int v) {
    std::string s = std::to_string(v);
    return std::string(s.size() < 6 ? 6 - s.size() : 0, '0') + s;
  };
  std::string k;
  k.reserve(96);
  k += "tp=" + num(l.tp) + ",cp=" + num(l.cp) + ",pp=" + num(l.pp) + ",dp=" + num(l.dp) +
       ",vp=" + num(l.vp) + ",mbs=" + num(l.mbs) + ",sp=" + (l.sp ? "1" : "0") +
       ",recompute=" + std::to_string(static_cast<int>(l.recompute)) +
       ",schedule=" + std::to_string(static_cast<int>(l.schedule)) +
       ",first=" + num(l.first_stage_layers) + ",last=" + num(l.last_stage_layers) +
       ",order=" + l.rank_order;
  return k;
}

Enumeration enumerate_layouts(const llama::Model& model, long long world,
                              const llama::Training& training, const SearchSpace& space,
                              const llama::Layout& base) {
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

  // sp values: as listed where tp > 1 (duplicates removed, order kept), sp = false at tp = 1.
  std::vector<bool> sp_multi;
  for (const bool v : space.sp) {
    if (std::find(sp_multi.begin(), sp_multi.end(), v) == sp_multi.end()) sp_multi.push_back(v);
  }
  const std::vector<bool> sp_single{false};

  Enumeration out;
  llama::Layout l = base;
  for (const int tp : space.tp) {
    const std::vector<bool>& sps = tp > 1 ? sp_multi : sp_single;
    for (const int cp : space.cp) {
      for (const int pp : pps) {
        const long long cells = static_cast<long long>(tp) * cp * pp;
        const long long dp = cells > 0 && world % cells == 0 ? world / cells
                                                             : std::max(1LL, cells > 0 ? world / cells : 1LL);
        const auto split = uneven_split(model.layers, pp);
        for (const int vp : space.vp) {
          for (const int mbs : space.mbs) {
            for (const llama::Recompute rc : space.recompute) {
              for (const llama::Schedule sched : space.schedule) {
                for (const bool sp : sps) {
                  l.tp = tp;
                  l.cp = cp;
                  l.pp = pp;
                  l.dp = static_cast<int>(std::min<long long>(dp, 1LL << 30));
                  l.vp = vp;
                  l.mbs = mbs;
                  l.sp = sp;
                  l.recompute = rc;
                  l.schedule = sched;
                  // An uneven split only where the layers do not divide and vp = 1; otherwise
                  // the even split is tried and "layers-divide" rejects what does not divide.
                  l.first_stage_layers = split && vp == 1 ? split->first_stage_layers : 0;
                  l.last_stage_layers = split && vp == 1 ? split->last_stage_layers : 0;
                  ++out.enumerated;
                  if (const auto issue = llama::check_layout(model, world, training, l)) {
                    ++out.invalid;
                    ++out.invalid_by_rule[issue->rule];
                  } else {
                    out.valid.push_back(l);
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
