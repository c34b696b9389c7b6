// CSV form of the measured calibration tables (format in tables.hpp).
#include "tetra/base/text_file.hpp"
#include "tetra/calib/tables.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "tetra/base/error.hpp"

namespace tetra::calib {
namespace {

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t' || s[b] == '\r')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t' || s[e - 1] == '\r')) --e;
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= line.size(); ++i) {
    if (i == line.size() || line[i] == ',') {
      out.push_back(trim(line.substr(start, i - start)));
      start = i + 1;
    }
  }
  return out;
}

struct Cursor {
  const std::string& origin;
  int line = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw UserError(SourceLocation{origin, line, 0}, "", what);
  }

  double number(const std::string& s, const std::string& column) const {
    double v = 0;
    const auto* end = s.data() + s.size();
    const auto res = std::from_chars(s.data(), end, v);
    if (s.empty() || res.ec != std::errc() || res.ptr != end || !std::isfinite(v)) {
      fail("column '" + column + "': '" + s + "' is not a number");
    }
    return v;
  }

  long long integer(const std::string& s, const std::string& column) const {
    const double v = number(s, column);
    if (v != std::floor(v) || std::abs(v) > 9.0e15) fail("column '" + column + "': '" + s + "' is not an integer");
    return static_cast<long long>(v);
  }

  int small_int(const std::string& s, const std::string& column) const {
    const long long v = integer(s, column);
    if (v < 0 || v > 1000000000) fail("column '" + column + "': '" + s + "' is out of range");
    return static_cast<int>(v);
  }

  bool boolean(const std::string& s, const std::string& column) const {
    if (s == "true" || s == "1") return true;
    if (s == "false" || s == "0") return false;
    fail("column '" + column + "': '" + s + "' is not true/false");
  }
};

const std::map<std::string, std::vector<std::string>>& known_columns() {
  static const std::map<std::string, std::vector<std::string>> cols = {
      {"meta", {"key", "value"}},
      {"gemm", {"m", "n", "k", "dtype", "seconds"}},
      {"attention", {"batch", "seq", "heads", "kv_heads", "head_dim", "causal", "pass", "seconds"}},
      {"memory_bound", {"kernel", "bytes", "seconds"}},
      {"collective", {"op", "ranks", "ranks_per_node", "bytes", "seconds", "algorithm", "protocol"}},
  };
  return cols;
}

/// Required columns: all but dtype (gemm) and algorithm/protocol (collective).
bool optional_column(const std::string& table, const std::string& col) {
  return (table == "gemm" && col == "dtype") || (table == "collective" && (col == "algorithm" || col == "protocol"));
}

void set_meta(costmodel::ProfileMeta& meta, const std::string& key, const std::string& value, const Cursor& c) {
  if (key == "gpu") {
    meta.gpu = value;
  } else if (key == "driver") {
    meta.driver = value;
  } else if (key == "cuda") {
    meta.cuda = value;
  } else if (key == "cublas") {
    meta.cublas = value;
  } else if (key == "cudnn") {
    meta.cudnn = value;
  } else if (key == "nccl") {
    meta.nccl = value;
  } else if (key == "date") {
    meta.date = value;
  } else if (key == "source") {
    meta.source = value;
  } else if (key == "hosts") {
    meta.hosts = c.small_int(value, "value");
  } else if (key == "gpus_per_node") {
    meta.gpus_per_node = c.small_int(value, "value");
  } else if (key == "sms") {
    meta.sms = c.small_int(value, "value");
  } else if (key == "device_memory_bytes") {
    meta.device_memory_bytes = c.number(value, "value");
  } else if (key == "l2_cache_bytes") {
    meta.l2_bytes = c.number(value, "value");
  } else {
    c.fail("[meta]: unknown key '" + key +
           "' (known: gpu, driver, cuda, cublas, cudnn, nccl, date, source, hosts, gpus_per_node, sms, "
           "device_memory_bytes, l2_cache_bytes)");
  }
}

}  // namespace

namespace {

/// A table's header row: known columns, none twice, every required one present.
void check_header(const Cursor& c, const std::string& table, const std::vector<std::string>& cells) {
  const auto& known = known_columns().at(table);
  for (const auto& h : cells) {
    if (std::find(known.begin(), known.end(), h) == known.end()) {
      c.fail("[" + table + "]: unknown column '" + h + "'");
    }
    if (std::count(cells.begin(), cells.end(), h) > 1) c.fail("[" + table + "]: column '" + h + "' repeated");
  }
  for (const auto& k : known) {
    if (!optional_column(table, k) && std::find(cells.begin(), cells.end(), k) == cells.end()) {
      c.fail("[" + table + "]: missing column '" + k + "'");
    }
  }
}

}  // namespace

costmodel::Profile parse_tables_csv(std::string_view text, const std::string& origin) {
  costmodel::Profile profile;
  Cursor c{origin};
  std::string table;
  std::vector<std::string> header;
  bool want_header = false;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string_view raw = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++c.line;
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    if (line.front() == '[') {
      if (line.back() != ']') c.fail("table header '" + line + "' has no closing ']'");
      table = trim(std::string_view(line).substr(1, line.size() - 2));
      if (known_columns().count(table) == 0) {
        c.fail("unknown table [" + table + "] (known: meta, gemm, attention, memory_bound, collective)");
      }
      want_header = true;
      continue;
    }
    if (table.empty()) c.fail("a row before any [table] line");
    auto cells = split(line);
    if (want_header) {
      check_header(c, table, cells);
      header = std::move(cells);
      want_header = false;
      continue;
    }
    if (table == "meta" && cells.size() > 2 && header.size() == 2) {
      // A meta value may itself contain commas ("published measurements (sections 2, 4)"):
      // everything after the first comma is the value.
      const auto comma = line.find(',');
      const bool key_first = header[0] == "key";
      cells = {trim(std::string_view(line).substr(0, comma)), trim(std::string_view(line).substr(comma + 1))};
      if (!key_first) std::swap(cells[0], cells[1]);
    }
    if (cells.size() != header.size()) {
      c.fail("[" + table + "]: " + std::to_string(cells.size()) + " cells, header has " +
             std::to_string(header.size()));
    }
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size(); ++i) row[header[i]] = cells[i];
    auto get = [&row](const char* k) {
      auto it = row.find(k);
      return it == row.end() ? std::string() : it->second;
    };
    auto seconds = [&] {
      const double s = c.number(get("seconds"), "seconds");
      if (!(s > 0)) c.fail("column 'seconds': must be positive");
      return s;
    };
    if (table == "meta") {
      set_meta(profile.meta, get("key"), get("value"), c);
    } else if (table == "gemm") {
      costmodel::GemmRow r;
      r.m = c.integer(get("m"), "m");
      r.n = c.integer(get("n"), "n");
      r.k = c.integer(get("k"), "k");
      if (r.m <= 0 || r.n <= 0 || r.k <= 0) c.fail("[gemm]: m, n, k must be positive");
      if (row.count("dtype") != 0) r.dtype = get("dtype");
      r.seconds = seconds();
      profile.gemm.push_back(r);
    } else if (table == "attention") {
      costmodel::AttentionRow r;
      r.batch = c.small_int(get("batch"), "batch");
      r.seq = c.small_int(get("seq"), "seq");
      r.heads = c.small_int(get("heads"), "heads");
      r.kv_heads = c.small_int(get("kv_heads"), "kv_heads");
      r.head_dim = c.small_int(get("head_dim"), "head_dim");
      r.causal = c.boolean(get("causal"), "causal");
      const auto pass = get("pass");
      if (pass == "fwd") {
        r.pass = costmodel::AttentionPass::fwd;
      } else if (pass == "bwd") {
        r.pass = costmodel::AttentionPass::bwd;
      } else {
        c.fail("column 'pass': '" + pass + "' (known: fwd, bwd)");
      }
      r.seconds = seconds();
      profile.attention.push_back(r);
    } else if (table == "memory_bound") {
      costmodel::MemoryBoundRow r;
      r.kernel = get("kernel");
      if (r.kernel.empty()) c.fail("column 'kernel' is empty");
      r.bytes = c.number(get("bytes"), "bytes");
      r.seconds = seconds();
      profile.memory_bound.push_back(r);
    } else {
      costmodel::CollectiveRow r;
      r.op = get("op");
      static const std::vector<std::string> ops = {"all_reduce", "all_gather", "reduce_scatter", "send_recv",
                                                   "all_to_all"};
      if (std::find(ops.begin(), ops.end(), r.op) == ops.end()) {
        c.fail("column 'op': '" + r.op + "' (known: all_reduce, all_gather, reduce_scatter, send_recv, all_to_all)");
      }
      r.ranks = c.small_int(get("ranks"), "ranks");
      r.ranks_per_node = c.small_int(get("ranks_per_node"), "ranks_per_node");
      if (r.ranks < 1 || r.ranks_per_node < 1) c.fail("[collective]: ranks and ranks_per_node must be >= 1");
      r.bytes = c.number(get("bytes"), "bytes");
      r.seconds = seconds();
      r.algorithm = get("algorithm");
      r.protocol = get("protocol");
      profile.collective.push_back(r);
    }
  }
  return profile;
}

costmodel::Profile read_tables_csv(const std::string& path) {
  return parse_tables_csv(read_input_file(path), path);
}

std::string format_tables_csv(const costmodel::Profile& p) {
  std::ostringstream os;
  auto num = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  const auto& m = p.meta;
  os << "[meta]\nkey,value\n";
  if (!m.gpu.empty()) os << "gpu," << m.gpu << '\n';
  if (!m.source.empty()) os << "source," << m.source << '\n';
  if (!m.nccl.empty()) os << "nccl," << m.nccl << '\n';
  if (!m.cuda.empty()) os << "cuda," << m.cuda << '\n';
  os << "hosts," << m.hosts << "\ngpus_per_node," << m.gpus_per_node << '\n';
  if (m.sms > 0) os << "sms," << m.sms << '\n';
  if (!p.gemm.empty()) {
    os << "\n[gemm]\nm,n,k,dtype,seconds\n";
    for (const auto& r : p.gemm) os << r.m << ',' << r.n << ',' << r.k << ',' << r.dtype << ',' << num(r.seconds) << '\n';
  }
  if (!p.attention.empty()) {
    os << "\n[attention]\nbatch,seq,heads,kv_heads,head_dim,causal,pass,seconds\n";
    for (const auto& r : p.attention) {
      os << r.batch << ',' << r.seq << ',' << r.heads << ',' << r.kv_heads << ',' << r.head_dim << ','
         << (r.causal ? "true" : "false") << ',' << (r.pass == costmodel::AttentionPass::fwd ? "fwd" : "bwd") << ','
         << num(r.seconds) << '\n';
    }
  }
  if (!p.memory_bound.empty()) {
    os << "\n[memory_bound]\nkernel,bytes,seconds\n";
    for (const auto& r : p.memory_bound) os << r.kernel << ',' << num(r.bytes) << ',' << num(r.seconds) << '\n';
  }
  if (!p.collective.empty()) {
    os << "\n[collective]\nop,ranks,ranks_per_node,bytes,seconds,algorithm,protocol\n";
    for (const auto& r : p.collective) {
      os << r.op << ',' << r.ranks << ',' << r.ranks_per_node << ',' << num(r.bytes) << ',' << num(r.seconds) << ','
         << r.algorithm << ',' << r.protocol << '\n';
    }
  }
  return os.str();
}

}  // namespace tetra::calib
