#pragma once
/// Collective times from the traces of several ranks of one run.
///
/// One rank's NCCL kernel starts when that rank launches it and ends when the data of every
/// rank has arrived, so its duration holds the wait for the ranks that came later: fitted, it
/// reads as latency. With the traces of the ranks of a step, each collective instance is timed
/// from its last arriving rank instead:
///   - the traces must be of one run: one world size (Kineto's `distributedInfo.world_size`),
///     distinct ranks (`distributedInfo.rank`, else the order the traces are given in), one GPU;
///   - the n-th NCCL kernel of one kind on each rank is one instance. The kind is what the
///     trace says of it: the collective's name (record_param_comms `Collective name`, else the
///     c10d op, else the kernel name), `Process Group Name` / `pg_id`, `Process Group Ranks`,
///     `Group size`, `dtype` and the message size `In msg nelems` / `Out msg nelems` (not for
///     all-to-all, whose splits differ by rank). Send / recv kernels pair two ranks, not a
///     group, and are left out;
///   - clocks are aligned by the ends of those instances: a collective ends on every rank
///     within microseconds (its last data lands everywhere at once), while starts differ by the
///     wait being removed. Each pair of n-th kernels of rank r and the reference (lowest) rank
///     overlaps for a range of clock offsets; the offset is taken inside the most ranges and set
///     to the median end difference of the pairs that overlap there, so kernels a trace lacks
///     (a sampled or cut trace) do not move it. A rank that shares no kind with the reference
///     is aligned through another aligned rank;
///   - after alignment, the kernels of one kind are paired in order, a pair only where the two
///     overlap (in order without gaps this is the n-th rule); an instance is a kernel of the
///     lowest rank holding the kind with a partner on every other trace holding it, and its time
///     is the earliest aligned end minus the latest aligned start. That is no longer than any
///     rank's own kernel; it is positive whenever the kernels truly are one instance.
/// The instances then become [[collective]] rows (median per size) for the bounded fit; the
/// other tables pool the samples of every rank.

#include <string>
#include <utility>
#include <vector>

#include "tetra/calib/trace_import.hpp"

namespace tetra::calib {

/// One collective instance matched across ranks.
struct MergedCollective {
  std::string op;                ///< profile op ("all_reduce", ...); "" when not modelled
  int ranks = 0;                 ///< group size; 0 when the trace does not say
  double bytes = 0;              ///< nccl-tests size (the largest of the ranks'); 0 unknown
  double seconds = 0;            ///< earliest aligned end - latest aligned start
  int last_rank = -1;            ///< the rank that arrived last
  std::vector<int> traced_ranks; ///< the ranks whose kernels make the instance, ascending
  std::vector<double> own_seconds;  ///< each of those ranks' own kernel duration, same order
  double end_spread_s = 0;       ///< latest - earliest aligned end
  double end_us = 0;             ///< earliest aligned end on the reference rank's clock (trace us)
};

/// One trace of the merge.
struct RankTrace {
  std::string path;
  int rank = -1;
  bool rank_from_trace = false;  ///< distributedInfo.rank, else the position given
  double clock_offset_us = 0;    ///< its clock minus the reference rank's, as aligned
  int nccl_kernels = 0;          ///< NCCL kernels it holds
};

/// How the traces were merged.
struct RankMerge {
  std::vector<RankTrace> traces;          ///< by rank; traces[0] is the clock reference
  int world_size = 0;                     ///< 0 when no trace names one
  std::vector<MergedCollective> instances;  ///< by end_us
  int instances_with_rows = 0;            ///< of those, the ones with op, group and message size
  int instances_whole_group = 0;          ///< of those, traced on every rank of their group
  double median_end_spread_s = 0;         ///< over the instances: how well the ends align
  std::string gpu_trace;                  ///< path of the trace whose GPU name `import` carries
};

struct MergedTraceImport {
  TraceImport import;  ///< the pooled rows; collective rows from the instances
  RankMerge merge;
};

/// Reads the traces at `paths` (two or more; Kineto JSON, plain or gzip) and merges them as
/// above. Throws tetra::UserError "path: reason" (one line) for a trace that cannot be read,
/// is not of the same run as the first (world size, rank, GPU), holds no NCCL kernel, or
/// shares no collective with the other traces.
[[nodiscard]] MergedTraceImport import_rank_traces(const std::vector<std::string>& paths,
                                                   const TraceImportOptions& options = {});

/// The same on trace texts: (origin, text) pairs.
[[nodiscard]] MergedTraceImport import_rank_trace_texts(const std::vector<std::pair<std::string, std::string>>& traces,
                                                        const TraceImportOptions& options = {});

}  // namespace tetra::calib
