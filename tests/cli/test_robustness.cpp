// End-to-end robustness of the tetrasim executable (docs/cli.md): absurd sizes give one
// clear line naming file:line:col and the key, exit 1, within seconds (no overflow, no hang);
// a failed command leaves no output file behind; JSON output is byte-identical across runs
// and across --threads values.

#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "support/run_tetrasim.hpp"

namespace fs = std::filesystem;

namespace {

using Run = tetra::test::CliRun;
using tetra::test::slurp;

fs::path scratch() { return tetra::test::scratch_dir("robustness_scratch"); }

/// Runs `tetrasim ARGS` from the source folder under a 120 s limit (exit 124 on a hang).
Run tetrasim(const std::string& args) { return tetra::test::run_tetrasim(args, 120); }

/// A small valid scenario (8 GPUs, llama3.1-8b) with one line replaced.
std::string scenario_with(const std::string& from, const std::string& to) {
  std::string text = R"([model]
layers = 32
hidden = 4096
ffn_hidden = 14336
heads = 32
kv_heads = 8
vocab = 128256

[cluster]
preset = "dgx-h100"
nodes = 1

[cluster.gpu]
memory = "80GiB"

[cluster.intra_node]
bandwidth = "450GB/s"

[cluster.inter_node]
nic_bandwidth = "400Gb/s"

[training]
seq_len = 4096
global_batch = 32

[layout]
tp = 2
pp = 2
mbs = 1
)";
  if (!from.empty()) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  }
  return text;
}

fs::path write(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

int line_of(const std::string& text, const std::string& needle) {
  const auto at = text.find(needle);
  REQUIRE(at != std::string::npos);
  int line = 1;
  for (std::size_t i = 0; i < at; ++i) line += text[i] == '\n' ? 1 : 0;
  return line;
}

std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

/// Exit 1, nothing on stdout, one line "tetrasim: FILE:LINE:COL: KEY: ..." on stderr.
void check_located_error(const Run& r, const fs::path& file, int line, const std::string& key) {
  CAPTURE(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(count_lines(r.err) == 1);
  const std::string prefix = "tetrasim: " + file.string() + ":" + std::to_string(line) + ":";
  CHECK(r.err.rfind(prefix, 0) == 0);
  CHECK(r.err.find(key) != std::string::npos);
}

struct Absurd {
  const char* name;
  const char* from;
  const char* to;
  const char* key;
};

}  // namespace

TEST_SUITE("cli") {

TEST_CASE("robustness: the base scenario of the absurd-size tests is valid") {
  const fs::path p = write("base.toml", scenario_with("", ""));
  const Run r = tetrasim("memory '" + p.string() + "' --json");
  CAPTURE(r.err);
  CHECK(r.code == 0);
}

TEST_CASE("robustness: absurd sizes give one clear line naming file:line:col and the key") {
  const Absurd cases[] = {
      {"a trillion layers", "layers = 32", "layers = 1000000000000", "[model].layers"},
      {"int64 max hidden", "hidden = 4096", "hidden = 9223372036854775807", "[model].hidden"},
      {"negative heads", "heads = 32", "heads = -32", "[model].heads"},
      {"zero vocab", "vocab = 128256", "vocab = 0", "[model].vocab"},
      {"a trillion nodes", "nodes = 1", "nodes = 1000000000000", "[cluster].nodes"},
      {"zero NVLink bandwidth", "bandwidth = \"450GB/s\"", "bandwidth = \"0GB/s\"", "[cluster.intra_node].bandwidth"},
      {"zero NIC bandwidth", "nic_bandwidth = \"400Gb/s\"", "nic_bandwidth = \"0Gb/s\"",
       "[cluster.inter_node].nic_bandwidth"},
      {"negative bandwidth", "bandwidth = \"450GB/s\"", "bandwidth = \"-450GB/s\"", "[cluster.intra_node].bandwidth"},
      {"infinite bandwidth", "bandwidth = \"450GB/s\"", "bandwidth = \"1e999GB/s\"", "[cluster.intra_node].bandwidth"},
      {"a 1-byte GPU", "memory = \"80GiB\"", "memory = \"1B\"", "[cluster.gpu].memory"},
      {"a zero-byte GPU", "memory = \"80GiB\"", "memory = \"0B\"", "[cluster.gpu].memory"},
      {"a yottabyte GPU", "memory = \"80GiB\"", "memory = \"1000000000000TB\"", "[cluster.gpu].memory"},
      {"a trillion-token sequence", "seq_len = 4096", "seq_len = 1000000000000", "[training].seq_len"},
      {"zero batch", "global_batch = 32", "global_batch = 0", "[training].global_batch"},
      {"a float where an integer belongs", "tp = 2", "tp = 2.5", "[layout].tp"},
      {"a trillion-way TP", "tp = 2", "tp = 1000000000000", "[layout].tp"},
      {"a billion micro-batch size", "mbs = 1", "mbs = 1000000000", "[layout].mbs"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const std::string text = scenario_with(c.from, c.to);
    const fs::path p = write("absurd.toml", text);
    check_located_error(tetrasim("memory '" + p.string() + "'"), p, line_of(text, c.to), c.key);
    check_located_error(tetrasim("simulate '" + p.string() + "' --json"), p, line_of(text, c.to), c.key);
  }
}

TEST_CASE("robustness: a step too large to simulate is refused at once, never hangs") {
  // 1 billion sequences per step on 8 GPUs: 250 million micro-batches per pipeline rank.
  const std::string text = scenario_with("global_batch = 32", "global_batch = 1000000000");
  const fs::path p = write("huge.toml", text);
  const int line = line_of(text, "global_batch = 1000000000");
  check_located_error(tetrasim("memory '" + p.string() + "' --json"), p, line, "[training].global_batch");
  check_located_error(tetrasim("simulate '" + p.string() + "' --json"), p, line, "[training].global_batch");
  // The largest step allowed (10^6 micro-batch passes) still finishes well inside the limit.
  const std::string big = scenario_with("global_batch = 32", "global_batch = 500000");
  const fs::path q = write("big.toml", big);
  const Run r = tetrasim("simulate '" + q.string() + "' --json");
  CAPTURE(r.err);
  CHECK(r.code == 0);
  // Inside every key's bounds but too long for int64 picoseconds: one op of a 10^8-token
  // sequence, or a replay of 10^6 s, is refused with one line, never an internal error.
  const fs::path seq = write("seq.toml", scenario_with("seq_len = 4096", "seq_len = 100000000"));
  const Run s = tetrasim("simulate '" + seq.string() + "'");
  CAPTURE(s.err);
  CHECK(s.code == 1);
  CHECK(count_lines(s.err) == 1);
  CHECK(s.err.find("too large to simulate") != std::string::npos);
  CHECK(s.err.find("internal error") == std::string::npos);
  std::string long_text = scenario_with("seq_len = 4096", "seq_len = 2000000");
  long_text.replace(long_text.find("global_batch = 32"), 17, "global_batch = 100000");
  const fs::path long_step = write("long.toml", long_text);
  const Run l = tetrasim("simulate '" + long_step.string() + "'");
  CAPTURE(l.err);
  CHECK(l.code == 1);
  CHECK(l.err.find("too large to simulate") != std::string::npos);
}

TEST_CASE("robustness: every key at either end of its documented range runs or is refused in one line") {
  // Values inside the bounds `tetrasim keys` documents, at their extremes: the arithmetic of
  // memory, cost and replay must neither overflow (the sanitizer build aborts on signed
  // overflow) nor end in an internal error. A refusal is fine when it is one clear line.
  struct Extreme {
    const char* from;  // a line of the base scenario, or a table header to add the key under
    const char* to;
  };
  const Extreme extremes[] = {
      {"layers = 32", "layers = 1"},
      {"layers = 32", "layers = 100000"},
      {"hidden = 4096", "hidden = 10000000"},
      {"ffn_hidden = 14336", "ffn_hidden = 1"},
      {"ffn_hidden = 14336", "ffn_hidden = 10000000"},
      {"heads = 32\nkv_heads = 8", "heads = 100000\nkv_heads = 100000"},
      {"vocab = 128256", "vocab = 1"},
      {"vocab = 128256", "vocab = 100000000"},
      {"[model]", "[model]\nhead_dim = 10000000"},
      {"nodes = 1", "nodes = 1000000"},
      {"[cluster]", "[cluster]\ngpus_per_node = 1024"},
      {"memory = \"80GiB\"", "memory = \"1MiB\""},
      {"memory = \"80GiB\"", "memory = \"1PB\""},
      {"[cluster.gpu]", "[cluster.gpu]\nsms = 1"},
      {"[cluster.gpu]", "[cluster.gpu]\nsms = 100000"},
      {"[cluster.gpu]", "[cluster.gpu]\nbf16_peak = \"1e-9TFLOP/s\""},
      {"[cluster.gpu]", "[cluster.gpu]\nhbm_bandwidth = \"1e12GB/s\""},
      {"bandwidth = \"450GB/s\"", "bandwidth = \"1e-9GB/s\""},
      {"[cluster.intra_node]", "[cluster.intra_node]\nlatency = \"10s\""},
      {"nic_bandwidth = \"400Gb/s\"", "nic_bandwidth = \"1e12Gb/s\""},
      {"[cluster.inter_node]", "[cluster.inter_node]\nlatency = \"10s\""},
      {"[cluster.inter_node]", "[cluster.inter_node]\nnics_per_node = 1000000"},
      {"seq_len = 4096", "seq_len = 1"},
      {"global_batch = 32", "global_batch = 1"},
      {"[training]", "[training]\nnccl_buffsize = 1073741824"},
      {"[training]", "[training]\nmoe_routing_imbalance = 1000"},
      {"tp = 2", "tp = 1000000"},
      {"pp = 2", "pp = 1000000"},
      {"mbs = 1", "mbs = 1000000"},
      {"[layout]", "[layout]\ncp = 1000000"},
      {"[layout]", "[layout]\nvp = 1000000"},
      {"[layout]", "[layout]\nfirst_stage_layers = 100000"},
  };
  for (const auto& e : extremes) {
    const fs::path p = write("extreme.toml", scenario_with(e.from, e.to));
    const Run r = tetrasim("simulate '" + p.string() + "' --json");
    const std::string value = e.to;
    CAPTURE(value);
    CAPTURE(r.err);
    CHECK((r.code == 0 || r.code == 1));
    CHECK(r.err.find("internal error") == std::string::npos);
    if (r.code == 1) CHECK(count_lines(r.err) == 1);
    if (r.code == 0) CHECK(nlohmann::json::parse(r.out, nullptr, false).is_object());
  }
}

TEST_CASE("robustness: --layout with absurd values names --layout and the key") {
  const fs::path p = write("base2.toml", scenario_with("", ""));
  for (const char* bad : {"tp=1000000000000", "pp=-1", "mbs=0", "tp=2,tp=4", "schedule=warp", "tp", "=2",
                          "tp=2,,pp=2", "vp=99999999999999999999999"}) {
    CAPTURE(bad);
    const Run r = tetrasim("memory '" + p.string() + "' --layout '" + bad + "'");
    CAPTURE(r.err);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.rfind("tetrasim: --layout", 0) == 0);
  }
}

TEST_CASE("robustness: inputs that are not text give one line, exit 1") {
  const fs::path bin = write("binary.toml", std::string("\x00\xff\xfe[model]\x00\n", 12));
  const Run a = tetrasim("memory '" + bin.string() + "'");
  CAPTURE(a.err);
  CHECK(a.code == 1);
  CHECK(count_lines(a.err) == 1);
  const fs::path empty = write("empty.toml", "");
  const Run b = tetrasim("simulate '" + empty.string() + "'");
  CAPTURE(b.err);
  CHECK(b.code == 1);
  CHECK(count_lines(b.err) == 1);
  const fs::path csv = write("binary.csv", std::string("id,\"model\n\x00\x01", 12));
  const Run c = tetrasim("validate '" + csv.string() + "'");
  CAPTURE(c.err);
  CHECK(c.code == 1);
  CHECK(count_lines(c.err) == 1);
  const Run d = tetrasim("memory '" + scratch().string() + "'");  // a folder
  CHECK(d.code == 1);
  CHECK(count_lines(d.err) == 1);
}

TEST_CASE("robustness: a failed command leaves no output file behind") {
  const fs::path bad = write("bad.toml", scenario_with("tp = 2", "tp = 3"));
  const fs::path trace = scratch() / "trace.json";
  const fs::path csv = scratch() / "ranking.csv";
  fs::remove(trace);
  fs::remove(csv);
  const Run s = tetrasim("simulate '" + bad.string() + "' --trace '" + trace.string() + "'");
  CHECK(s.code == 1);
  CHECK_FALSE(fs::exists(trace));
  // search ignores [layout]; a zero bandwidth fails it.
  const fs::path bad_search = write("bad_search.toml", scenario_with("bandwidth = \"450GB/s\"", "bandwidth = \"0GB/s\""));
  const Run q = tetrasim("search '" + bad_search.string() + "' --csv '" + csv.string() + "'");
  CAPTURE(q.err);
  CHECK(q.code == 1);
  CHECK_FALSE(fs::exists(csv));
  // An unwritable destination: exit 1 naming the path, no temporary left over.
  const fs::path good = write("good.toml", scenario_with("", ""));
  const fs::path nowhere = scratch() / "no_such_folder" / "trace.json";
  const Run w = tetrasim("simulate '" + good.string() + "' --trace '" + nowhere.string() + "'");
  CAPTURE(w.err);
  CHECK(w.code == 1);
  CHECK(count_lines(w.err) == 1);
  CHECK(w.err.find(nowhere.string()) != std::string::npos);
  // A successful write leaves exactly the file, no temporary beside it.
  const Run ok = tetrasim("simulate '" + good.string() + "' --trace '" + trace.string() + "'");
  CAPTURE(ok.err);
  CHECK(ok.code == 0);
  CHECK(fs::exists(trace));
  for (const auto& e : fs::directory_iterator(scratch())) {
    CHECK(e.path().extension() != ".tmp");
  }
}

/// One line on stderr, exit 1, nothing on stdout, and every piece of `parts` in the line.
void check_refused(const Run& r, std::initializer_list<std::string> parts) {
  CAPTURE(r.err);
  CHECK(r.code == 1);
  CHECK(r.out.empty());
  CHECK(count_lines(r.err) == 1);
  for (const auto& p : parts) CHECK(r.err.find(p) != std::string::npos);
}

TEST_CASE("bad input: an input that never ends (/dev/zero) is read to the limit and refused") {
  check_refused(tetrasim("memory /dev/zero"), {"/dev/zero", "larger than 64 MiB"});
  check_refused(tetrasim("validate /dev/zero"), {"/dev/zero", "larger than 64 MiB"});
  const fs::path good = write("zero_fit.toml", scenario_with("", ""));
  check_refused(tetrasim("simulate '" + good.string() + "' --fit /dev/zero"), {"/dev/zero", "larger than 64 MiB"});
}

TEST_CASE("bad input: an output path that is an input of the command is refused and the input kept") {
  const fs::path sc = write("self.toml", scenario_with("", ""));
  const std::string before = slurp(sc);
  check_refused(tetrasim("simulate '" + sc.string() + "' --trace '" + sc.string() + "'"),
                {sc.string(), "is an input of this command"});
  check_refused(tetrasim("simulate '" + sc.string() + "' --html '" + sc.string() + "'"), {"is an input of this command"});
  CHECK(slurp(sc) == before);
  // Two outputs on one path.
  const fs::path twice = scratch() / "twice.out";
  check_refused(tetrasim("simulate '" + sc.string() + "' --trace '" + twice.string() + "' --html '" + twice.string() + "'"),
                {"named for two outputs"});
  CHECK_FALSE(fs::exists(twice));
}

TEST_CASE("bad input: the outputs of a command are written together, or none of them") {
  const fs::path sc = write("together.toml", scenario_with("", ""));
  const fs::path csv = scratch() / "together.csv";
  fs::remove(csv);
  const fs::path nowhere = scratch() / "no_such_folder" / "page.html";
  const Run r = tetrasim("search '" + sc.string() + "' --csv '" + csv.string() + "' --html '" + nowhere.string() + "'");
  check_refused(r, {nowhere.string(), "cannot write: No such file or directory"});
  CHECK_FALSE(fs::exists(csv));  // the CSV waited for the page, which failed
  for (const auto& e : fs::directory_iterator(scratch())) {
    CHECK(e.path().filename().string().find(".together.csv.") == std::string::npos);  // no temporary left
  }
}

TEST_CASE("bad input: --threads outside 0..4096, an mfu above 1, empty fit and profile files") {
  const fs::path sc = write("threads.toml", scenario_with("", ""));
  check_refused(tetrasim("search '" + sc.string() + "' --threads 1000000000"), {"--threads", "0 (all cores) to 4096"});
  const std::string head = "id,source,model,cluster,n_gpus,tp,cp,pp,vp,mbs,gbs,seq_len,sp,recompute,metric,value\n";
  const fs::path mfu = write("mfu.csv", head + "r1,test,llama3.1-8b,dgx-h100,8,1,1,1,1,1,64,4096,0,none,mfu,55\n");
  check_refused(tetrasim("validate '" + mfu.string() + "'"), {mfu.string() + ":2", "mfu is a fraction of the peak"});
  const fs::path empty = write("empty_fit.toml", "");
  check_refused(tetrasim("simulate '" + sc.string() + "' --fit '" + empty.string() + "'"), {"empty: a fitted file holds"});
  const fs::path profile = write("empty.profile.toml", "");
  const fs::path with_profile =
      write("with_profile.toml", scenario_with("nodes = 1", "nodes = 1\nprofile = \"empty.profile.toml\""));
  check_refused(tetrasim("simulate '" + with_profile.string() + "'"), {"empty.profile.toml", "empty: a profile holds"});
}

TEST_CASE("bad input: a mistyped key gets a suggestion, a search space too large to enumerate is refused") {
  const fs::path typo = write("typo.toml", scenario_with("seq_len = 4096", "seq_len = 4096\ntp_comm_overlapp = true"));
  check_refused(tetrasim("memory '" + typo.string() + "'"), {"tp_comm_overlapp", "did you mean tp_comm_overlap?"});
  std::string sixty;
  for (int i = 1; i <= 60; ++i) sixty += (i > 1 ? ", " : "") + std::to_string(i);
  const fs::path big = write("big_space.toml", scenario_with("[layout]\ntp = 2\npp = 2\nmbs = 1\n", "") +
                                                   "[search]\ntp = [" + sixty + "]\ncp = [" + sixty + "]\npp = [" +
                                                   sixty + "]\nmbs = [" + sixty + "]\n");
  check_refused(tetrasim("search '" + big.string() + "'"), {big.string(), "[search]", "more than 10000000"});
}

TEST_CASE("determinism: JSON output is byte-identical across runs") {
  const fs::path p = write("det.toml", scenario_with("", ""));
  for (const std::string cmd : {"memory", "simulate"}) {
    CAPTURE(cmd);
    const Run a = tetrasim(cmd + " '" + p.string() + "' --json");
    const Run b = tetrasim(cmd + " '" + p.string() + "' --json");
    CHECK(a.code == 0);
    CHECK(a.out == b.out);
    CHECK_FALSE(a.out.empty());
  }
}

TEST_CASE("determinism: search JSON is byte-identical across runs and --threads values") {
  // A small search space keeps this quick.
  std::string text = scenario_with("", "");
  text += "\n[search]\ntp = [1, 2, 4, 8]\ncp = [1, 2]\npp = \"divisors\"\nmbs = [1, 2]\nvp = [1, 2]\n"
          "recompute = [\"none\", \"selective\", \"full\"]\nschedule = [\"1f1b\", \"interleaved\"]\n";
  const fs::path p = write("search.toml", text);
  // "seconds" is the wall time of the search, the one value allowed to differ.
  auto normalized = [](const Run& r) {
    CAPTURE(r.err);
    REQUIRE(r.code == 0);
    nlohmann::json j = nlohmann::json::parse(r.out);
    j.erase("seconds");
    return j.dump(1);
  };
  const std::string one = normalized(tetrasim("search '" + p.string() + "' --json --threads 1"));
  const std::string two = normalized(tetrasim("search '" + p.string() + "' --json --threads 2"));
  const std::string four = normalized(tetrasim("search '" + p.string() + "' --json --threads 4"));
  const std::string again = normalized(tetrasim("search '" + p.string() + "' --json --threads 4"));
  CHECK(one == two);
  CHECK(one == four);
  CHECK(four == again);
  const fs::path c1 = scratch() / "rank1.csv";
  const fs::path c3 = scratch() / "rank3.csv";
  CHECK(tetrasim("search '" + p.string() + "' --threads 1 --csv '" + c1.string() + "'").code == 0);
  CHECK(tetrasim("search '" + p.string() + "' --threads 3 --csv '" + c3.string() + "'").code == 0);
  CHECK(slurp(c1) == slurp(c3));
  CHECK_FALSE(slurp(c1).empty());
}

}  // TEST_SUITE
