// Kernel times from Chrome / Kineto traces and Nsight Systems JSON exports (trace_import.hpp).
#include "tetra/base/text_file.hpp"
#include "tetra/calib/trace_import.hpp"

#include "trace_common.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstddef>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>
#include <zlib.h>

#include "tetra/calib/sweep.hpp"
#include "tetra/base/error.hpp"

namespace tetra::calib {
namespace trace {

/// json::parse without exceptions. nlohmann still throws out_of_range for a number beyond a
/// double ("1e616") even with exceptions off; that text is invalid too (discarded).
json parse_quiet(std::string_view text) {
  try {
    return json::parse(text, nullptr, false);
  } catch (const json::exception&) {
    return json(json::value_t::discarded);
  }
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

/// A number from a JSON value that may be a number or a numeric string; NaN otherwise.
double as_number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() && *end == '\0') return d;
  }
  return std::nan("");
}

double field(const json& obj, const char* key) {
  if (!obj.is_object()) return std::nan("");
  auto it = obj.find(key);
  return it == obj.end() ? std::nan("") : as_number(*it);
}

/// An id from a JSON number: finite and within long long (a cast outside that range is undefined).
bool as_id(double v, long long& id) {
  if (!(std::fabs(v) < 9.0e18)) return false;
  id = static_cast<long long>(v);
  return true;
}

/// An exact 64-bit integer from a JSON number or a decimal string (Nsight writes 64-bit ids and
/// nanosecond times as strings); false for anything else. A double is range-checked like as_id.
bool as_int64(const json& v, long long& out) {
  if (v.is_number_integer() && !v.is_number_unsigned()) {
    out = v.get<long long>();
    return true;
  }
  if (v.is_number_unsigned()) {
    const auto u = v.get<unsigned long long>();
    if (u > static_cast<unsigned long long>(LLONG_MAX)) return false;
    out = static_cast<long long>(u);
    return true;
  }
  if (v.is_number_float()) return as_id(v.get<double>(), out);
  if (!v.is_string()) return false;
  const auto& s = v.get_ref<const std::string&>();
  std::size_t i = s.size() > 0 && s[0] == '-' ? 1 : 0;
  if (i == s.size() || s.size() - i > 18) return as_id(as_number(v), out);  // 18 digits cannot overflow
  long long r = 0;
  for (std::size_t j = i; j < s.size(); ++j) {
    if (s[j] < '0' || s[j] > '9') return as_id(as_number(v), out);
    r = r * 10 + (s[j] - '0');
  }
  out = i == 1 ? -r : r;
  return true;
}

/// The first of `keys` present in `obj` as an exact integer.
bool int_field(const json& obj, std::initializer_list<const char*> keys, long long& out) {
  if (!obj.is_object()) return false;
  for (const char* key : keys) {
    auto it = obj.find(key);
    if (it != obj.end()) return as_int64(*it, out);
  }
  return false;
}

std::string str_field(const json& obj, const char* key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/// Input Dims of a Kineto cpu_op: a list of lists of non-negative integers (empty lists for
/// scalars / None). Anything else gives an empty result.
std::vector<std::vector<long long>> input_dims(const json& args) {
  std::vector<std::vector<long long>> out;
  if (!args.is_object()) return out;
  auto it = args.find("Input Dims");
  if (it == args.end() || !it->is_array()) return out;
  for (const auto& d : *it) {
    std::vector<long long> dims;
    if (d.is_array()) {
      for (const auto& x : d) {
        const double v = as_number(x);
        if (!(v >= 0) || v > 1e15) {
          dims.clear();
          break;
        }
        dims.push_back(static_cast<long long>(v));
      }
    }
    out.push_back(std::move(dims));
  }
  return out;
}

/// Input type of a Kineto cpu_op: one string per input ("" for None).
std::vector<std::string> input_types(const json& args) {
  std::vector<std::string> out;
  if (!args.is_object()) return out;
  auto it = args.find("Input type");
  if (it == args.end() || !it->is_array()) return out;
  for (const auto& t : *it) out.push_back(t.is_string() ? t.get<std::string>() : std::string());
  return out;
}

double dtype_bytes(const std::string& t) {
  const auto s = lower(t);
  // Before "float": c10::Float8_e4m3fn and friends are one byte.
  if (has(s, "float8") || has(s, "fp8") || s == "int8" || has(s, "signed char") || has(s, "unsigned char") ||
      has(s, "byte") || s == "bool" || has(s, "uint8") || has(s, "qint8")) {
    return 1;
  }
  if (has(s, "bfloat16") || has(s, "half") || has(s, "float16") || s == "bf16" || s == "fp16" || has(s, "short")) {
    return 2;
  }
  if (has(s, "complex<double>") || has(s, "complexdouble")) return 16;
  if (has(s, "double") || has(s, "float64") || has(s, "long") || has(s, "int64") || has(s, "complex<float>") ||
      has(s, "complexfloat")) {
    return 8;
  }
  if (has(s, "float") || has(s, "int32") || s == "fp32" || s == "int" || s == "unsigned int") return 4;
  return 0;
}

std::string gemm_dtype(const std::string& type, const std::string& kernel_name) {
  const auto s = lower(type);
  if (has(s, "float8_e4m3")) return "fp8_e4m3";
  if (has(s, "float8_e5m2")) return "fp8_e5m2";
  if (has(s, "float8")) return "fp8";
  if (has(s, "bfloat16")) return "bf16";
  if (has(s, "half") || has(s, "float16")) return "fp16";
  if (has(s, "double")) return "fp64";
  if (s == "signed char" || s == "int8") return "int8";
  if (s == "float") return has(lower(kernel_name), "tf32") ? "tf32" : "fp32";
  return {};
}

long long numel(const std::vector<long long>& d) {
  if (d.empty()) return 0;
  long long n = 1;
  for (long long x : d) {
    if (x > 0 && n > (1LL << 50) / x) return 0;
    n *= x;
  }
  return n;
}





Classified classify(const std::string& kernel_name) {
  const auto n = lower(kernel_name);
  Classified c;
  if (has(n, "nccl")) {
    c.cls = KernelClass::nccl;
  } else if (has(n, "flash") || has(n, "fmha") || has(n, "sdpa") || has(n, "attn") || has(n, "attention")) {
    // cuDNN names its backward kernels "..._sdpa_..._flash_bprop_...".
    c.cls = (has(n, "bwd") || has(n, "bprop") || has(n, "backward") || has(n, "dq") || has(n, "dkdv"))
                ? KernelClass::attention_bwd
                : KernelClass::attention_fwd;
  } else if (has(n, "gemm") || has(n, "xmma") || has(n, "cutlass") || has(n, "nvjet") || has(n, "cublas") ||
             has(n, "matmul") || n.rfind("cijk_", 0) == 0) {  // Cijk_: rocBLAS / hipBLASLt Tensile kernels
    c.cls = KernelClass::gemm;
  } else if (has(n, "rmsnorm") || has(n, "rms_norm")) {
    c.cls = KernelClass::memory;
    c.memory_kernel = "rmsnorm";
  } else if (has(n, "swiglu") || has(n, "silu_and_mul") || has(n, "act_and_mul")) {
    // A plain SiLU (at::native silu kernels) reads one tensor and is not the gated SwiGLU.
    c.cls = KernelClass::memory;
    c.memory_kernel = "swiglu";
  } else if (has(n, "rope") || has(n, "rotary")) {
    c.cls = KernelClass::memory;
    c.memory_kernel = "rope";
  } else if (has(n, "adam")) {
    c.cls = KernelClass::memory;
    c.memory_kernel = "adam";
  } else if (has(n, "cross_entropy") || has(n, "nll_loss") || has(n, "log_softmax") || has(n, "crossentropy")) {
    c.cls = KernelClass::memory;
    c.memory_kernel = "cross_entropy";
  }
  return c;
}



constexpr const char* kBatchedGemm = "batched GEMM op (aten::bmm, baddbmm, grouped): no batch column in [[gemm]]";

/// Kinds of GEMM op (the innermost ATen op a GEMM kernel is launched under).
enum class GemmOp { none, plain, batched };

GemmOp gemm_op(const std::string& op_name) {
  const auto n = lower(op_name);
  if (n == "aten::bmm" || n == "aten::baddbmm" || n == "aten::addbmm" || n == "aten::_grouped_mm" ||
      n == "aten::_scaled_grouped_mm") {
    return GemmOp::batched;
  }
  if (n == "aten::mm" || n == "aten::addmm" || n == "aten::matmul" || n == "aten::linear" ||
      n == "aten::_addmm_activation" || n == "aten::_scaled_mm" || n == "aten::addmm_") {
    return GemmOp::plain;
  }
  return GemmOp::none;
}

/// GEMM (M, N, K) and the index of the A operand from the launching op's input dims, or false.
/// aten::bmm is not one tall GEMM (each batch has its own B): it gives false.
bool gemm_shape(const CpuOp& op, long long& m, long long& n, long long& k, std::size_t* a_index = nullptr) {
  const auto name = lower(op.name);
  const auto& d = op.dims;
  auto two = [](const std::vector<long long>& v) { return v.size() == 2; };
  std::size_t a = 0;
  bool ok = false;
  if ((name == "aten::mm" || name == "aten::matmul" || name == "aten::_scaled_mm") && d.size() >= 2 && two(d[0]) &&
      two(d[1]) && d[0][1] == d[1][0]) {
    m = d[0][0];
    k = d[0][1];
    n = d[1][1];
    ok = true;
  } else if ((name == "aten::addmm" || name == "aten::addmm_" || name == "aten::_addmm_activation") && d.size() >= 3 &&
             two(d[1]) && two(d[2]) && d[1][1] == d[2][0]) {
    m = d[1][0];
    k = d[1][1];
    n = d[2][1];
    a = 1;
    ok = true;
  } else if (name == "aten::linear" && d.size() >= 2 && !d[0].empty() && two(d[1]) && d[0].back() == d[1][1]) {
    k = d[0].back();
    n = d[1][0];
    m = 1;
    for (std::size_t i = 0; i + 1 < d[0].size(); ++i) m *= d[0][i];
    ok = true;
  }
  if (ok && a_index != nullptr) *a_index = a;
  return ok;
}

/// Attention shape from q and k dims, [b, heads, s, d] (SDPA) or [b, s, heads, d] (flash_attn).
bool attention_shape(const CpuOp& op, costmodel::AttentionRow& r) {
  const auto name = lower(op.name);
  // Backward ops take the output gradient first, then q, k, v.
  const std::size_t first = has(name, "backward") ? 1 : 0;
  if (op.dims.size() < first + 2 || op.dims[first].size() != 4 || op.dims[first + 1].size() != 4) return false;
  const auto& q = op.dims[first];
  const auto& k = op.dims[first + 1];
  // flash-attn's own ops and ATen's inner kernels (`aten::_flash_attention_forward`,
  // `_efficient_attention_forward` and their backwards) take [b, s, heads, d]; the
  // `_scaled_dot_product_*` ops above them take [b, heads, s, d]
  // (`pytorch/pytorch: aten/src/ATen/native/transformers/cuda/attention.cu`).
  const bool bshd = has(name, "flash_attn") || has(name, "flashattn") ||
                    has(name, "::_flash_attention_") || has(name, "::_efficient_attention_");
  r.batch = static_cast<int>(q[0]);
  r.head_dim = static_cast<int>(q[3]);
  if (bshd) {
    r.seq = static_cast<int>(q[1]);
    r.heads = static_cast<int>(q[2]);
    r.kv_heads = static_cast<int>(k[2]);
    if (k[1] != q[1]) return false;
  } else {
    r.heads = static_cast<int>(q[1]);
    r.seq = static_cast<int>(q[2]);
    r.kv_heads = static_cast<int>(k[1]);
    if (k[2] != q[2]) return false;
  }
  r.causal = true;
  if (op.args.is_object()) {
    auto it = op.args.find("Concrete Inputs");
    if (it != op.args.end() && it->is_array()) {
      // aten::scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal, ...)
      if (it->size() > 5 && (*it)[5].is_string()) r.causal = lower((*it)[5].get<std::string>()) != "false";
    }
  }
  return r.batch > 0 && r.seq > 0 && r.heads > 0 && r.kv_heads > 0 && r.head_dim > 0;
}

std::string collective_op(const std::string& raw) {
  const auto s = lower(raw);
  if (has(s, "allreduce") || has(s, "all_reduce")) return "all_reduce";
  if (has(s, "allgather") || has(s, "all_gather")) return "all_gather";
  if (has(s, "reducescatter") || has(s, "reduce_scatter")) return "reduce_scatter";
  if (has(s, "alltoall") || has(s, "all_to_all")) return "all_to_all";
  if (has(s, "send") || has(s, "recv")) return "send_recv";
  return {};
}

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw UserError(SourceLocation{origin, 0, 0}, "", what);
}

void finish(Accumulator& acc, TraceImport& out) {
  for (const auto& [k, v] : acc.gemm) {
    out.profile.gemm.push_back(costmodel::GemmRow{std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k), median(v)});
  }
  for (const auto& [k, v] : acc.attention) {
    costmodel::AttentionRow r;
    std::tie(r.batch, r.seq, r.heads, r.kv_heads, r.head_dim, r.causal, std::ignore) = k;
    r.pass = std::get<6>(k) == 0 ? costmodel::AttentionPass::fwd : costmodel::AttentionPass::bwd;
    r.seconds = median(v);
    out.profile.attention.push_back(r);
  }
  for (const auto& [k, v] : acc.memory) out.profile.memory_bound.push_back({k.first, k.second, median(v)});
  for (const auto& [k, v] : acc.collective) {
    costmodel::CollectiveRow r;
    r.op = std::get<0>(k);
    r.ranks = std::get<1>(k);
    r.ranks_per_node = std::get<2>(k);
    r.bytes = std::get<3>(k);
    r.seconds = median(v);
    out.profile.collective.push_back(r);
  }
}

/// An attention op of ATen or flash-attn (`aten::_scaled_dot_product_cudnn_attention`,
/// `aten::_cudnn_attention_backward`, `aten::_flash_attention_forward`, `flash_attn::...`).
bool attention_op(const CpuOp& op) {
  const auto n = lower(op.name);
  return has(n, "attention") || has(n, "flash_attn");
}

/// Bytes of input `i` of `op`; an NVTX range carries no types and its tensors are taken as bf16.
double input_bytes(const CpuOp& op, std::size_t i) {
  if (op.untyped) return 2.0;
  return i < op.types.size() ? dtype_bytes(op.types[i]) : 0.0;
}

/// A kernel of a cuBLAS GEMM that is not the GEMM itself.
bool gemm_helper_kernel(const std::string& name) {
  const auto n = lower(name);
  return has(n, "splitkreduce") || has(n, "reduce_kernel") || has(n, "splitk_reduce");
}

/// The trace's event array; Kineto's device list fills [meta] (name, SM count, memory).
const json& chrome_events(const json& doc, TraceImport& out) {
  const json* events = &doc;
  if (doc.is_object()) {
    // Kineto records the devices it saw: name and SM count feed [meta] and the GEMM fit.
    if (auto dp = doc.find("deviceProperties"); dp != doc.end() && dp->is_array() && !dp->empty()) {
      out.devices = static_cast<int>(std::min<std::size_t>(dp->size(), 100000));
      const auto& d0 = (*dp)[0];
      out.profile.meta.gpu = str_field(d0, "name");
      const double sms = field(d0, "numSms");
      if (sms >= 1 && sms < 100000) out.profile.meta.sms = static_cast<int>(sms);
      const double mem = field(d0, "totalGlobalMem");
      if (mem > 0 && mem < 1e15) out.profile.meta.device_memory_bytes = mem;
    }
    // torch.profiler's distributed run: which rank wrote the trace, out of how many.
    if (auto di = doc.find("distributedInfo"); di != doc.end() && di->is_object()) {
      long long v = 0;
      if (int_field(*di, {"rank"}, v) && v >= 0 && v < (1LL << 30)) out.rank = static_cast<int>(v);
      if (int_field(*di, {"world_size"}, v) && v >= 1 && v < (1LL << 30)) out.world_size = static_cast<int>(v);
    }
    auto it = doc.find("traceEvents");
    if (it == doc.end() || !it->is_array()) fail(out.profile.meta.source, "no \"traceEvents\" array");
    events = &*it;
  }
  return *events;
}

constexpr std::size_t npos = static_cast<std::size_t>(-1);

/// The thread an event ran on: its pid and tid as written (numbers or strings).
std::string thread_of(const json& e) {
  auto part = [&](const char* key) {
    auto it = e.find(key);
    return it == e.end() ? std::string("-") : it->dump();
  };
  return part("pid") + "/" + part("tid");
}

/// The CPU ops of a trace and what links a kernel to one: External ids, and the launch calls
/// by correlation id with the ops nested per thread, as HolisticTraceAnalysis builds its call
/// stacks (`facebookresearch/HolisticTraceAnalysis: hta/common/call_stack.py`): a kernel's
/// parent is the launch call with its correlation id, whose parent is the innermost CPU op
/// enclosing it on the same thread.
struct OpIndex {
  std::vector<CpuOp> ops;
  std::vector<double> ts, end;
  std::vector<std::string> thread;
  std::vector<std::size_t> parent;
  std::map<long long, std::size_t> by_external_id;
  std::map<std::string, std::vector<std::size_t>> by_thread;  // sorted by ts, outer first
  struct Launch {
    std::string thread;
    double ts = 0;
  };
  std::map<long long, Launch> launches;  // correlation id -> launch call

  explicit OpIndex(const json& events) {
    for (const auto& e : events) {
      if (!e.is_object()) continue;
      const auto cat = lower(str_field(e, "cat"));
      const auto args = e.find("args");
      const bool has_args = args != e.end() && args->is_object();
      if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "runtime") {
        long long corr = 0;
        const double t = field(e, "ts");
        if (has_args && int_field(*args, {"correlation"}, corr) && std::isfinite(t)) {
          launches[corr] = Launch{thread_of(e), t};
        }
        continue;
      }
      if (cat != "cpu_op" && cat != "operator") continue;
      CpuOp op;
      op.name = str_field(e, "name");
      if (has_args) {
        op.dims = input_dims(*args);
        op.types = input_types(*args);
        op.args = *args;
      }
      const std::size_t i = ops.size();
      ops.push_back(std::move(op));
      const double t = field(e, "ts");
      const double d = field(e, "dur");
      ts.push_back(t);
      end.push_back(t + (d > 0 ? d : 0.0));
      thread.push_back(thread_of(e));
      parent.push_back(npos);
      long long id = 0;
      // Several ops with one id: the innermost (the later one) wins (aten::linear -> aten::addmm).
      if (has_args && int_field(*args, {"External id"}, id)) by_external_id[id] = i;
      if (std::isfinite(t) && std::isfinite(end[i])) by_thread[thread[i]].push_back(i);
    }
    for (auto& [tid, v] : by_thread) {
      std::stable_sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
        return ts[a] < ts[b] || (ts[a] == ts[b] && end[a] > end[b]);
      });
      std::vector<std::size_t> stack;
      for (std::size_t i : v) {
        while (!stack.empty() && end[stack.back()] < end[i]) stack.pop_back();
        parent[i] = stack.empty() ? npos : stack.back();
        stack.push_back(i);
      }
    }
  }

  /// The innermost op of `th` whose [ts, ts + dur] holds `t`; npos when none.
  [[nodiscard]] std::size_t innermost(const std::string& th, double t) const {
    auto it = by_thread.find(th);
    if (it == by_thread.end()) return npos;
    const auto& v = it->second;
    auto pos = std::upper_bound(v.begin(), v.end(), t, [&](double x, std::size_t i) { return x < ts[i]; });
    if (pos == v.begin()) return npos;
    std::size_t i = *(pos - 1);
    while (i != npos && end[i] < t) i = parent[i];
    return i;
  }

  [[nodiscard]] bool encloses(std::size_t i, const std::string& th, double t) const {
    return thread[i] == th && ts[i] <= t && t <= end[i];
  }
};

namespace {

/// What a Chrome trace's events add up to before the rows are made.
struct ChromeSamples {
  OpSamples samples;
  std::vector<CommKernel>* comm = nullptr;  // NCCL kernels, when ranks are merged
};

/// A kernel event with a positive duration: the event, its name, its args ({} when it has
/// none) and its time.
struct KernelEvent {
  const json& event;
  const std::string& name;
  const json& args;
  double seconds;
};

/// A gpu_memcpy event: a device-to-device copy is a memory-bound copy row.
void add_memcpy(const std::string& name, const json& args, double seconds, Accumulator& acc) {
  const double bytes = field(args, "bytes");
  if (has(lower(name), "dtod") && bytes > 0) {
    acc.memory[{"copy", 2.0 * bytes}].push_back(seconds);  // read + write
  }
}

/// The op that launched the kernel: by External id where that names an op enclosing the
/// launch (or the launch is not in the trace), else the innermost op enclosing the launch.
/// npos when neither links it; `out` counts the link used.
std::size_t launching_op(const json& args, const OpIndex& index, TraceImport& out) {
  std::size_t oi = npos;
  const OpIndex::Launch* launch = nullptr;
  long long corr = 0;
  if (int_field(args, {"correlation"}, corr)) {
    auto it = index.launches.find(corr);
    if (it != index.launches.end()) launch = &it->second;
  }
  long long ext = 0;
  if (int_field(args, {"External id"}, ext)) {
    auto it = index.by_external_id.find(ext);
    if (it != index.by_external_id.end() &&
        (launch == nullptr || index.encloses(it->second, launch->thread, launch->ts))) {
      oi = it->second;
      ++out.linked_by_external_id;
    }
  }
  if (oi == npos && launch != nullptr) {
    oi = index.innermost(launch->thread, launch->ts);
    if (oi != npos) ++out.linked_by_time;
  }
  return oi;
}

/// A kernel of attention op `op` (instance `oi`): part of that op's one call, whatever the
/// kernel's name; the op says the pass.
void add_attention_op_kernel(const CpuOp& op, std::size_t oi, double seconds, OpSamples& s, TraceImport& out) {
  costmodel::AttentionRow r;
  if (!attention_shape(op, r)) {
    ++out.skipped["attention kernel without q/k dims (" + op.name.substr(0, 60) + ")"];
    return;
  }
  const int pass = has(lower(op.name), "backward") ? 1 : 0;
  auto& call = s.attention_calls[oi];
  call.key = {r.batch, r.seq, r.heads, r.kv_heads, r.head_dim, r.causal, pass};
  call.seconds += seconds;
  ++out.used;
}

/// A kernel of GEMM op `op` (kind `g`): a piece of its op instance's call, whatever the
/// kernel's name; a GEMM-named kernel that is not a cuBLAS helper is the call's main piece.
void add_gemm_op_kernel(GemmOp g, const CpuOp& op, const LinkedKernel& kernel, const Classified& c, OpSamples& s,
                        TraceImport& out) {
  ++out.gemm_kernels;
  long long m = 0, n = 0, k = 0;
  std::size_t a = 0;
  if (g == GemmOp::batched) {
    ++out.skipped[kBatchedGemm];
  } else if (!gemm_shape(op, m, n, k, &a) || m <= 0 || n <= 0 || k <= 0) {
    ++out.skipped["GEMM kernel without a shaped aten op"];
  } else if (const std::string dtype = op.untyped              ? std::string("bf16")
                                       : a < op.types.size() ? gemm_dtype(op.types[a], kernel.name)
                                                             : std::string();
             dtype.empty()) {
    ++out.skipped["GEMM op of an unknown input type"];
  } else {
    if (op.untyped) ++out.assumed_bf16;
    auto& call = s.gemm_calls[kernel.op_instance];
    call.m = m;
    call.n = n;
    call.k = k;
    if (call.dtype.empty() || dtype == "tf32") call.dtype = dtype;
    const bool main = c.cls == KernelClass::gemm && !gemm_helper_kernel(kernel.name);
    call.pieces.push_back({kernel.start, kernel.seconds, main});
    ++out.used;
    ++out.gemm_kernels_used;
  }
}

/// Elementwise ATen ops whose bytes their inputs give (aten::copy_, aten::add, aten::add_ with
/// two inputs of one shape). A copy without types (an NVTX range) is left out: it may cast, and
/// its bytes are then unknown.
bool elementwise_op(const CpuOp* op, const std::string& op_name) {
  if (op == nullptr || op->dims.size() < 2 || op->dims[0].empty() || op->dims[0] != op->dims[1]) return false;
  if (op->untyped) return op_name == "aten::add" || op_name == "aten::add_";
  return (op_name == "aten::copy_" || op_name == "aten::add" || op_name == "aten::add_") && op->types.size() >= 2;
}

/// A kernel of an elementwise op: a copy (with a dtype cast) reads its source and writes its
/// destination; a residual add reads two tensors and writes one.
void add_elementwise_kernel(const CpuOp& op, const std::string& op_name, double seconds, Accumulator& acc,
                            TraceImport& out) {
  const double n = static_cast<double>(numel(op.dims[0]));
  const double dst = input_bytes(op, 0);
  const double src = input_bytes(op, 1);
  if (n > 0 && dst > 0 && src > 0) {
    if (op.untyped) ++out.assumed_bf16;
    const bool copy = op_name == "aten::copy_";
    acc.memory[{copy ? "copy" : "residual_add", copy ? n * (dst + src) : n * (2 * src + dst)}].push_back(seconds);
    ++out.used;
  } else {
    ++out.skipped["memory-bound kernel without input dims"];
  }
}

/// The c10d op (`c10d::allreduce_`, `nccl:all_reduce`) at or above op instance `oi`; npos
/// when none is within a few levels (record_param_comms sits under it).
std::size_t comm_op(const OpIndex& index, std::size_t oi) {
  for (int depth = 0; oi != npos && depth < 8; ++depth, oi = index.parent[oi]) {
    const auto n = lower(index.ops[oi].name);
    if (n.rfind("c10d::", 0) == 0 || n.rfind("nccl:", 0) == 0) return oi;
  }
  return npos;
}

/// Element counts and group size of a one-tensor all-gather or reduce-scatter from its c10d
/// op's Input Dims (output, input): the group size is the ratio of the two.
bool sizes_from_c10d(const CpuOp& op, double& in_n, double& out_n, double& ranks) {
  const auto n = lower(op.name);
  const bool gather = has(n, "_allgather_base");
  if ((!gather && !has(n, "_reduce_scatter_base")) || op.dims.size() < 2) return false;
  const long long out = numel(op.dims[0]);
  const long long in = numel(op.dims[1]);
  const long long big = gather ? out : in;
  const long long small = gather ? in : out;
  if (small <= 0 || big <= 0 || big % small != 0) return false;
  in_n = static_cast<double>(in);
  out_n = static_cast<double>(out);
  ranks = static_cast<double>(big / small);
  return true;
}

/// Ranks per node of a group: the most members on one node when `list` names them ("[0, 1,
/// 8, 9]", ranks placed node-major), else min(per node, group size); the group size when
/// `per_node` is unknown (0).
int group_ranks_per_node(const std::string& list, int ranks, int per_node) {
  if (per_node <= 0) return ranks;
  std::map<long long, int> on_node;
  int most = 0;
  long long v = -1;
  for (const char c : list + ",") {
    if (c >= '0' && c <= '9') {
      v = (v < 0 ? 0 : v * 10) + (c - '0');
      if (v > (1LL << 30)) return std::min(per_node, ranks);
    } else if (v >= 0) {
      most = std::max(most, ++on_node[v / per_node]);
      v = -1;
    }
  }
  return most > 0 ? most : std::min(per_node, ranks);
}

std::string number_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// What an NCCL kernel says about its collective: record_param_comms arguments on the kernel
/// (newer Kineto) or on its op, else the c10d op above it (older Kineto), else its name.
CommKernel describe_nccl(const KernelEvent& kernel, const OpIndex& index, std::size_t oi, int per_node) {
  // The arguments sit on the kernel, on its op, or on the record_param_comms op around an
  // inner `nccl:*` range.
  const json* args = oi != npos ? &index.ops[oi].args : &kernel.args;
  for (std::size_t j = oi, depth = 0; j != npos && depth < 4; j = index.parent[j], ++depth) {
    if (index.ops[j].args.contains("Collective name")) {
      args = &index.ops[j].args;
      break;
    }
  }
  const json& a = kernel.args.contains("Collective name") ? kernel.args : *args;
  const std::size_t ci = comm_op(index, oi);
  const CpuOp* c10d = ci != npos ? &index.ops[ci] : nullptr;
  std::string kind = str_field(a, "Collective name");
  if (kind.empty() && c10d != nullptr) kind = c10d->name;
  if (kind.empty()) kind = kernel.name.substr(0, kernel.name.find('('));
  CommKernel k;
  k.op = collective_op(kind);
  k.p2p = k.op == "send_recv";
  std::string dtype = str_field(a, "dtype");
  if (dtype.empty() && c10d != nullptr && !c10d->types.empty()) dtype = c10d->types[0];
  double in_n = field(a, "In msg nelems");
  double out_n = field(a, "Out msg nelems");
  double ranks = field(a, "Group size");
  if (!(in_n >= 0 && out_n >= 0 && ranks >= 1) && c10d != nullptr) (void)sizes_from_c10d(*c10d, in_n, out_n, ranks);
  if (ranks >= 1 && ranks < 1e7) k.ranks = static_cast<int>(ranks);
  const double elt = dtype_bytes(dtype);
  // nccl-tests' size: the larger of the send and receive buffers (NVIDIA/nccl-tests prints
  // max(sendBytes, recvBytes) as "size").
  const double bytes = std::max(in_n, out_n) * elt;
  if (in_n >= 0 && out_n >= 0 && bytes > 0 && bytes < 1e18) k.bytes = bytes;
  const std::string group = str_field(a, "Process Group Ranks");
  k.ranks_per_node = group_ranks_per_node(group, k.ranks, per_node);
  std::string pg = str_field(a, "Process Group Name");
  if (pg.empty() && a.is_object() && a.contains("pg_id")) pg = a["pg_id"].dump();
  k.key = lower(kind) + "|" + pg + "|" + group + "|" + std::to_string(k.ranks) + "|" + lower(dtype);
  // One instance moves one size on every rank, except all-to-all (uneven splits) and send / recv.
  if (k.op != "all_to_all" && !k.p2p) k.key += "|" + number_text(in_n) + "/" + number_text(out_n);
  k.start_us = field(kernel.event, "ts");
  k.end_us = k.start_us + field(kernel.event, "dur");
  return k;
}

/// An NCCL kernel: a collective row from its message and group sizes, or, when ranks are
/// merged, a kernel for the merge to match. Returns whether it made a row.
bool add_nccl_kernel(const KernelEvent& kernel, const OpIndex& index, std::size_t oi, ChromeSamples& s,
                     TraceImport& out) {
  CommKernel k = describe_nccl(kernel, index, oi, out.ranks_per_node);
  if (s.comm != nullptr) {
    s.comm->push_back(std::move(k));
    return false;
  }
  if (k.op.empty() || k.ranks < 1 || !(k.bytes > 0)) {
    ++out.skipped["NCCL kernel without message size and group size"];
    return false;
  }
  s.samples.acc.collective[{k.op, k.ranks, k.ranks_per_node, k.bytes}].push_back(kernel.seconds);
  return true;
}

/// A memory-bound kernel `memory_kernel`: a row from its op's first input. Returns whether it
/// made a row.
bool add_memory_kernel(const std::string& memory_kernel, const CpuOp* op, double seconds, Accumulator& acc,
                       TraceImport& out) {
  const double elt = op == nullptr ? 0 : input_bytes(*op, 0);
  const long long n = op != nullptr && !op->dims.empty() ? numel(op->dims[0]) : 0;
  if (n > 0 && elt > 0) {
    if (op->untyped) ++out.assumed_bf16;
    // Bytes moved: the first input read and an output of the same size written
    // (an RMSNorm reads its input once and writes its output once, the same count).
    acc.memory[{memory_kernel, 2.0 * static_cast<double>(n) * elt}].push_back(seconds);
    return true;
  }
  ++out.skipped["memory-bound kernel without input dims"];
  return false;
}

}  // namespace

bool add_linked_kernel(const LinkedKernel& kernel, OpSamples& s, TraceImport& out) {
  const CpuOp* op = kernel.op;
  // Kernels of an attention op are one call, whatever their names; the op says the pass.
  if (op != nullptr && attention_op(*op)) {
    add_attention_op_kernel(*op, kernel.op_instance, kernel.seconds, s, out);
    return true;
  }
  auto c = classify(kernel.name);
  // The op decides before the name: every kernel of a GEMM op is part of that GEMM.
  if (const GemmOp g = op != nullptr ? gemm_op(op->name) : GemmOp::none; g != GemmOp::none) {
    add_gemm_op_kernel(g, *op, kernel, c, s, out);
    return true;
  }
  if (op != nullptr && (c.cls == KernelClass::gemm || c.cls == KernelClass::attention_fwd ||
                        c.cls == KernelClass::attention_bwd)) {
    // A convolution's implicit GEMM, an fbgemm kernel, a fused attention-named kernel of an
    // op that is not attention: the name alone does not make it one.
    ++out.skipped[std::string(c.cls == KernelClass::gemm ? "GEMM-named kernel under a non-GEMM op ("
                                                         : "attention-named kernel under a non-attention op (") +
                  op->name.substr(0, 60) + ")"];
    return true;
  }
  if (c.cls == KernelClass::gemm) ++out.gemm_kernels;
  const auto op_name = op != nullptr ? lower(op->name) : std::string();
  // PyTorch's fused RMSNorm (`aten::_fused_rms_norm`, torch.nn.RMSNorm) runs a kernel named
  // after layer norm.
  if (c.cls == KernelClass::other && op != nullptr && has(op_name, "rms_norm") && !has(op_name, "backward")) {
    c.cls = KernelClass::memory;
    c.memory_kernel = "rmsnorm";
  }
  if (elementwise_op(op, op_name)) {
    add_elementwise_kernel(*op, op_name, kernel.seconds, s.acc, out);
    return true;
  }
  if (op_name == "aten::silu" || op_name == "aten::silu_") {
    ++out.skipped["plain SiLU (aten::silu), not SwiGLU: not modelled"];
    return true;
  }
  if (c.cls == KernelClass::memory && has(lower(kernel.name), "multi_tensor_apply")) {
    // PyTorch's fused / foreach optimizers: each launch covers chunks of many tensors
    // (aten/src/ATen/native/cuda/MultiTensorApply.cuh), so no input gives its bytes.
    ++out.skipped["multi-tensor kernel (one launch covers chunks of a tensor list): bytes unknown"];
    return true;
  }
  bool used = false;
  switch (c.cls) {
    case KernelClass::gemm:
      ++out.skipped["GEMM kernel without a shaped aten op"];
      break;
    case KernelClass::attention_fwd:
    case KernelClass::attention_bwd:
      ++out.skipped["attention kernel without q/k dims"];
      break;
    case KernelClass::nccl:
      return false;
    case KernelClass::memory:
      used = add_memory_kernel(c.memory_kernel, op, kernel.seconds, s.acc, out);
      break;
    case KernelClass::other:
      ++out.skipped["kernel kind not modelled"];
      break;
  }
  if (used) ++out.used;
  return true;
}

namespace {

/// A kernel event of a Chrome trace: linked to its op, then added; an NCCL kernel becomes a
/// collective sample (or, when ranks are merged, a kernel for the merge).
void add_kernel(const KernelEvent& kernel, const OpIndex& index, ChromeSamples& s, TraceImport& out) {
  const std::size_t oi = launching_op(kernel.args, index, out);
  const CpuOp* op = oi != npos ? &index.ops[oi] : nullptr;
  if (add_linked_kernel({kernel.name, kernel.seconds, field(kernel.event, "ts"), op, oi}, s.samples, out)) return;
  if (add_nccl_kernel(kernel, index, oi, s, out)) ++out.used;
}

/// One sample per attention call: the sum of its kernels.
void add_attention_calls(const std::map<std::size_t, AttentionCall>& calls, Accumulator& acc) {
  for (const auto& [id, call] : calls) acc.attention[call.key].push_back(call.seconds);
}

/// One sample per GEMM call: in launch order, each main kernel starts a call and the helper
/// kernels after it are added to it.
void add_gemm_calls(const std::map<std::size_t, GemmCall>& calls, Accumulator& acc) {
  for (const auto& [id, call] : calls) {
    auto pieces = call.pieces;
    std::stable_sort(pieces.begin(), pieces.end(), [](const auto& a, const auto& b) { return a.ts < b.ts; });
    std::vector<double> samples;
    for (const auto& piece : pieces) {
      if (samples.empty() || piece.main) {
        samples.push_back(piece.seconds);
      } else {
        samples.back() += piece.seconds;
      }
    }
    for (double t : samples) acc.gemm[{call.m, call.n, call.k, call.dtype}].push_back(t);
  }
}

}  // namespace

void add_calls(OpSamples& s) {
  add_attention_calls(s.attention_calls, s.acc);
  add_gemm_calls(s.gemm_calls, s.acc);
}

/// The ranks per node collective rows are made with: the option, else the GPUs the process saw.
void set_ranks_per_node(const TraceImportOptions& options, TraceImport& out) {
  if (options.ranks_per_node > 0) {
    out.ranks_per_node = options.ranks_per_node;
    out.ranks_per_node_from = "--ranks-per-node";
  } else if (out.devices > 1) {
    out.ranks_per_node = out.devices;
    out.ranks_per_node_from = "deviceProperties";
  }
}

/// A Chrome trace's rows into `out`, or with `rank` its samples and NCCL kernels into `rank`.
void import_chrome(const json& doc, const TraceImportOptions& options, TraceImport& out, RankSamples* rank) {
  const json& events = chrome_events(doc, out);
  set_ranks_per_node(options, out);
  const OpIndex index(events);
  ChromeSamples s;
  s.comm = rank != nullptr ? &rank->comm : nullptr;
  const json empty = json::object();
  for (const auto& e : events) {
    if (!e.is_object()) continue;
    const auto cat = lower(str_field(e, "cat"));
    const bool kernel = cat == "kernel";
    const bool memcpy = cat == "gpu_memcpy";
    if (!kernel && !memcpy) continue;
    const double dur_us = field(e, "dur");
    const std::string name = str_field(e, "name");
    const auto ait = e.find("args");
    const json& args = ait != e.end() && ait->is_object() ? *ait : empty;
    if (kernel) ++out.kernels;
    if (!(dur_us > 0) || !std::isfinite(dur_us)) {
      ++out.skipped["no positive duration"];
      continue;
    }
    const double seconds = dur_us * 1e-6;
    if (memcpy) {
      add_memcpy(name, args, seconds, s.samples.acc);
    } else {
      add_kernel(KernelEvent{e, name, args, seconds}, index, s, out);
    }
  }
  add_calls(s.samples);
  if (rank != nullptr) {
    rank->acc = std::move(s.samples.acc);
    return;
  }
  finish(s.samples.acc, out);
}

}  // namespace trace

using namespace trace;

namespace {

bool is_gzip(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f && static_cast<unsigned char>(data[1]) == 0x8b;
}

std::string mib(std::size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

std::string gunzip_bounded(std::string_view data, const std::string& origin, std::size_t max_bytes) {
  if (!is_gzip(data)) fail(origin, "not a gzip stream");
  std::string out;
  z_stream zs{};
  // 16 + MAX_WBITS: a gzip header and trailer (zlib manual, inflateInit2).
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) fail(origin, "cannot start gzip decompression");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};
  if (data.size() >= UINT_MAX) fail(origin, "the gzip stream is too large to read");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  char buf[1 << 16];
  for (;;) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof buf;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      fail(origin, std::string("not a valid gzip stream (zlib: ") + (zs.msg != nullptr ? zs.msg : "data error") + ")");
    }
    const std::size_t got = sizeof buf - zs.avail_out;
    if (out.size() + got > max_bytes) {
      fail(origin, "the trace decompresses to more than " + mib(max_bytes) + ", the import limit");
    }
    out.append(buf, got);
    if (rc == Z_STREAM_END) {
      // Concatenated members (cat a.gz b.gz) are one stream; trailing zero padding is ignored.
      const auto rest = data.substr(data.size() - zs.avail_in);
      if (rest.find_first_not_of('\0') == std::string_view::npos) break;
      if (!is_gzip(rest)) fail(origin, "trailing bytes after the gzip stream");
      if (inflateReset(&zs) != Z_OK) fail(origin, "cannot restart gzip decompression");
      continue;
    }
    // All input used and room left for output: the stream ended early.
    if (zs.avail_in == 0 && zs.avail_out != 0) fail(origin, "the gzip stream is truncated");
  }
  return out;
}

namespace trace {

void read_trace_text(std::string_view raw, const std::string& origin, const TraceImportOptions& options,
                     TraceImport& out, RankSamples* rank) {
  if (raw.size() > options.max_bytes) fail(origin, "the trace is larger than " + mib(options.max_bytes) + ", the import limit");
  std::string inflated;
  std::string_view text = raw;
  const bool gz = is_gzip(raw);
  if (gz) {
    inflated = gunzip_bounded(raw, origin, options.max_bytes);
    text = inflated;
  }
  const std::string what = gz ? "the decompressed trace is " : "";
  out.profile.meta.source = origin;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) fail(origin, gz ? "the decompressed trace is empty" : "the trace is empty");
  json doc = parse_quiet(text);
  if (!doc.is_discarded() && (doc.is_array() || (doc.is_object() && doc.contains("traceEvents")))) {
    import_chrome(doc, options, out, rank);
  } else if (text[first] == '{' && text.find('\n', first) != std::string_view::npos) {
    if (rank != nullptr) {
      fail(origin, "an Nsight Systems export: its NCCL kernels carry no message or group size to match across ranks");
    }
    set_ranks_per_node(options, out);
    import_nsys_lines(text, out);
  } else if (doc.is_discarded()) {
    try {
      const json again = json::parse(text);
    } catch (const json::exception& e) {
      fail(origin, (gz ? std::string("the decompressed trace is not valid JSON (") : std::string("not valid JSON (")) +
                       e.what() + ")");
    }
    fail(origin, what + "not valid JSON");
  } else {
    fail(origin, what + "not a Chrome trace (an object with \"traceEvents\" or an array of events)");
  }
  if (out.kernels == 0) fail(origin, "no GPU kernel events found (Kineto category \"kernel\" or Nsight kernel records)");
  out.profile.meta.source = "import-trace " + origin;
}

}  // namespace trace

TraceImport import_trace_text(std::string_view raw, const std::string& origin, const TraceImportOptions& options) {
  TraceImport out;
  read_trace_text(raw, origin, options, out, nullptr);
  return out;
}

TraceImport import_trace(const std::string& path, const TraceImportOptions& options) {
  // Read at most the limit plus one byte: the file's size is never trusted (a pipe or a
  // growing file has none).
  const std::string data = read_input_file(path, options.max_bytes);
  return import_trace_text(data, path, options);
}

}  // namespace tetra::calib
