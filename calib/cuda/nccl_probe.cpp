// NCCL collective sweeps timed as nccl-tests times them (reference/costmodels.md section 2.2):
// warm-up, then `iters` back-to-back operations under a host steady clock, divided by
// `iters`, averaged over processes. Groups are laid out as training lays them out: inside a
// node (consecutive ranks, as TP), across nodes one GPU per node (rail aligned, as DP), and
// the whole job.
#include "nccl_probe.hpp"

#include <chrono>
#include <string>

#include <nccl.h>

#include "check.hpp"

namespace tetra::calib::gpu {
namespace {

void check_nccl(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail(what, ncclGetErrorString(r));
}

/// Elements per rank for ops whose size S is the whole gathered / scattered buffer:
/// S / 2 bytes / n ranks, rounded down to 8 bf16 elements (16 bytes, nccl-tests' rounding).
std::size_t per_rank_count(double bytes, int ranks) {
  const auto c = static_cast<std::size_t>(bytes / 2.0 / ranks);
  return c / 8 * 8;
}

}  // namespace

struct NcclProbe::Impl {
  struct Participant {
    int device = 0;
    cudaStream_t stream = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
  };
  const World& world;
  int warmup = 5;
  int iters = 20;
  std::vector<Participant> parts;
  std::vector<GroupShape> shapes;
  std::vector<std::vector<ncclComm_t>> comms;  // per shape, one communicator per participant
  ncclComm_t world_comm = nullptr;

  explicit Impl(const World& w) : world(w) {}

  void add_shape(GroupShape g, std::vector<ncclComm_t> c) {
    shapes.push_back(g);
    comms.push_back(std::move(c));
  }
};

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
    im.add_shape(shape, {c});
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
    im.add_shape(GroupShape{world.size(), ppn}, {im.world_comm});    // the whole job
  }
}

NcclProbe::~NcclProbe() {
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
  std::size_t idx = 0;
  while (idx < im.shapes.size() && !(im.shapes[idx] == group)) ++idx;
  if (idx == im.shapes.size()) fail("NCCL", "no communicator for this group shape");
  const auto& comms = im.comms[idx];
  const int n = group.ranks;
  const std::size_t per_rank = per_rank_count(bytes, n);
  const auto full = static_cast<std::size_t>(bytes / 2.0);
  if ((op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") && per_rank == 0) return 0;
  if (full == 0) return 0;
  auto launch_all = [&] {
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t i = 0; i < im.parts.size(); ++i) {
      const auto& p = im.parts[i];
      ncclComm_t c = comms[i];
      if (c == nullptr) continue;
      auto* send = static_cast<char*>(p.send);
      auto* recv = static_cast<char*>(p.recv);
      if (op == "all_reduce") {
        check_nccl(ncclAllReduce(send, recv, full, ncclBfloat16, ncclSum, c, p.stream), "ncclAllReduce");
      } else if (op == "all_gather") {
        check_nccl(ncclAllGather(send, recv, per_rank, ncclBfloat16, c, p.stream), "ncclAllGather");
      } else if (op == "reduce_scatter") {
        check_nccl(ncclReduceScatter(send, recv, per_rank, ncclBfloat16, ncclSum, c, p.stream), "ncclReduceScatter");
      } else if (op == "all_to_all") {
        for (int peer = 0; peer < n; ++peer) {
          const std::size_t off = static_cast<std::size_t>(peer) * per_rank * 2;
          check_nccl(ncclSend(send + off, per_rank, ncclBfloat16, peer, c, p.stream), "ncclSend");
          check_nccl(ncclRecv(recv + off, per_rank, ncclBfloat16, peer, c, p.stream), "ncclRecv");
        }
      } else if (op == "send_recv") {
        int me = 0;
        check_nccl(ncclCommUserRank(c, &me), "ncclCommUserRank");
        const int peer = (me + 1) % n;
        const int from = (me + n - 1) % n;
        check_nccl(ncclSend(send, full, ncclBfloat16, peer, c, p.stream), "ncclSend");
        check_nccl(ncclRecv(recv, full, ncclBfloat16, from, c, p.stream), "ncclRecv");
      } else {
        fail("NCCL", "unknown op '" + op + "'");
      }
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  };
  auto sync_all = [&] {
    for (const auto& p : im.parts) {
      check_cuda(cudaSetDevice(p.device), "cudaSetDevice");
      check_cuda(cudaStreamSynchronize(p.stream), "cudaStreamSynchronize");
    }
  };
  for (int i = 0; i < im.warmup; ++i) launch_all();
  sync_all();
  im.world.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < im.iters; ++i) launch_all();
  sync_all();
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return im.world.mean(elapsed / im.iters);
}

}  // namespace tetra::calib::gpu
