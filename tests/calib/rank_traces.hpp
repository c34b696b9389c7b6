#pragma once
// Two ranks' Kineto traces of one run with a known skew (test_import.cpp, test_cli.cpp).
//
// Six all-reduce instances of three sizes over ranks {0, 1}, timed as NCCL would run them:
// the transfer takes 20 us + bytes / 100 GB/s (bus factor 1 for two ranks) from the moment the
// last rank arrives, and every rank's kernel ends at once. Rank 1's clock reads 1000 us ahead
// of rank 0's. In each instance one rank waits (the "wait" column) for the other:
//
//   n  size (bf16)    transfer  last   end (rank 0 clock)  rank 0 ts / dur   rank 1 ts / dur
//   1  10 MB            120 us  1 (0 waits 300)    10000     9580 / 420      10880 / 120
//   2  40 MB            420 us  0 (1 waits 500)    20000    19580 / 420      20080 / 920
//   3  160 MB          1620 us  1 (0 waits 2000)   30000    26380 / 3620     29380 / 1620
//   4  10 MB            120 us  0 (1 waits 100)    40000    39880 / 120      40780 / 222 (*)
//   5  40 MB            420 us  1 (0 waits 800)    50000    48780 / 1220     50580 / 420
//   6  160 MB          1620 us  0 (1 waits 1200)   60000    58380 / 1620     58180 / 2820
//
// (*) rank 1's kernel of instance 4 ends 2 us after rank 0's (ends agree within microseconds,
// not exactly): the merged time takes the earliest end, 40000 - 39880 = 120 us.

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tetra::calib::testing {

/// What to write into one rank's synthetic trace.
struct RankTraceSpec {
  int rank = 0;
  int world_size = 2;
  std::string gpu = "NVIDIA H100 80GB HBM3";
  bool distributed_info = true;  ///< write distributedInfo (rank, world size)
  bool collectives = true;       ///< false: one elementwise kernel and no NCCL kernel
  std::vector<int> drop;         ///< instances (1-based) left out of the trace
  std::string group = "0";       ///< Process Group Name of the all-reduces
  int timing_of = -1;            ///< the column of the table its kernels take (-1: its rank's)
  double clock_shift_us = 0;     ///< added to every timestamp
};

/// The spec of rank `r` with every default.
inline RankTraceSpec rank_spec(int r) {
  RankTraceSpec s;
  s.rank = r;
  return s;
}

/// The table above: per instance, bf16 elements and each rank's (ts, dur) in microseconds.
struct RankInstance {
  long long nelems;
  double ts[2], dur[2];
};

inline const std::vector<RankInstance>& rank_instances() {
  static const std::vector<RankInstance> all = {
      {5000000, {9580, 10880}, {420, 120}},   {20000000, {19580, 20080}, {420, 920}},
      {80000000, {26380, 29380}, {3620, 1620}}, {5000000, {39880, 40780}, {120, 222}},
      {20000000, {48780, 50580}, {1220, 420}}, {80000000, {58380, 58180}, {1620, 2820}},
  };
  return all;
}

/// One rank's trace as torch.profiler writes it (record_param_comms arguments on the kernel).
inline std::string rank_trace_json(const RankTraceSpec& spec) {
  using nlohmann::json;
  json doc;
  doc["schemaVersion"] = 1;
  doc["deviceProperties"] =
      json::array({{{"id", 0}, {"name", spec.gpu}, {"numSms", 132}, {"totalGlobalMem", 85520809984LL}}});
  if (spec.distributed_info) {
    doc["distributedInfo"] = {{"backend", "nccl"}, {"rank", spec.rank}, {"world_size", spec.world_size}};
  }
  json events = json::array();
  const auto& all = rank_instances();
  for (std::size_t i = 0; i < all.size() && spec.collectives; ++i) {
    if (std::find(spec.drop.begin(), spec.drop.end(), static_cast<int>(i) + 1) != spec.drop.end()) continue;
    const auto& in = all[i];
    const int r = spec.timing_of >= 0 ? spec.timing_of : spec.rank == 1 ? 1 : 0;
    events.push_back({{"ph", "X"},
                      {"cat", "kernel"},
                      {"name", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"},
                      {"pid", 0},
                      {"tid", 7},
                      {"ts", in.ts[r] + spec.clock_shift_us},
                      {"dur", in.dur[r]},
                      {"args",
                       {{"device", spec.rank},
                        {"stream", 7},
                        {"Collective name", "allreduce"},
                        {"In msg nelems", in.nelems},
                        {"Out msg nelems", in.nelems},
                        {"Group size", 2},
                        {"dtype", "BFloat16"},
                        {"Process Group Name", spec.group},
                        {"Process Group Description", "default_pg"},
                        {"Process Group Ranks", "[0, 1]"}}}});
  }
  if (!spec.collectives) {
    events.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "elementwise_kernel"}, {"pid", 0}, {"tid", 7},
                      {"ts", 100.0}, {"dur", 5.0}, {"args", {{"device", spec.rank}, {"stream", 7}}}});
  }
  doc["traceEvents"] = events;
  return doc.dump();
}

}  // namespace tetra::calib::testing
