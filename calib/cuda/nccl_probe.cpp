// NCCL collective sweeps timed as nccl-tests times them (`NVIDIA/nccl-tests: src/common.cu`,
// `src/timer.cc`):
// warm-up, then `iters` back-to-back operations under a host steady clock, divided by
// `iters`, averaged over processes. Groups are laid out as training lays them out: inside a
// node (consecutive ranks, as TP), across nodes one GPU per node (rail aligned, as DP), and
// the whole job.
//
// Forced variants. NCCL reads NCCL_ALGO and NCCL_PROTO when a communicator is initialised:
// `ncclTopoTuneModel` (NVIDIA/nccl: src/graph/tuning.cc, run from `initTransportsRank` in
// src/init.cc for ncclCommInitAll, ncclCommInitRank and ncclCommSplit alike) calls
// ncclGetEnv("NCCL_PROTO") / ncclGetEnv("NCCL_ALGO") and fills the communicator's enabled
// (algorithm, protocol) table from them; ncclGetEnv reads the process environment at call
// time (src/misc/param.cc: getenv after merging nccl.conf once; since 2.28 through the
// environment plugin, src/plugin/env.cc, whose built-in one does the same; an external
// NCCL_ENV_PLUGIN might not, which this code cannot detect). So the probe sets both variables with
// setenv around the init of a variant's communicators and restores them right after; every
// later call on those communicators keeps the forced table. An (algorithm, protocol) pair the
// machine cannot run leaves no entry enabled, and NCCL fails the enqueue with "no
// algorithm/protocol available" (ncclInvalidUsage while NCCL_ALGO/NCCL_PROTO are set,
// ncclInternalError otherwise: src/graph/tuning.cc or src/enqueue.cc depending on the
// version); a name NCCL does not know fails the init (parseList). Both count as unsupported.
// The check uses ncclGroupSimulateEnd (NCCL >= 2.22.3), which selects the algorithm without
// launching anything, so no process is left waiting on a peer that never launched.
// Point-to-point ops (send_recv, all_to_all) have no algorithm; whether NCCL_PROTO reaches
// them depends on the NCCL version (they pick LL below NCCL_P2P_LL_THRESHOLD, else Simple).
#include "nccl_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include <nccl.h>

#include "check.hpp"

namespace tetra::calib::gpu {
namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail(what, ncclGetErrorString(r));
}

/// True for the results with which NCCL rejects a forced variant (init or enqueue); other
/// errors still end the run.
bool rejects_variant(ncclResult_t r) {
  return r == ncclInvalidUsage || r == ncclInvalidArgument || r == ncclInternalError;
}

/// Elements per rank for ops whose size S is the whole gathered / scattered buffer:
/// S / 2 bytes / n ranks, rounded down to 8 bf16 elements (16 bytes, nccl-tests' rounding).
std::size_t per_rank_count(double bytes, int ranks) {
  const auto c = static_cast<std::size_t>(bytes / 2.0 / ranks);
  return c / 8 * 8;
}

/// Sets one environment variable for its lifetime and restores the previous state after; an
/// empty value leaves the variable as it is.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (value.empty()) return;
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    set_ = ::setenv(name, value.c_str(), 1) == 0;
    if (!set_) fail("setenv", name);
  }
  ~ScopedEnv() {
    if (!set_) return;
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
  bool set_ = false;
};

/// Destroys a set of communicators made together: finalised in one group first, as NCCL asks
/// for several communicators driven by one thread (ncclCommFinalize, NCCL >= 2.14).
void destroy_comms(const std::vector<ncclComm_t>& comms, ncclComm_t keep = nullptr) {
  ncclGroupStart();
  for (auto c : comms) {
    if (c != nullptr && c != keep) ncclCommFinalize(c);
  }
  ncclGroupEnd();
  for (auto c : comms) {
    if (c != nullptr && c != keep) ncclCommDestroy(c);
  }
}

/// Drops communicators NCCL failed with, without waiting on peers.
void abort_comms(const std::vector<ncclComm_t>& comms) {
  for (auto c : comms) {
    if (c != nullptr) ncclCommAbort(c);
  }
}

}  // namespace

struct NcclProbe::Impl {
  struct Participant {
    int device = 0;
    cudaStream_t stream = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
  };
  /// The communicators of one forced variant over one group shape.
  struct Forced {
    std::size_t shape = 0;
    CollectiveVariant variant;
    std::vector<ncclComm_t> comms;  // empty: NCCL rejected the variant at init
  };
  using VariantKey = std::tuple<std::size_t, std::string, CollectiveVariant>;  // shape, op, variant

  const World& world;
  int warmup = 5;
  int iters = 20;
  std::vector<Participant> parts;
  std::vector<GroupShape> shapes;
  std::vector<std::vector<ncclComm_t>> comms;  // per shape, one communicator per participant
  std::vector<int> colors;                     // per shape, this process's ncclCommSplit colour (MPI)
  ncclComm_t world_comm = nullptr;
  std::optional<Forced> forced;  // one forced set alive at a time bounds device memory
  std::set<VariantKey> rejected;

  explicit Impl(const World& w) : world(w) {}

  void add_shape(GroupShape g, std::vector<ncclComm_t> c, int color = 0) {
    shapes.push_back(g);
    comms.push_back(std::move(c));
    colors.push_back(color);
  }

  [[nodiscard]] std::size_t shape_index(const GroupShape& group) const {
    std::size_t idx = 0;
    while (idx < shapes.size() && !(shapes[idx] == group)) ++idx;
    if (idx == shapes.size()) fail("NCCL", "no communicator for this group shape");
    return idx;
  }

  void release_forced(bool failed) {
    if (!forced) return;
    if (failed) {
      abort_comms(forced->comms);
    } else {
      destroy_comms(forced->comms);
    }
    forced.reset();
  }

  /// The communicators of `variant` over shape `idx`, made on first use with NCCL_ALGO /
  /// NCCL_PROTO set (and restored) around the init; nullptr when NCCL rejects the variant on
  /// any process.
  const std::vector<ncclComm_t>* forced_comms(std::size_t idx, const CollectiveVariant& variant) {
    if (forced && forced->shape == idx && forced->variant == variant) {
      return forced->comms.empty() ? nullptr : &forced->comms;
    }
    release_forced(false);
    Forced f;
    f.shape = idx;
    f.variant = variant;
    std::vector<ncclComm_t> made(parts.size(), nullptr);
    ncclResult_t r = ncclSuccess;
    {
      const ScopedEnv algo("NCCL_ALGO", nccl_algo_name(variant.algorithm));
      const ScopedEnv proto("NCCL_PROTO", nccl_proto_name(variant.protocol));
      if (!world.distributed()) {
        // Cliques of g consecutive GPUs, as the NCCL's-choice communicators of this shape.
        const int g = shapes[idx].ranks;
        const int devices = static_cast<int>(parts.size());
        for (int first = 0; first + g <= devices && r == ncclSuccess; first += g) {
          std::vector<int> list;
          for (int d = first; d < first + g; ++d) list.push_back(parts[static_cast<std::size_t>(d)].device);
          r = ncclCommInitAll(&made[static_cast<std::size_t>(first)], g, list.data());
          // A failed init leaves its handles undefined: forget them rather than touch them.
          if (r != ncclSuccess) std::fill_n(made.begin() + first, g, nullptr);
        }
      } else {
        r = ncclCommSplit(world_comm, colors[idx], world.rank(), &made[0], nullptr);
        if (r != ncclSuccess) made[0] = nullptr;
      }
    }
    if (r != ncclSuccess && !rejects_variant(r)) {
      abort_comms(made);
      fail("NCCL communicator for " + describe(variant), ncclGetErrorString(r));
    }
    if (world.all(r == ncclSuccess)) {
      f.comms = std::move(made);
    } else {
      abort_comms(made);
    }
    forced = std::move(f);
    return forced->comms.empty() ? nullptr : &forced->comms;
  }

  /// Enqueues `op` once on every participant's communicator in one group, ending it with
  /// ncclGroupSimulateEnd when `simulate` (nothing launches). Returns the first NCCL error;
  /// the group is always closed.
  ncclResult_t launch_all(const std::vector<ncclComm_t>& cs, const std::string& op, int n, double bytes,
                          bool simulate) {
    const std::size_t per_rank = per_rank_count(bytes, n);
    const auto full = static_cast<std::size_t>(bytes / 2.0);
    ncclResult_t first = ncclGroupStart();
    if (first != ncclSuccess) return first;
    auto keep = [&first](ncclResult_t r) {
      if (first == ncclSuccess) first = r;
      return first == ncclSuccess;
    };
    for (std::size_t i = 0; i < parts.size() && first == ncclSuccess; ++i) {
      const auto& p = parts[i];
      ncclComm_t c = cs[i];
      if (c == nullptr) continue;
      auto* send = static_cast<char*>(p.send);
      auto* recv = static_cast<char*>(p.recv);
      if (op == "all_reduce") {
        keep(ncclAllReduce(send, recv, full, ncclBfloat16, ncclSum, c, p.stream));
      } else if (op == "all_gather") {
        keep(ncclAllGather(send, recv, per_rank, ncclBfloat16, c, p.stream));
      } else if (op == "reduce_scatter") {
        keep(ncclReduceScatter(send, recv, per_rank, ncclBfloat16, ncclSum, c, p.stream));
      } else if (op == "all_to_all") {
        for (int peer = 0; peer < n && first == ncclSuccess; ++peer) {
          const std::size_t off = static_cast<std::size_t>(peer) * per_rank * 2;
          if (keep(ncclSend(send + off, per_rank, ncclBfloat16, peer, c, p.stream))) {
            keep(ncclRecv(recv + off, per_rank, ncclBfloat16, peer, c, p.stream));
          }
        }
      } else if (op == "send_recv") {
        int me = 0;
        if (keep(ncclCommUserRank(c, &me))) {
          const int peer = (me + 1) % n;
          const int from = (me + n - 1) % n;
          if (keep(ncclSend(send, full, ncclBfloat16, peer, c, p.stream))) {
            keep(ncclRecv(recv, full, ncclBfloat16, from, c, p.stream));
          }
        }
      } else {
        ncclGroupEnd();
        fail("NCCL", "unknown op '" + op + "'");
      }
    }
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 3)
    if (simulate) {
      ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
      keep(ncclGroupSimulateEnd(&info));
      return first;
    }
#else
    (void)simulate;
#endif
    keep(ncclGroupEnd());
    return first;
  }

  void sync_all() {
    for (const auto& p : parts) {
      check_cuda(cudaSetDevice(p.device), "cudaSetDevice");
      check_cuda(cudaStreamSynchronize(p.stream), "cudaStreamSynchronize");
    }
  }

  /// nccl-tests timing of `op` on `cs`, seconds per operation averaged over processes.
  double time_on(const std::vector<ncclComm_t>& cs, const std::string& op, int n, double bytes) {
    for (int i = 0; i < warmup; ++i) check_nccl(launch_all(cs, op, n, bytes, false), "NCCL collective");
    sync_all();
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) check_nccl(launch_all(cs, op, n, bytes, false), "NCCL collective");
    sync_all();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return world.mean(elapsed / iters);
  }
};

namespace {

/// False for sizes the op cannot run (the sweep skips them; rows need 16 bytes per rank).
bool measurable(const std::string& op, int ranks, double bytes) {
  const std::size_t per_rank = per_rank_count(bytes, ranks);
  const auto full = static_cast<std::size_t>(bytes / 2.0);
  if ((op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") && per_rank == 0) return false;
  return full > 0;
}

}  // namespace

NcclProbe::NcclProbe(const World& world, double max_bytes, int warmup, int iters)
    : impl_(std::make_unique<Impl>(world)) {
  auto& im = *impl_;
  im.warmup = warmup;
  im.iters = iters;
  int devices = 0;
  check_cuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
  const auto bytes = static_cast<std::size_t>(max_bytes) + 4096;
  auto make_part = [&](int dev) {
    Impl::Participant p;
    p.device = dev;
    check_cuda(cudaSetDevice(dev), "cudaSetDevice");
    check_cuda(cudaStreamCreateWithFlags(&p.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaMalloc(&p.send, bytes), "cudaMalloc (NCCL send buffer)");
    check_cuda(cudaMalloc(&p.recv, bytes), "cudaMalloc (NCCL receive buffer)");
    check_cuda(cudaMemset(p.send, 0, bytes), "cudaMemset");
    return p;
  };
  if (!world.distributed()) {
    // One process, every GPU of the node: cliques of g consecutive GPUs for g = 2, 4, 8, ...
    for (int d = 0; d < devices; ++d) im.parts.push_back(make_part(d));
    for (int g = 2; g <= devices; g *= 2) {
      if (devices % g != 0) continue;
      std::vector<ncclComm_t> c(static_cast<std::size_t>(devices));
      for (int first = 0; first < devices; first += g) {
        std::vector<int> list;
        for (int d = first; d < first + g; ++d) list.push_back(d);
        check_nccl(ncclCommInitAll(&c[static_cast<std::size_t>(first)], g, list.data()), "ncclCommInitAll");
      }
      im.add_shape(GroupShape{g, g}, std::move(c));
    }
    return;
  }
  // One GPU per process; the NCCL unique id travels over MPI.
  im.parts.push_back(make_part(world.local_rank() % devices));
  ncclUniqueId id{};
  if (world.rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  world.broadcast(&id, static_cast<int>(sizeof id));
  check_nccl(ncclCommInitRank(&im.world_comm, world.size(), id, world.rank()), "ncclCommInitRank");
  auto split = [&](int color, GroupShape shape) {
    ncclComm_t c = nullptr;
    check_nccl(ncclCommSplit(im.world_comm, color, world.rank(), &c, nullptr), "ncclCommSplit");
    im.add_shape(shape, {c}, color);
  };
  const int ppn = world.local_size();
  const int nodes = world.nodes();
  const int node = world.rank() / ppn;
  for (int g = 2; g <= ppn; g *= 2) {
    if (ppn % g == 0) split(world.rank() / g, GroupShape{g, g});  // inside a node (TP-like)
  }
  if (nodes > 1) {
    if (nodes % 2 == 0) split(world.local_rank() + ppn * (node / 2), GroupShape{2, 1});  // rail pair
    if (nodes > 2) split(world.local_rank(), GroupShape{nodes, 1});  // one GPU per node (DP-like)
    im.add_shape(GroupShape{world.size(), ppn}, {im.world_comm}, 0);  // the whole job
  }
}

NcclProbe::~NcclProbe() {
  impl_->release_forced(false);
  for (auto& cs : impl_->comms) {
    for (auto c : cs) {
      if (c != nullptr && c != impl_->world_comm) ncclCommDestroy(c);
    }
  }
  if (impl_->world_comm != nullptr) ncclCommDestroy(impl_->world_comm);
  for (auto& p : impl_->parts) {
    cudaSetDevice(p.device);
    cudaFree(p.send);
    cudaFree(p.recv);
    cudaStreamDestroy(p.stream);
  }
}

std::vector<GroupShape> NcclProbe::groups() const { return impl_->shapes; }

std::string NcclProbe::version() {
  int v = 0;
  ncclGetVersion(&v);  // major * 10000 + minor * 100 + patch (NCCL >= 2.9)
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." + std::to_string(v % 100);
}

double NcclProbe::seconds(const std::string& op, const GroupShape& group, double bytes) {
  auto& im = *impl_;
  const std::size_t idx = im.shape_index(group);
  if (!measurable(op, group.ranks, bytes)) return 0;
  return im.time_on(im.comms[idx], op, group.ranks, bytes);
}

double NcclProbe::variant_seconds(const std::string& op, const GroupShape& group, double bytes,
                                  const CollectiveVariant& variant) {
  if (variant.is_default()) return seconds(op, group, bytes);
  auto& im = *impl_;
  const std::size_t idx = im.shape_index(group);
  // A name without an NCCL spelling would silently run NCCL's choice under a wrong label.
  if ((!variant.algorithm.empty() && nccl_algo_name(variant.algorithm).empty()) ||
      (!variant.protocol.empty() && nccl_proto_name(variant.protocol).empty())) {
    return variant_unsupported;
  }
  if (!measurable(op, group.ranks, bytes)) return 0;
  const Impl::VariantKey key{idx, op, variant};
  if (im.rejected.count(key) > 0) return variant_unsupported;
  const std::vector<ncclComm_t>* cs = im.forced_comms(idx, variant);
  bool ok = cs != nullptr;
  if (ok) {
    // Algorithm selection without launching (or, before NCCL 2.22.3, one real launch).
    const ncclResult_t r = im.launch_all(*cs, op, group.ranks, bytes, true);
    if (r != ncclSuccess && !rejects_variant(r)) fail("NCCL " + op + " " + describe(variant), ncclGetErrorString(r));
    ok = r == ncclSuccess;
  }
  if (!im.world.all(ok)) {  // every process takes the same decision
    im.rejected.insert(key);
    im.release_forced(cs != nullptr);
    return variant_unsupported;
  }
  return im.time_on(*cs, op, group.ranks, bytes);
}

}  // namespace tetra::calib::gpu
