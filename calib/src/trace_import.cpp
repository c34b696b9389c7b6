// Kernel times from Chrome / Kineto traces and Nsight Systems JSON exports (trace_import.hpp).
#include "tetra/calib/trace_import.hpp"

#include "trace_common.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

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

std::string first_input_type(const json& args) {
  if (!args.is_object()) return {};
  auto it = args.find("Input type");
  if (it == args.end() || !it->is_array() || it->empty() || !(*it)[0].is_string()) return {};
  return (*it)[0].get<std::string>();
}

double dtype_bytes(const std::string& t) {
  const auto s = lower(t);
  if (has(s, "bfloat16") || has(s, "half") || has(s, "float16") || s == "bf16" || s == "fp16") return 2;
  if (has(s, "double") || has(s, "float64") || has(s, "long")) return 8;
  if (has(s, "float") || has(s, "int32") || s == "fp32" || s == "int") return 4;
  if (has(s, "int8") || has(s, "fp8") || has(s, "float8") || has(s, "byte") || has(s, "bool")) return 1;
  return 0;
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
             has(n, "matmul")) {
    c.cls = KernelClass::gemm;
  } else if (has(n, "rmsnorm") || has(n, "rms_norm")) {
    c.cls = KernelClass::memory;
    c.memory_kernel = "rmsnorm";
  } else if (has(n, "swiglu") || has(n, "silu")) {
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



/// GEMM (M, N, K) from the launching op's input dims, or false.
bool gemm_shape(const CpuOp& op, long long& m, long long& n, long long& k) {
  const auto name = lower(op.name);
  const auto& d = op.dims;
  auto two = [](const std::vector<long long>& v) { return v.size() == 2; };
  if ((has(name, "aten::mm") || has(name, "aten::matmul")) && d.size() >= 2 && two(d[0]) && two(d[1]) &&
      d[0][1] == d[1][0]) {
    m = d[0][0];
    k = d[0][1];
    n = d[1][1];
    return true;
  }
  if (has(name, "aten::addmm") && d.size() >= 3 && two(d[1]) && two(d[2]) && d[1][1] == d[2][0]) {
    m = d[1][0];
    k = d[1][1];
    n = d[2][1];
    return true;
  }
  if (has(name, "aten::linear") && d.size() >= 2 && !d[0].empty() && two(d[1]) && d[0].back() == d[1][1]) {
    k = d[0].back();
    n = d[1][0];
    m = 1;
    for (std::size_t i = 0; i + 1 < d[0].size(); ++i) m *= d[0][i];
    return true;
  }
  if (has(name, "aten::bmm") && d.size() >= 2 && d[0].size() == 3 && d[1].size() == 3 && d[0][2] == d[1][1]) {
    m = d[0][0] * d[0][1];  // a batch of GEMMs counted as one taller GEMM
    k = d[0][2];
    n = d[1][2];
    return true;
  }
  return false;
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
    out.profile.gemm.push_back(costmodel::GemmRow{std::get<0>(k), std::get<1>(k), std::get<2>(k), "bf16", median(v)});
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
    r.ranks_per_node = r.ranks;  // a trace does not say how its group spans nodes
    r.bytes = std::get<2>(k);
    r.seconds = median(v);
    out.profile.collective.push_back(r);
  }
}

/// A GEMM or attention kernel timed `seconds`, shaped by the op that launched it (Kineto's
/// cpu_op or an NVTX range); a row when the op has the shapes, else a skip reason.
/// Returns whether it made a row.
bool add_shaped_kernel(KernelClass cls, const CpuOp* op, double seconds, Accumulator& acc, TraceImport& out) {
  if (cls == KernelClass::gemm) {
    long long m = 0, n = 0, k = 0;
    if (op != nullptr && gemm_shape(*op, m, n, k) && m > 0 && n > 0 && k > 0) {
      acc.gemm[{m, n, k}].push_back(seconds);
      return true;
    }
    ++out.skipped["GEMM kernel without a shaped aten op"];
    return false;
  }
  costmodel::AttentionRow r;
  if (op != nullptr && attention_shape(*op, r)) {
    const int pass = cls == KernelClass::attention_fwd ? 0 : 1;
    acc.attention[{r.batch, r.seq, r.heads, r.kv_heads, r.head_dim, r.causal, pass}].push_back(seconds);
    return true;
  }
  ++out.skipped["attention kernel without q/k dims"];
  return false;
}

/// An attention op of ATen or flash-attn (`aten::_scaled_dot_product_cudnn_attention`,
/// `aten::_cudnn_attention_backward`, `aten::_flash_attention_forward`, `flash_attn::...`).
bool attention_op(const CpuOp& op) {
  const auto n = lower(op.name);
  return has(n, "attention") || has(n, "flash_attn");
}

/// One attention call: every kernel its op launched (cuDNN's backward is five: dO·O, the
/// bprop kernel, the dQ conversion and two head reductions), summed.
struct AttentionCall {
  std::tuple<int, int, int, int, int, bool, int> key;
  double seconds = 0;
};

/// The trace's event array; Kineto's device list fills [meta] (name, SM count).
const json& chrome_events(const json& doc, TraceImport& out) {
  const json* events = &doc;
  if (doc.is_object()) {
    // Kineto records the devices it saw: name and SM count feed [meta] and the GEMM fit.
    if (auto dp = doc.find("deviceProperties"); dp != doc.end() && dp->is_array() && !dp->empty()) {
      const auto& d0 = (*dp)[0];
      out.profile.meta.gpu = str_field(d0, "name");
      const double sms = field(d0, "numSms");
      if (sms >= 1 && sms < 100000) out.profile.meta.sms = static_cast<int>(sms);
    }
    auto it = doc.find("traceEvents");
    if (it == doc.end() || !it->is_array()) fail(out.profile.meta.source, "no \"traceEvents\" array");
    events = &*it;
  }
  return *events;
}

/// CPU ops by External id (Kineto links a kernel to its op through this id); the innermost op
/// wins when several share an id (aten::linear -> aten::addmm).
std::map<long long, CpuOp> cpu_ops_by_external_id(const json& events) {
  std::map<long long, CpuOp> ops;
  for (const auto& e : events) {
    if (!e.is_object() || lower(str_field(e, "cat")) != "cpu_op") continue;
    const auto args = e.find("args");
    if (args == e.end() || !args->is_object()) continue;
    long long id = 0;
    if (!int_field(*args, {"External id"}, id)) continue;
    CpuOp op;
    op.name = str_field(e, "name");
    op.dims = input_dims(*args);
    op.dtype = first_input_type(*args);
    op.args = *args;
    ops[id] = std::move(op);
  }
  return ops;
}

void import_chrome(const json& doc, TraceImport& out) {
  const json& events = chrome_events(doc, out);
  const std::map<long long, CpuOp> ops = cpu_ops_by_external_id(events);
  Accumulator acc;
  std::map<long long, AttentionCall> attention_calls;  // by External id
  for (const auto& e : events) {
    if (!e.is_object()) continue;
    const auto cat = lower(str_field(e, "cat"));
    const bool kernel = cat == "kernel";
    const bool memcpy = cat == "gpu_memcpy";
    if (!kernel && !memcpy) continue;
    const double dur_us = field(e, "dur");
    const std::string name = str_field(e, "name");
    const json empty = json::object();
    const auto ait = e.find("args");
    const json& args = ait != e.end() && ait->is_object() ? *ait : empty;
    if (kernel) ++out.kernels;
    if (!(dur_us > 0) || !std::isfinite(dur_us)) {
      ++out.skipped["no positive duration"];
      continue;
    }
    const double seconds = dur_us * 1e-6;
    if (memcpy) {
      const double bytes = field(args, "bytes");
      if (has(lower(name), "dtod") && bytes > 0) {
        acc.memory[{"copy", 2.0 * bytes}].push_back(seconds);  // read + write
      }
      continue;
    }
    const CpuOp* op = nullptr;
    long long ext = 0;
    if (int_field(args, {"External id"}, ext)) {
      auto it = ops.find(ext);
      if (it != ops.end()) op = &it->second;
    }
    // Kernels of an attention op are one call, whatever their names; the op says the pass.
    if (costmodel::AttentionRow r; op != nullptr && attention_op(*op) && attention_shape(*op, r)) {
      const int pass = has(lower(op->name), "backward") ? 1 : 0;
      auto& call = attention_calls[ext];
      call.key = {r.batch, r.seq, r.heads, r.kv_heads, r.head_dim, r.causal, pass};
      call.seconds += seconds;
      ++out.used;
      continue;
    }
    auto c = classify(name);
    // PyTorch's fused RMSNorm (`aten::_fused_rms_norm`, torch.nn.RMSNorm) runs a kernel named
    // after layer norm.
    if (c.cls == KernelClass::other && op != nullptr && has(lower(op->name), "rms_norm") &&
        !has(lower(op->name), "backward")) {
      c.cls = KernelClass::memory;
      c.memory_kernel = "rmsnorm";
    }
    bool used = false;
    switch (c.cls) {
      case KernelClass::gemm:
      case KernelClass::attention_fwd:
      case KernelClass::attention_bwd:
        used = add_shaped_kernel(c.cls, op, seconds, acc, out);
        break;
      case KernelClass::nccl: {
        // record_param_comms arguments sit on the kernel (newer Kineto) or on its op.
        const json& a = args.contains("Collective name") || op == nullptr ? args : op->args;
        const auto opname = collective_op(str_field(a, "Collective name").empty() ? name : str_field(a, "Collective name"));
        const double in_n = field(a, "In msg nelems");
        const double out_n = field(a, "Out msg nelems");
        const double ranks = field(a, "Group size");
        const double elt = dtype_bytes(str_field(a, "dtype"));
        if (!opname.empty() && in_n >= 0 && out_n >= 0 && ranks >= 1 && ranks < 1e7 && elt > 0) {
          // nccl-tests' size: the larger of the send and receive buffers (NVIDIA/nccl-tests
          // prints max(sendBytes, recvBytes) as "size").
          const double bytes = std::max(in_n, out_n) * elt;
          if (bytes > 0) {
            acc.collective[{opname, static_cast<int>(ranks), bytes}].push_back(seconds);
            used = true;
          }
        }
        if (!used) ++out.skipped["NCCL kernel without message size and group size"];
        break;
      }
      case KernelClass::memory: {
        const double elt = op != nullptr ? dtype_bytes(op->dtype) : 0;
        const long long n = op != nullptr && !op->dims.empty() ? numel(op->dims[0]) : 0;
        if (n > 0 && elt > 0) {
          // Bytes moved: the first input read and an output of the same size written
          // (an RMSNorm reads its input once and writes its output once, the same count).
          acc.memory[{c.memory_kernel, 2.0 * static_cast<double>(n) * elt}].push_back(seconds);
          used = true;
        } else {
          ++out.skipped["memory-bound kernel without input dims"];
        }
        break;
      }
      case KernelClass::other:
        ++out.skipped["kernel kind not modelled"];
        break;
    }
    if (used) ++out.used;
  }
  for (const auto& [id, call] : attention_calls) acc.attention[call.key].push_back(call.seconds);
  finish(acc, out);
}

}  // namespace trace

using namespace trace;

TraceImport import_trace_text(std::string_view text, const std::string& origin) {
  TraceImport out;
  out.profile.meta.source = origin;
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) fail(origin, "the trace is empty");
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b) {
    fail(origin, "the trace is gzip-compressed; decompress it first (gunzip)");
  }
  json doc = parse_quiet(text);
  if (!doc.is_discarded() && (doc.is_array() || (doc.is_object() && doc.contains("traceEvents")))) {
    import_chrome(doc, out);
  } else if (text[first] == '{' && text.find('\n', first) != std::string_view::npos) {
    import_nsys_lines(text, out);
  } else if (doc.is_discarded()) {
    try {
      const json again = json::parse(text);
    } catch (const json::exception& e) {
      fail(origin, std::string("not valid JSON (") + e.what() + ")");
    }
    fail(origin, "not valid JSON");
  } else {
    fail(origin, "not a Chrome trace (an object with \"traceEvents\" or an array of events)");
  }
  if (out.kernels == 0) fail(origin, "no GPU kernel events found (Kineto category \"kernel\" or Nsight kernel records)");
  out.profile.meta.source = "import-trace " + origin;
  return out;
}

TraceImport import_trace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open the trace file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return import_trace_text(ss.str(), path);
}

}  // namespace tetra::calib
