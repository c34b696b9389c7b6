#pragma once
// Private to calib: what the Chrome / Kineto reader (trace_import.cpp) and the Nsight Systems
// reader (nsys_import.cpp) share: JSON field access, the op that launched a kernel, kernel
// classification and the per-shape accumulator that becomes profile rows.

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "tetra/calib/trace_import.hpp"

namespace tetra::calib::trace {

using nlohmann::json;

/// What a launching CPU op says about its kernels.
struct CpuOp {
  std::string name;
  std::vector<std::vector<long long>> dims;
  std::vector<std::string> types;  ///< every input's type (Kineto "Input type")
  json args;
  bool untyped = false;            ///< an NVTX range: sizes without types, taken as bf16
};

enum class KernelClass { gemm, attention_fwd, attention_bwd, nccl, memory, other };

struct Classified {
  KernelClass cls = KernelClass::other;
  std::string memory_kernel;  // for KernelClass::memory
};

/// Accumulates samples per row key and emits median rows.
struct Accumulator {
  std::map<std::tuple<long long, long long, long long, std::string>, std::vector<double>> gemm;  // m, n, k, dtype
  std::map<std::tuple<int, int, int, int, int, bool, int>, std::vector<double>> attention;
  std::map<std::pair<std::string, double>, std::vector<double>> memory;
  std::map<std::tuple<std::string, int, int, double>, std::vector<double>> collective;  // op, ranks, per node, bytes
};

/// One attention call: every kernel its op launched (cuDNN's backward is five: dO·O, the
/// bprop kernel, the dQ conversion and two head reductions), summed.
struct AttentionCall {
  std::tuple<int, int, int, int, int, bool, int> key;
  double seconds = 0;
};

/// The kernels one GEMM op instance launched. Each GEMM kernel starts a call; the kernels
/// after it that are not GEMMs themselves (cuBLAS's split-K reduction) belong to it.
struct GemmCall {
  long long m = 0, n = 0, k = 0;
  std::string dtype;
  struct Piece {
    double ts = 0;
    double seconds = 0;
    bool main = false;
  };
  std::vector<Piece> pieces;
};

/// Samples of one trace before rows are made: per row key, and the attention and GEMM calls,
/// whose kernels are summed per op instance first (add_calls).
struct OpSamples {
  Accumulator acc;
  std::map<std::size_t, AttentionCall> attention_calls;  // by op instance
  std::map<std::size_t, GemmCall> gemm_calls;            // by op instance
};

/// A kernel and the op that launched it, as either reader links them (Kineto: External id or
/// the op enclosing the launch; Nsight: the NVTX range enclosing the launch).
struct LinkedKernel {
  const std::string& name;
  double seconds;
  double start;             ///< orders the kernels of one GEMM call
  const CpuOp* op;          ///< nullptr: no op links it
  std::size_t op_instance;  ///< one id per op instance: its kernels form one call
};

/// One NCCL kernel as the merge of several ranks' traces (rank_merge.cpp) sees it.
struct CommKernel {
  std::string key;   ///< what must agree on two ranks for their kernels to be one instance
  std::string op;    ///< profile op ("all_reduce", ...); "" when not modelled
  bool p2p = false;  ///< send / recv: a pair of ranks, not a group
  int ranks = 0;     ///< group size; 0 unknown
  int ranks_per_node = 0;
  double bytes = 0;  ///< nccl-tests size on this rank; 0 unknown
  double start_us = 0, end_us = 0;
};

/// One rank's trace before rows are made: its samples and its NCCL kernels in trace order.
struct RankSamples {
  Accumulator acc;
  std::vector<CommKernel> comm;
};

json parse_quiet(std::string_view text);
std::string lower(std::string s);
bool has(const std::string& s, const char* part);
double as_number(const json& v);
double field(const json& obj, const char* key);
bool as_int64(const json& v, long long& out);
bool int_field(const json& obj, std::initializer_list<const char*> keys, long long& out);
std::string str_field(const json& obj, const char* key);
std::vector<std::vector<long long>> input_dims(const json& args);
Classified classify(const std::string& kernel_name);
/// Bytes of one element of a PyTorch / Kineto type name ("c10::BFloat16", "float",
/// "c10::Float8_e4m3fn", "long int"); 0 when unknown. float8 types are 1 byte ("float8" is
/// tested before "float").
double dtype_bytes(const std::string& type);
/// The profile's dtype of a GEMM whose A operand has Kineto type `type`: fp32, tf32 (fp32 inputs
/// on a kernel named tf32), bf16, fp16, fp8_e4m3, fp8_e5m2, fp64, int8; "" when unknown.
std::string gemm_dtype(const std::string& type, const std::string& kernel_name);
bool attention_shape(const CpuOp& op, costmodel::AttentionRow& r);
[[noreturn]] void fail(const std::string& origin, const std::string& what);
void finish(Accumulator& acc, TraceImport& out);
/// Parses a trace as import_trace_text does. With `rank`, a Chrome trace's rows are not made:
/// its samples and NCCL kernels go to `rank` and its NCCL kernels are neither used nor skipped
/// in `out` (the merge decides); an Nsight export is refused there (no NCCL sizes to match).
void read_trace_text(std::string_view raw, const std::string& origin, const TraceImportOptions& options,
                     TraceImport& out, RankSamples* rank);
/// Adds a kernel to `s`: the op that launched it decides first (attention, GEMM, elementwise
/// ops), then the class its name gives. Returns false for an NCCL kernel, which the caller
/// handles (only Kineto carries its sizes); true when the kernel was used or its skip counted.
bool add_linked_kernel(const LinkedKernel& kernel, OpSamples& s, TraceImport& out);
/// The attention and GEMM calls of `s` into samples, once all their kernels are in.
void add_calls(OpSamples& s);
/// Nsight Systems JSON lines (nsys_import.cpp).
void import_nsys_lines(std::string_view text, TraceImport& out);

}  // namespace tetra::calib::trace
