#pragma once
/// The rules a layout must satisfy for a model, a cluster size and a training set-up
/// (SPEC section 2 / DESIGN section 2). Shared by scenarios (which adds file positions) and
/// search (which counts how many candidates each rule rejects).

#include <optional>
#include <string>

#include "tetra/llama/layout.hpp"
#include "tetra/llama/model.hpp"

namespace tetra::llama {

/// A broken rule: the [layout]/[training] key to blame, and what was expected.
/// `rule` is a short stable name used in search summaries (e.g. "tp-divides-heads").
struct LayoutIssue {
  std::string key;
  std::string rule;
  std::string message;
};

/// The first rule the layout breaks, or nothing. `world` is the cluster's GPU count.
/// Checks: positive sizes; tp divides heads and kv_heads; dp*tp*cp*pp == world;
/// mbs*dp divides global_batch; seq_len divisible by 2*cp (cp > 1); sp needs tp > 1;
/// layers split into pp*vp chunks (or a valid uneven first/last split with vp == 1);
/// vp > 1 needs pp > 1 and the interleaved schedule, and interleaved needs vp > 1
/// and micro-batches divisible by pp; zb-h1 needs pp > 1 or runs as 1f1b; zero_stage in 0..3.
[[nodiscard]] std::optional<LayoutIssue> check_layout(const Model& model, long long world,
                                                      const Training& training,
                                                      const Layout& layout);

}  // namespace tetra::llama
