// run_calibration on a GPU node: device query, kernel sweeps timed by CUPTI on one GPU,
// NCCL sweeps over every group shape of the job, rows and versions into the profile.
#include "tetra/calib/runner.hpp"

#include <ctime>
#include <memory>
#include <string>

#include <cuda_runtime.h>

#include "benches.hpp"
#include "check.hpp"
#include "cupti_recorder.hpp"
#include "nccl_probe.hpp"
#include "tetra/calib/sweep.hpp"
#include "world.hpp"

namespace tetra::calib {
namespace {

/// KernelTimer on the current device: CUPTI kernel spans, median of the timed runs.
class CudaKernelTimer final : public KernelTimer {
 public:
  CudaKernelTimer(int warmup, int iters, double max_memory_bytes) : warmup_(warmup), iters_(iters) {
    gpu::check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    recorder_ = std::make_unique<gpu::CuptiRecorder>();
    gemm_ = std::make_unique<gpu::GemmRunner>(stream_);
    memory_ = std::make_unique<gpu::MemoryRunner>(max_memory_bytes, stream_);
    if (gpu::AttentionRunner::available()) attention_ = std::make_unique<gpu::AttentionRunner>(stream_);
  }
  ~CudaKernelTimer() override {
    attention_.reset();
    memory_.reset();
    gemm_.reset();
    recorder_.reset();
    cudaStreamDestroy(stream_);
  }
  CudaKernelTimer(const CudaKernelTimer&) = delete;
  CudaKernelTimer& operator=(const CudaKernelTimer&) = delete;

  double gemm_seconds(const GemmShape& s) override {
    gemm_->setup(s.m, s.n, s.k);
    return time([this] { gemm_->launch(); });
  }
  double attention_seconds(costmodel::AttentionRow& shape) override {
    if (!attention_) gpu::fail("attention", "this build has no cuDNN; time attention with --import-trace instead");
    attention_->setup(shape);
    shape.causal = attention_->timed_causal();  // what was timed, masked or full attention
    return time([this] { attention_->launch(); });
  }
  double memory_bound_seconds(const std::string& kernel, double bytes) override {
    memory_->setup(kernel, bytes);
    return time([this] { memory_->launch(); });
  }
  [[nodiscard]] std::size_t dropped() const { return recorder_->dropped(); }

 private:
  double time(const std::function<void()>& call) {
    const double t = median(recorder_->time_runs(call, warmup_, iters_));
    if (!(t > 0)) gpu::fail("CUPTI", "a timed call reported no duration");
    return t;
  }

  int warmup_, iters_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<gpu::CuptiRecorder> recorder_;
  std::unique_ptr<gpu::GemmRunner> gemm_;
  std::unique_ptr<gpu::MemoryRunner> memory_;
  std::unique_ptr<gpu::AttentionRunner> attention_;
};

std::string version_string(int v) {  // CUDA encodes 13000 as 13.0
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string utc_date() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

int run_calibration(const CalibrationOptions& options, costmodel::Profile& out) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess) {
    throw UserError(std::string("calibrate: no CUDA device found (cudaGetDeviceCount: ") + cudaGetErrorString(err) +
                    ")");
  }
  if (devices == 0) throw UserError("calibrate: no CUDA device found (cudaGetDeviceCount: 0 devices)");

  gpu::World world;
  const bool root = world.rank() == 0;
  auto note = [&](const std::string& s) {
    if (root && options.progress) options.progress(s);
  };
  const int device = world.local_rank() % devices;
  gpu::check_cuda(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  gpu::check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);

  auto& m = out.meta;
  m.gpu = prop.name;
  m.sms = prop.multiProcessorCount;
  m.device_memory_bytes = static_cast<double>(prop.totalGlobalMem);
  m.l2_bytes = static_cast<double>(prop.l2CacheSize);
  m.driver = version_string(driver);
  m.cuda = version_string(runtime);
  m.cublas = gpu::GemmRunner::version();
  m.cudnn = gpu::AttentionRunner::version();
  m.nccl = gpu::NcclProbe::version();
  m.date = utc_date();
  m.source = "calibrate";
  m.hosts = world.distributed() ? world.nodes() : 1;
  m.gpus_per_node = world.distributed() ? world.local_size() : devices;
  note("device: " + m.gpu + ", " + std::to_string(m.sms) + " SMs, " + std::to_string(devices) + " GPUs visible, " +
       std::to_string(world.size()) + " process(es)");

  PlanOptions plan_options;
  plan_options.quick = options.quick;
  const SweepPlan plan = make_plan(plan_options);
  const int warmup = options.quick ? std::min(options.warmup, 2) : options.warmup;
  const int iters = options.quick ? std::min(options.iters, 10) : options.iters;

  // Kernels on one GPU (rank 0); the others wait at the barrier below.
  if (root && (options.gemm || options.attention || options.memory)) {
    double max_mem = 0;
    for (const auto& r : plan.memory_bound) max_mem = std::max(max_mem, r.bytes);
    CudaKernelTimer timer(warmup, iters, options.memory ? max_mem : 1 << 20);
    SweepSelection what;
    what.gemm = options.gemm;
    what.attention = options.attention;
    what.memory = options.memory;
    sweep_kernels(timer, plan, what, out, note);
    if (timer.dropped() > 0) note("CUPTI dropped " + std::to_string(timer.dropped()) + " records");
  }
  world.barrier();

  if (options.nccl) {
    if (devices < 2 && !world.distributed()) {
      note("collectives: skipped (one GPU and one process)");
    } else {
      double max_bytes = plan.collective_bytes.empty() ? 0 : plan.collective_bytes.back();
      gpu::NcclProbe probe(world, max_bytes, warmup, iters);
      CollectiveProbe& p = probe;
      if (root) {
        sweep_collectives(p, plan, out, note);
      } else {
        costmodel::Profile ignored;  // every rank takes part; rank 0 records
        sweep_collectives(p, plan, ignored);
      }
    }
  }
  world.barrier();
  return world.rank();
}

bool calibration_built_with_cuda() noexcept { return true; }

}  // namespace tetra::calib
