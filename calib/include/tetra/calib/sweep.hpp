#pragma once
/// What a calibration run measures, and the measuring itself behind two interfaces
/// (so that everything but the GPU target builds and is tested without a GPU): `KernelTimer`
/// times one kernel call on the device and `CollectiveProbe` times one collective over a
/// process group. The GPU target implements them
/// with CUPTI, cuBLASLt, cuDNN, hand-written kernels and NCCL; the replay implementations here
/// answer from recorded tables, so the sweep logic is tested without a GPU.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tetra/costmodel/profile.hpp"

namespace tetra::calib {

/// An (M, N, K) GEMM shape, C[M,N] = A[M,K] B[K,N].
struct GemmShape {
  long long m = 0, n = 0, k = 0;
  auto operator<=>(const GemmShape&) const = default;
};

/// A process group shape a collective sweep runs over.
struct GroupShape {
  int ranks = 0;           ///< ranks in one group
  int ranks_per_node = 0;  ///< how many of them share a node
  auto operator<=>(const GroupShape&) const = default;
};

/// An (algorithm, protocol) pair a collective is forced to, in the profile's lowercase names
/// (costmodel::CollectiveRow: ring, tree, nvls, nvls_tree, collnet_direct, collnet_chain, pat;
/// ll, ll128, simple). An empty field leaves that choice to NCCL; {"", ""} is NCCL's own choice.
struct CollectiveVariant {
  std::string algorithm;
  std::string protocol;
  auto operator<=>(const CollectiveVariant&) const = default;
  /// True for {"", ""}, NCCL's own choice.
  [[nodiscard]] bool is_default() const { return algorithm.empty() && protocol.empty(); }
};

/// "ring/ll128", "ll" (protocol only), "nccl" for NCCL's own choice: for progress notes.
[[nodiscard]] std::string describe(const CollectiveVariant& variant);

/// NCCL's spelling of a profile algorithm name for NCCL_ALGO ("ring" -> "Ring", "nvls_tree" ->
/// "NVLSTree"), "" for "" and for a name NCCL does not know.
[[nodiscard]] std::string nccl_algo_name(const std::string& algorithm);
/// NCCL's spelling of a profile protocol name for NCCL_PROTO ("ll128" -> "LL128"), "" for ""
/// and for a name NCCL does not know.
[[nodiscard]] std::string nccl_proto_name(const std::string& protocol);

/// What to measure. Sizes are chosen by `make_plan`.
struct SweepPlan {
  std::vector<GemmShape> gemm;                         ///< sorted, unique
  std::vector<costmodel::AttentionRow> attention;      ///< seconds left 0
  std::vector<costmodel::MemoryBoundRow> memory_bound; ///< seconds left 0
  std::vector<std::string> collective_ops;             ///< nccl-tests names
  std::vector<double> collective_bytes;                ///< nccl-tests sizes, ascending
  /// Forced variants per op of `collective_ops`, the first always {"", ""} (NCCL's choice); an
  /// op without an entry is swept with NCCL's choice only.
  std::map<std::string, std::vector<CollectiveVariant>> collective_variants;
};

/// The variants `plan` sweeps `op` with: its entry of `collective_variants`, or {{"", ""}}.
[[nodiscard]] std::vector<CollectiveVariant> variants_of(const SweepPlan& plan, const std::string& op);

/// Knobs of `make_plan`.
struct PlanOptions {
  bool quick = false;                 ///< fewer shapes and sizes (--quick: under 2 minutes per node)
  std::vector<std::string> models = {"llama3.1-8b", "llama3.1-70b"};  ///< presets whose op lists give the shapes
  std::vector<int> tp = {1, 2, 4, 8};
  std::vector<int> seq_lens = {2048, 4096, 8192};  ///< tokens per micro-batch (mbs 1)
  double max_collective_bytes = 8.0 * 1024 * 1024 * 1024;  ///< 8 GiB
};

/// GEMM shapes of the layer and head op lists (ops::layer_ops / head_ops, forward, dgrad and
/// wgrad) of each model for each TP degree and sequence length, with sequence parallelism,
/// plus square shapes 1024..16384 for the achievable peak; attention calls of the same op
/// lists (causal, GQA heads per rank, forward and backward); memory-bound kernels over
/// sizes 1 MiB .. 1 GiB; collective sizes 8 B .. max by factors of 2 (quick: factors of 4, 8 B
/// .. 128 MiB). Collective variants: quick sweeps NCCL's choice only; the full plan adds, per
/// op, the algorithm x protocol pairs NCCL's tuning model admits for it (see sweep.cpp).
[[nodiscard]] SweepPlan make_plan(const PlanOptions& options);

/// Times one kernel call on one device (median of timed runs after warm-up), seconds.
/// Contract: returns > 0, or throws tetra::UserError when the shape cannot be measured (the
/// sweep then skips that shape). `attention_seconds` may change `shape.causal` to what it
/// actually timed.
class KernelTimer {
 public:
  virtual ~KernelTimer() = default;
  [[nodiscard]] virtual double gemm_seconds(const GemmShape& shape) = 0;
  [[nodiscard]] virtual double attention_seconds(costmodel::AttentionRow& shape) = 0;
  [[nodiscard]] virtual double memory_bound_seconds(const std::string& kernel, double bytes) = 0;
};

/// `CollectiveProbe::variant_seconds` result for a variant that cannot run over a group (NCCL
/// rejected it, or the recorded table has none of its rows).
inline constexpr double variant_unsupported = -1.0;

/// Times one collective of `bytes` (nccl-tests size) over groups of `group` shape, seconds per
/// operation as nccl-tests reports it (host-timed back-to-back average). Returns 0 when the
/// size cannot be run for that op (fewer than 16 bytes per rank), which the sweep skips.
class CollectiveProbe {
 public:
  virtual ~CollectiveProbe() = default;
  /// Group shapes this probe can run (inside a node, across nodes rail aligned, whole world).
  [[nodiscard]] virtual std::vector<GroupShape> groups() const = 0;
  /// Whether `op` can be measured over `group` (sweeps skip what is not).
  [[nodiscard]] virtual bool supports(const std::string& /*op*/, const GroupShape& /*group*/) const { return true; }
  /// NCCL's own choice of algorithm and protocol.
  [[nodiscard]] virtual double seconds(const std::string& op, const GroupShape& group, double bytes) = 0;
  /// The same with `variant` forced: seconds > 0; 0 when the size cannot be run (skipped);
  /// `variant_unsupported` (< 0) when the variant cannot run over `group` at all (the sweep
  /// skips its remaining sizes and notes it once). The default runs {"", ""} through
  /// `seconds` and reports every other variant unsupported.
  [[nodiscard]] virtual double variant_seconds(const std::string& op, const GroupShape& group, double bytes,
                                               const CollectiveVariant& variant) {
    return variant.is_default() ? seconds(op, group, bytes) : variant_unsupported;
  }
};

/// Replays the rows of a recorded profile: exact matches only (attention matched on every
/// field but seconds). Throws tetra::UserError naming the missing shape.
class ReplayKernelTimer final : public KernelTimer {
 public:
  explicit ReplayKernelTimer(costmodel::Profile recorded) : recorded_(std::move(recorded)) {}
  [[nodiscard]] double gemm_seconds(const GemmShape& shape) override;
  [[nodiscard]] double attention_seconds(costmodel::AttentionRow& shape) override;
  [[nodiscard]] double memory_bound_seconds(const std::string& kernel, double bytes) override;

 private:
  costmodel::Profile recorded_;
};

/// Replays recorded collective rows (exact op, group, size, algorithm and protocol).
class ReplayCollectiveProbe final : public CollectiveProbe {
 public:
  explicit ReplayCollectiveProbe(costmodel::Profile recorded) : recorded_(std::move(recorded)) {}
  [[nodiscard]] std::vector<GroupShape> groups() const override;
  /// True when any row of `op` over `group` was recorded.
  [[nodiscard]] bool supports(const std::string& op, const GroupShape& group) const override;
  /// The recorded NCCL's-choice row; throws tetra::UserError naming a missing one.
  [[nodiscard]] double seconds(const std::string& op, const GroupShape& group, double bytes) override;
  /// The recorded row of (op, group, bytes, variant); 0 when that size is absent;
  /// `variant_unsupported` when no row of (op, group, variant) was recorded at all.
  [[nodiscard]] double variant_seconds(const std::string& op, const GroupShape& group, double bytes,
                                       const CollectiveVariant& variant) override;

 private:
  costmodel::Profile recorded_;
};

/// Which tables a sweep fills.
struct SweepSelection {
  bool gemm = true, attention = true, memory = true, collectives = true;
};

/// Runs the kernel part of `plan` on `timer` and appends rows to `out`. `progress` (may be
/// empty) is called once per table with a one-line note, and once more for a table where
/// some shapes failed (they are skipped; the first error is quoted).
void sweep_kernels(KernelTimer& timer, const SweepPlan& plan, const SweepSelection& what, costmodel::Profile& out,
                   const std::function<void(const std::string&)>& progress = {});

/// Runs every (op, group, variant, size) of `plan` on `probe` and appends rows to `out`, with
/// the variant's algorithm and protocol on each row. A variant the probe reports unsupported
/// over a group is skipped (its remaining sizes are not tried) and noted once via `progress`.
void sweep_collectives(CollectiveProbe& probe, const SweepPlan& plan, costmodel::Profile& out,
                       const std::function<void(const std::string&)>& progress = {});

/// Median of `samples` (the mean of the middle two for even counts); 0 when empty.
[[nodiscard]] double median(std::vector<double> samples);

}  // namespace tetra::calib
