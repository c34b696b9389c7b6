#pragma once
/// The compact layout spelling that search and plan print, and its reading by --layout.

#include <optional>
#include <string>
#include <string_view>

#include "tetra/parallel/layout.hpp"

namespace tetra::scenarios {

/// How the CP ranks exchange, as the tables print it after cp: "" for the ring (and at cp 1),
/// the cp_comm_type otherwise ("a2a"), hierarchical CP with its two levels ("a2a2+p2p4").
[[nodiscard]] std::string cp_exchange(const parallel::Layout& layout);

/// "tp8 cp1 pp16(7/7) dp2 vp2 mbs1 ep8 full 1f1b fp8-delayed compiled": the first / last
/// stage layers of an uneven split in parentheses after pp, HSDP's shard x replicas after dp,
/// cp_exchange after cp in parentheses ("cp4(a2a)", "cp8(a2a2+p2p4)"),
/// "no-sp" where tp > 1 runs without sequence parallelism, and only what is not the default
/// of vp, ep, etp, recompute, offloading, precision and compile.
[[nodiscard]] std::string compact_layout(const parallel::Layout& layout, const parallel::Fp8Training& fp8,
                                         bool compile);

/// A compact layout as --layout key=value pairs: the [layout] keys (sp spelled out: on where
/// tp > 1 unless "no-sp") and the [training] keys it names (precision, fp8_recipe, compile).
struct CompactLayoutKeys {
  std::string layout;
  std::string training;
};

/// The keys of a compact layout; nothing when `text` holds '=' (already key=value pairs).
/// Throws UserError naming --layout and the word it cannot read.
[[nodiscard]] std::optional<CompactLayoutKeys> expand_compact_layout(std::string_view text);

}  // namespace tetra::scenarios
