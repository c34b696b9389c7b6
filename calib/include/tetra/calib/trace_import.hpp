#pragma once
/// Kernel times from a trace of a real training run, so any kernel of that run can calibrate
/// the model: Chrome trace JSON as torch.profiler (Kineto) exports it, and the JSON that
/// Nsight Systems exports (`nsys export --type json`, one JSON object per line).
///
/// Kineto: GPU kernels are complete events (`"ph": "X"`) of category `kernel`, `ts`/`dur` in
/// microseconds; a kernel's `args["External id"]` names the CPU op (category `cpu_op`) that
/// launched it, whose `args["Input Dims"]` give the shapes. The importer turns
///   - GEMM kernels under aten::mm / addmm / matmul / linear / bmm into [[gemm]] rows,
///   - flash / cuDNN / fused attention kernels under scaled_dot_product / flash_attention ops
///     (inputs [b, heads, s, d] or [b, s, heads, d]) into [[attention]] rows,
///   - NCCL kernels whose op carries record_param_comms arguments (`Collective name`,
///     `In msg nelems`, `Out msg nelems`, `dtype`, `Group size`) into [[collective]] rows,
///   - device-to-device memcpy events (`gpu_memcpy` with `bytes`) and RMSNorm / SwiGLU / RoPE /
///     Adam / cross-entropy kernels whose op has input dims into [[memory_bound]] rows.
/// Repeated calls of one shape become one row with the median time, as `tetrasim calibrate`
/// stores its own runs (docs/calibration.md).
/// Nsight Systems: kernel records (`CudaEvent.kernel` with `startNs`/`endNs` and a string id
/// resolved through the export's string table) are counted and classified by name. When the run
/// was profiled with PyTorch's NVTX ranges (`torch.autograd.profiler.emit_nvtx(record_shapes=True)`),
/// each kernel is attributed, through the correlation id of its launch call
/// (`TraceProcessEvent`), to the innermost NVTX range (`NvtxEvent`) enclosing that call on the
/// launching thread; the range text ("aten::mm, seq = 1, op_id = 2, sizes = [[m, k], [k, n]]")
/// gives GEMM and attention shapes as Kineto's Input Dims do. NCCL kernels stay unused (no
/// element type or group size); without NVTX ranges no rows are produced.

#include <map>
#include <string>
#include <string_view>

#include "tetra/costmodel/profile.hpp"

namespace tetra::calib {

/// What an import found.
struct TraceImport {
  costmodel::Profile profile;            ///< rows (meta.source names the file)
  int kernels = 0;                       ///< GPU kernel events read
  int used = 0;                          ///< kernel events that became (part of) a row
  std::map<std::string, int> skipped;    ///< reason -> kernel events not used, sorted
};

/// Parses trace text (`origin` names it in errors). Throws tetra::UserError "origin: what was
/// wrong" (one line) when the text is not JSON or holds no trace events; never crashes on any
/// input.
[[nodiscard]] TraceImport import_trace_text(std::string_view text, const std::string& origin);

/// Reads and parses a trace file (plain JSON; a .gz file is refused with a hint).
[[nodiscard]] TraceImport import_trace(const std::string& path);

}  // namespace tetra::calib
