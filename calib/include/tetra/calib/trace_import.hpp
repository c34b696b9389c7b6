#pragma once
/// Kernel times from a trace of a real training run, so any kernel of that run can calibrate
/// the model: Chrome trace JSON as torch.profiler (Kineto) exports it, and the JSON that
/// Nsight Systems exports (`nsys export --type json`, one JSON object per line).
///
/// Kineto: GPU kernels are complete events (`"ph": "X"`) of category `kernel`, `ts`/`dur` in
/// microseconds. A kernel is linked to the CPU op (category `cpu_op`) that launched it by its
/// `args["External id"]` where that names an op enclosing the launch; otherwise (Kineto before
/// PyTorch 2.0 wrote the correlation id there) through its `correlation` id to the launch call
/// (`cuda_runtime` / `cuda_driver` event with the same correlation) and from there to the
/// innermost op whose [ts, ts + dur] encloses the launch on the launching thread, the rule of
/// HolisticTraceAnalysis's call stacks (`hta/common/call_stack.py`, `trace_parser.py`). The op
/// decides the kernel's class before the kernel's name does (a cuBLAS split-K reduction under
/// aten::mm is part of that GEMM; an fbgemm or convolution kernel named "gemm" is not one), and
/// its `Input Dims` / `Input type` give shapes and dtype. The importer turns
///   - the kernels of one aten::mm / addmm / matmul / linear / _scaled_mm call into a [[gemm]] row
///     with the dtype of its A operand (aten::bmm / baddbmm are batched and skipped: the GEMM
///     table has no batch column),
///   - flash / cuDNN / fused attention kernels under scaled_dot_product / flash_attention ops
///     (inputs [b, heads, s, d] or [b, s, heads, d]) into [[attention]] rows,
///   - NCCL kernels whose op carries record_param_comms arguments (`Collective name`,
///     `In msg nelems`, `Out msg nelems`, `dtype`, `Group size`) into [[collective]] rows; where
///     those arguments are missing (Kineto of PyTorch 1.x), the c10d op above the kernel names
///     the collective, and `c10d::_allgather_base_` / `_reduce_scatter_base_` give its sizes
///     from their output and input dims (the group size is their ratio),
///   - device-to-device memcpy events (`gpu_memcpy` with `bytes`) and RMSNorm / SwiGLU / RoPE /
///     Adam / cross-entropy kernels whose op has input dims into [[memory_bound]] rows.
/// Repeated calls of one shape become one row with the median time, as `tetrasim calibrate`
/// stores its own runs (docs/calibration.md).
/// Nsight Systems: kernel records (`CudaEvent.kernel` with `startNs`/`endNs` and a string id
/// resolved through the export's string table), plain or gzip-compressed. When the run was
/// profiled with PyTorch's NVTX ranges (`torch.autograd.profiler.emit_nvtx(record_shapes=True)`),
/// each kernel is attributed, through the correlation id of its launch call
/// (`TraceProcessEvent`), to the innermost NVTX range (`NvtxEvent`) enclosing that call on the
/// launching thread. That range is the kernel's op, and it decides as a Kineto op does: the
/// range text ("aten::mm, seq = 1, op_id = 2, sizes = [[m, k], [k, n]]") gives the shapes; it
/// carries no types, so GEMM, RMSNorm and residual-add rows are taken as bf16 (`assumed_bf16`
/// counts them) and copies, which may cast, are left out. NCCL kernels stay unused (no element
/// type or group size); without NVTX ranges no rows are produced.

#include <cstddef>
#include <map>
#include <string>
#include <string_view>

#include "tetra/costmodel/profile.hpp"

namespace tetra::calib {

/// What an import found.
struct TraceImport {
  costmodel::Profile profile;            ///< rows (meta.source names the file, meta.gpu the device)
  int kernels = 0;                       ///< GPU kernel events read
  int used = 0;                          ///< kernel events that became (part of) a row
  std::map<std::string, int> skipped;    ///< reason -> kernel events not used, sorted
  int linked_by_external_id = 0;         ///< kernels linked to their op by External id
  int linked_by_time = 0;                ///< kernels linked to the op enclosing their launch
  int gemm_kernels = 0;                  ///< GEMM kernels (by their op, else by name)
  int gemm_kernels_used = 0;             ///< of those, the ones in a [[gemm]] row
  int assumed_bf16 = 0;                  ///< kernels used whose op (an NVTX range) carries no types: bf16
  int rank = -1;                         ///< Kineto's distributedInfo.rank; -1 when it names none
  int world_size = 0;                    ///< distributedInfo.world_size; 0 when it names none
  int devices = 0;                       ///< GPUs the process saw (deviceProperties entries)
  /// Ranks per node the [[collective]] rows were made with (TraceImportOptions::ranks_per_node,
  /// else `devices` when above 1); 0: each group is taken to be on one node.
  int ranks_per_node = 0;
  std::string ranks_per_node_from;       ///< "--ranks-per-node", "deviceProperties" or ""
};

/// Limits of the reader.
struct TraceImportOptions {
  /// Largest trace accepted, compressed or not, in bytes (a gzip stream is decompressed only up
  /// to this; its header's size field is never trusted).
  std::size_t max_bytes = std::size_t{2} << 30;
  /// Ranks per node of the traced job; 0: from the trace. Kineto's deviceProperties lists the
  /// GPUs the process saw: more than one is taken as the node's GPUs (torchrun leaves every GPU
  /// of the node visible), one says nothing (a launcher that binds one GPU per process) and each
  /// group is then taken to be on one node. A row's ranks per node is the most members of its
  /// group on one node (from `Process Group Ranks`, node-major placement), else
  /// min(ranks per node, group size).
  int ranks_per_node = 0;
};

/// Parses trace text, plain or gzip-compressed (`origin` names it in errors). Throws
/// tetra::UserError "origin: what was wrong" (one line) when the text is not JSON, not a valid
/// gzip stream, larger than the limit or holds no kernel events; never crashes on any input.
[[nodiscard]] TraceImport import_trace_text(std::string_view text, const std::string& origin,
                                            const TraceImportOptions& options = {});

/// Reads and parses a trace file (.json, or .json.gz as torch.profiler's TensorBoard handler
/// writes it; gzip is recognised by its magic bytes, whatever the name).
[[nodiscard]] TraceImport import_trace(const std::string& path, const TraceImportOptions& options = {});

/// Decompresses a gzip stream (concatenated members too) of at most `max_bytes` output.
/// Throws tetra::UserError "origin: ..." when it is not gzip, is truncated or corrupt, or
/// inflates beyond the limit.
[[nodiscard]] std::string gunzip_bounded(std::string_view data, const std::string& origin, std::size_t max_bytes);

}  // namespace tetra::calib
