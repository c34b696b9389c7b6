// CUPTI Activity API recorder (CUDA 13 cupti_activity.h, docs.nvidia.com/cupti).
#include "cupti_recorder.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>

#include <cupti.h>

#include "check.hpp"

namespace tetra::calib::gpu {
namespace {

/// CUPTI's callbacks are plain C function pointers, so what they deliver lands in this
/// process-wide store (one recorder per process, as CUPTI allows one subscriber).
struct Store {
  std::mutex mu;
  std::vector<KernelRecord> kernels;
  std::map<std::uint32_t, std::uint64_t> external;  // CUDA API correlation id -> external id
  std::size_t dropped = 0;
};

Store& store() {
  static Store s;
  return s;
}

constexpr std::size_t kBufferBytes = 8u << 20;
constexpr std::size_t kAlign = 8;  // ACTIVITY_RECORD_ALIGNMENT

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t* buffer, size_t /*size*/,
                               size_t valid_size) {
  auto& s = store();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &rec) == CUPTI_SUCCESS) {
      if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
        if (k->start == 0 && k->end == 0) continue;  // no timing (CUPTI ran out of device memory)
        s.kernels.push_back(KernelRecord{k->name != nullptr ? k->name : "", k->start, k->end, k->correlationId,
                                         k->streamId});
      } else if (rec->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
        if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) s.external[e->correlationId] = e->externalId;
      }
    }
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS) s.dropped += dropped;
  }
  std::free(buffer);
}

void check_cupti(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  fail(what, msg != nullptr ? msg : "CUPTI error");
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME,
                                         CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};

}  // namespace

CuptiRecorder::CuptiRecorder() {
  check_cupti(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  for (auto kind : kKinds) check_cupti(cuptiActivityEnable(kind), "cuptiActivityEnable");
}

CuptiRecorder::~CuptiRecorder() {
  cudaDeviceSynchronize();
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (auto kind : kKinds) cuptiActivityDisable(kind);
}

std::vector<double> CuptiRecorder::time_runs(const std::function<void()>& call, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) call();
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check_cupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  auto& s = store();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.kernels.clear();
    s.external.clear();
  }
  // External ids 1..iters tag the timed runs.
  for (int i = 0; i < iters; ++i) {
    check_cupti(cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                                       static_cast<uint64_t>(i + 1)),
                "cuptiActivityPushExternalCorrelationId");
    call();
    uint64_t last = 0;
    check_cupti(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last),
                "cuptiActivityPopExternalCorrelationId");
  }
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  check_cupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  std::map<std::uint64_t, std::pair<std::uint64_t, std::uint64_t>> span;  // run -> (first start, last end)
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& k : s.kernels) {
      auto it = s.external.find(k.correlation);
      if (it == s.external.end()) continue;
      auto [pos, inserted] = span.try_emplace(it->second, k.start_ns, k.end_ns);
      if (!inserted) {
        pos->second.first = std::min(pos->second.first, k.start_ns);
        pos->second.second = std::max(pos->second.second, k.end_ns);
      }
    }
  }
  std::vector<double> out;
  for (const auto& [run, se] : span) out.push_back(static_cast<double>(se.second - se.first) * 1e-9);
  if (out.empty()) fail("CUPTI", "no kernel records for the timed runs");
  return out;
}

std::size_t CuptiRecorder::dropped() const {
  auto& s = store();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.dropped;
}

}  // namespace tetra::calib::gpu
