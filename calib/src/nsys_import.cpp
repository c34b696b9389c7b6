// Kernel times from Nsight Systems JSON-lines exports (trace_import.hpp): kernels linked by
// correlation id to their launch call and to the innermost NVTX range on that thread.
#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <sstream>
#include <vector>

#include "tetra/base/error.hpp"
#include "trace_common.hpp"

namespace tetra::calib::trace {

/// The op that an NVTX range message names, in the form PyTorch writes it under
/// `torch.autograd.profiler.emit_nvtx(record_shapes=True)`:
///   "aten::mm, seq = 12, op_id = 34, sizes = [[2048, 5120], [5120, 15360]], input_op_ids = [(1,0)]"
/// (pytorch/pytorch: torch/csrc/profiler/util.cpp, getNvtxStr and shapesToStr: the op name, then
/// ", seq = N", ", op_id = N", ", sizes = [[d, ...], [], ...]" and ", input_op_ids = [...]", each
/// only when known; an input without a tensor shape is "[]"). A range without sizes gives the
/// name alone; sizes that do not parse as a list of lists of non-negative integers give no dims,
/// like malformed Kineto "Input Dims".
CpuOp nvtx_op(const std::string& text) {
  CpuOp op;
  const auto comma = text.find(", ");
  op.name = text.substr(0, comma);
  op.untyped = true;
  static const std::string kSizes = ", sizes = [";
  const auto at = text.find(kSizes);
  if (at == std::string::npos) return op;
  std::size_t i = at + kSizes.size();  // just after the outer '['
  std::vector<std::vector<long long>> dims;
  auto skip_space = [&] {
    while (i < text.size() && text[i] == ' ') ++i;
  };
  skip_space();
  if (i < text.size() && text[i] == ']') return op;  // "sizes = []": no inputs
  while (true) {
    skip_space();
    if (i >= text.size() || text[i] != '[') return op;
    ++i;
    std::vector<long long> d;
    skip_space();
    if (i < text.size() && text[i] == ']') {
      ++i;
    } else {
      while (true) {
        skip_space();
        if (i >= text.size() || text[i] < '0' || text[i] > '9') return op;  // negative or not a number
        long long v = 0;
        while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
          v = v * 10 + (text[i] - '0');
          if (v > 1000000000000000LL) return op;  // beyond any tensor dimension (input_dims uses 1e15)
          ++i;
        }
        d.push_back(v);
        skip_space();
        if (i < text.size() && text[i] == ',') {
          ++i;
          continue;
        }
        if (i < text.size() && text[i] == ']') {
          ++i;
          break;
        }
        return op;
      }
    }
    dims.push_back(std::move(d));
    skip_space();
    if (i < text.size() && text[i] == ',') {
      ++i;
      continue;
    }
    if (i < text.size() && text[i] == ']') break;
    return op;
  }
  op.dims = std::move(dims);
  return op;
}

/// One NVTX push/pop range on a CPU thread, times in ns.
struct NvtxRange {
  long long start = 0;
  long long end = 0;
  std::size_t text = 0;  // index into the range texts
};

/// For each query time (ns) on one thread, the innermost range that encloses it (start <= t <=
/// end), or npos. Ranges sorted by start (ties: the longer, i.e. outer, first) and swept with a
/// stack of open ranges: O((R + Q) log) for R ranges and Q queries, no recursion. PyTorch's
/// push/pop ranges nest; for ranges that overlap without nesting, the latest-started open range
/// that still encloses the time is taken.
std::vector<std::size_t> innermost_ranges(std::vector<NvtxRange>& ranges,
                                          const std::vector<std::pair<long long, std::size_t>>& queries_sorted,
                                          std::size_t query_count) {
  constexpr auto npos = static_cast<std::size_t>(-1);
  std::vector<std::size_t> out(query_count, npos);
  std::sort(ranges.begin(), ranges.end(), [](const NvtxRange& a, const NvtxRange& b) {
    return std::tie(a.start, b.end, a.text) < std::tie(b.start, a.end, b.text);
  });
  std::vector<const NvtxRange*> open;
  std::size_t next = 0;
  for (const auto& [t, q] : queries_sorted) {
    while (next < ranges.size() && ranges[next].start <= t) {
      while (!open.empty() && open.back()->end < ranges[next].start) open.pop_back();
      open.push_back(&ranges[next]);
      ++next;
    }
    while (!open.empty() && open.back()->end < t) open.pop_back();
    if (!open.empty()) out[q] = open.back()->text;
  }
  return out;
}

/// Nsight Systems JSON export (`nsys export --type json`): one object per line.
///  - Kernel records: `{"Type": 79, "CudaEvent": {"startNs", "endNs", "correlationId",
///    "globalPid", "kernel": {"shortName", "demangledName", ...}}}`, names as string ids resolved
///    through the string table (`{"data": [...]}`, or `{"type": "String", "id", "value"}` lines
///    with --line-by-line).
///  - CUDA runtime/driver API calls: `{"TraceProcessEvent": {"startNs", "endNs",
///    "correlationId", "globalTid", "name"}}`; a launch call and the kernel it launched share
///    the correlation id.
///  - NVTX ranges: `{"Type": 59, "NvtxEvent": {"Timestamp", "EndTimestamp", "Text",
///    "GlobalTid", ...}}`, times in ns.
/// The JSON export serialises the same records as the documented SQLite tables
/// CUPTI_ACTIVITY_KIND_KERNEL / CUPTI_ACTIVITY_KIND_RUNTIME (correlationId, start, end,
/// globalTid/globalPid) and NVTX_EVENTS (start, end, text, textId, globalTid): NVIDIA Nsight
/// Systems export documentation, "SQLite Export Schema Reference" and the example "Correlate
/// CUDA kernel launches with CUDA API kernel launches". The JSON member names above are those
/// seen in published exports; the lower-case SQLite names are accepted as well. A globalTid or
/// globalPid holds the process id in bits 24..47 (same documentation, "Serialized process and
/// thread identifiers"), so `id >> 24` names the process.
/// A kernel belongs to the innermost NVTX range, on the thread of its launch call, that encloses
/// the start of that call; with PyTorch's emit_nvtx(record_shapes=True) that range names the
/// aten op and its input sizes (nvtx_op), which give GEMM and attention shapes as in a Kineto
/// trace. A file without NVTX ranges keeps the name-only classification.
/// One kernel of an Nsight Systems export.
struct NsysKernel {
  double start;  // ns
  double seconds;
  long long name_id;
  std::string name;
  long long correlation = -1;  // -1: none
  long long process = -1;      // globalPid >> 24; -1: not given
};

/// One CUDA API call that launched a kernel.
struct NsysApiCall {
  long long process;  // globalTid >> 24
  long long thread;   // globalTid
  long long start;
};

/// What the export's lines hold: kernels, their launch calls, NVTX ranges, the string table.
struct NsysRecords {
  std::map<long long, std::string> strings;
  std::vector<NsysKernel> kernels;
  std::map<long long, std::vector<NsysApiCall>> launches;  // correlation id -> calls (one per process)
  std::map<long long, std::vector<NvtxRange>> ranges;      // globalTid -> its ranges
  std::vector<std::string> range_texts;
};

/// Reads the JSON lines of an export; a line that is not JSON is an error at its line.
NsysRecords read_nsys_records(std::string_view text, TraceImport& out) {
  NsysRecords rec;
  auto& strings = rec.strings;
  auto& kernels = rec.kernels;
  auto& launches = rec.launches;
  auto& ranges = rec.ranges;
  auto& range_texts = rec.range_texts;
  std::vector<std::pair<std::size_t, long long>> range_text_ids;  // (text index, string id) to resolve
  std::size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const auto line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json obj = parse_quiet(line);
    if (obj.is_discarded()) {
      throw UserError(SourceLocation{out.profile.meta.source, line_no, 0}, "", "not a JSON object");
    }
    if (!obj.is_object()) continue;
    if (auto d = obj.find("data"); d != obj.end() && d->is_array()) {  // string table
      long long i = 0;
      for (const auto& s : *d) {
        if (s.is_string()) strings[i] = s.get<std::string>();
        ++i;
      }
    }
    if (obj.contains("id") && obj.contains("value") && obj["value"].is_string()) {
      if (long long id = 0; as_int64(obj["id"], id)) strings[id] = obj["value"].get<std::string>();
    }
    if (auto nv = obj.find("NvtxEvent"); nv != obj.end() && nv->is_object()) {
      // A range needs both ends on one thread; marks and domain/category records have no end.
      NvtxRange r;
      long long tid = 0;
      if (int_field(*nv, {"Timestamp", "start"}, r.start) && int_field(*nv, {"EndTimestamp", "end"}, r.end) &&
          r.end >= r.start && int_field(*nv, {"GlobalTid", "globalTid"}, tid)) {
        r.text = range_texts.size();
        std::string t = str_field(*nv, "Text");
        if (t.empty()) t = str_field(*nv, "text");
        long long text_id = 0;
        if (t.empty() && int_field(*nv, {"TextId", "textId"}, text_id)) range_text_ids.emplace_back(r.text, text_id);
        range_texts.push_back(std::move(t));
        ranges[tid].push_back(r);
      }
      continue;
    }
    if (auto tp = obj.find("TraceProcessEvent"); tp != obj.end() && tp->is_object()) {
      NsysApiCall call{};
      long long corr = 0;
      if (int_field(*tp, {"correlationId"}, corr) && corr != 0 &&
          int_field(*tp, {"globalTid", "GlobalTid"}, call.thread) && int_field(*tp, {"startNs", "start"}, call.start)) {
        call.process = call.thread >> 24;
        auto& v = launches[corr];
        if (v.size() < 64) v.push_back(call);  // a correlation id repeats only across processes
      }
      continue;
    }
    auto ev = obj.find("CudaEvent");
    if (ev == obj.end() || !ev->is_object()) continue;
    auto k = ev->find("kernel");
    if (k == ev->end() || !k->is_object()) continue;
    const double start = field(*ev, "startNs");
    const double end = field(*ev, "endNs");
    NsysKernel rec{start, (end - start) * 1e-9, -1, {}};
    for (const char* key : {"demangledName", "shortName", "mangledName"}) {
      auto it = k->find(key);
      if (it == k->end()) continue;
      if (it->is_string() && !std::isfinite(as_number(*it))) {
        rec.name = it->get<std::string>();
      } else {
        as_int64(*it, rec.name_id);
      }
      break;
    }
    if (long long c = 0; int_field(*ev, {"correlationId"}, c) && c != 0) rec.correlation = c;
    if (long long p = 0; int_field(*ev, {"globalPid", "GlobalPid"}, p)) rec.process = p >> 24;
    kernels.push_back(std::move(rec));
  }
  for (const auto& [index, id] : range_text_ids) {
    auto it = strings.find(id);
    if (it != strings.end()) range_texts[index] = it->second;
  }
  return rec;
}

/// Which NVTX range encloses each kernel's launch on its thread (npos where none), and whether
/// its launch call was found.
struct KernelLinks {
  std::vector<std::size_t> range;
  std::vector<char> launch_found;
};

constexpr auto npos = static_cast<std::size_t>(-1);

KernelLinks link_kernels(NsysRecords& rec) {
  const auto& kernels = rec.kernels;
  const auto& launches = rec.launches;
  auto& ranges = rec.ranges;  // innermost_ranges sorts them
  KernelLinks links{std::vector<std::size_t>(kernels.size(), npos), std::vector<char>(kernels.size(), 0)};
  auto& kernel_range = links.range;
  auto& launch_found = links.launch_found;
  if (!ranges.empty()) {
    std::map<long long, std::vector<std::pair<long long, std::size_t>>> queries;  // thread -> (time, kernel)
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      auto it = launches.find(kernels[i].correlation);
      if (kernels[i].correlation < 0 || it == launches.end()) continue;
      const NsysApiCall* call = nullptr;
      for (const auto& c : it->second) {
        if (kernels[i].process >= 0 ? c.process == kernels[i].process : it->second.size() == 1) {
          call = &c;
          break;
        }
      }
      if (call == nullptr) continue;
      launch_found[i] = 1;
      queries[call->thread].emplace_back(call->start, i);
    }
    for (auto& [thread, q] : queries) {
      auto rit = ranges.find(thread);
      if (rit == ranges.end()) continue;
      std::sort(q.begin(), q.end());
      std::vector<std::pair<long long, std::size_t>> local(q.size());
      for (std::size_t j = 0; j < q.size(); ++j) local[j] = {q[j].first, j};
      const auto found = innermost_ranges(rit->second, local, q.size());
      for (std::size_t j = 0; j < q.size(); ++j) kernel_range[q[j].second] = found[j];
    }
  }
  return links;
}

void import_nsys_lines(std::string_view text, TraceImport& out) {
  NsysRecords rec = read_nsys_records(text, out);
  // The launch call of each kernel, then the innermost range around it, thread by thread.
  const KernelLinks links = link_kernels(rec);
  auto& kernels = rec.kernels;
  const auto& strings = rec.strings;
  const auto& range_texts = rec.range_texts;
  const auto& kernel_range = links.range;
  const auto& launch_found = links.launch_found;
  const bool nvtx = !rec.ranges.empty();

  OpSamples samples;
  std::map<std::size_t, CpuOp> ops;  // range index -> its op, parsed once
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    auto& k = kernels[i];
    ++out.kernels;
    if (!(k.seconds > 0) || !std::isfinite(k.seconds)) {
      ++out.skipped["no positive duration"];
      continue;
    }
    if (k.name.empty()) {
      auto it = strings.find(k.name_id);
      if (it != strings.end()) k.name = it->second;
    }
    const auto c = classify(k.name);
    if (c.cls == KernelClass::nccl) {
      // Neither form gives the element type or the group size of a collective.
      ++out.skipped["NCCL kernel (Nsight export carries no message sizes)"];
      continue;
    }
    const CpuOp* op = nullptr;
    if (kernel_range[i] != npos) {
      auto [it, fresh] = ops.try_emplace(kernel_range[i]);
      if (fresh) it->second = nvtx_op(range_texts[kernel_range[i]]);
      op = &it->second;
      ++out.linked_by_time;
    } else if (c.cls == KernelClass::gemm || c.cls == KernelClass::attention_fwd ||
               c.cls == KernelClass::attention_bwd) {
      // Without its launch call (CUDA API tracing off: nsys -t cuda) no range can be found.
      const std::string kind = c.cls == KernelClass::gemm ? "GEMM kernel " : "attention kernel ";
      ++out.skipped[kind + (!nvtx                  ? "(Nsight export carries no shapes; use a Kineto trace)"
                            : launch_found[i] != 0 ? "outside any NVTX range of its launching thread"
                                                   : "without its CUDA launch call in the export")];
      continue;
    }
    // NVTX messages carry no is_causal argument; attention_shape then assumes causal, as it
    // does for a Kineto op without "Concrete Inputs".
    (void)add_linked_kernel({k.name, k.seconds, k.start, op, kernel_range[i]}, samples, out);
  }
  add_calls(samples);
  finish(samples.acc, out);
}

}  // namespace tetra::calib::trace
