// The key table: every key the loader accepts is described once, docs/scenario-format.md holds
// that description, and the values the table lists are the ones the loader accepts.

#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tetra/base/error.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/scenarios/keys.hpp"
#include "tetra/scenarios/scenario.hpp"

using namespace tetra::scenarios;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const std::string kBase =
    "[model]\npreset = \"llama2-7b\"\n[cluster]\npreset = \"dgx-a100-80gb\"\nnodes = 1\n"
    "[training]\nseq_len = 2048\nglobal_batch = 8\n";

/// kBase with `line` in [training] (where kBase ends) or in a new [layout].
std::string with_line(std::string_view table, const std::string& line) {
  return kBase + (table == "training" ? "" : "[" + std::string(table) + "]\n") + line;
}

std::string load_error(const std::string& text) {
  try {
    (void)load_scenario_text(text, "t.toml", {}, false);
  } catch (const tetra::UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("scenarios") {

TEST_CASE("key table: one row per key, each with a type, a default and a meaning") {
  std::set<std::string> seen;
  for (const KeyInfo& k : scenario_keys()) {
    const std::string id = std::string(k.table) + "." + std::string(k.name);
    CAPTURE(id);
    CHECK(seen.insert(id).second);
    CHECK(!k.type.empty());
    CHECK(!k.default_value.empty());
    CHECK(!k.meaning.empty());
    CHECK(k.meaning.find('|') == std::string_view::npos);  // would split the Markdown row
  }
  CHECK(key_names("training").size() == 32);
  CHECK(key_names("layout").size() == 25);
  CHECK(key_names("search").size() == 21);
  CHECK(key_names("plan").size() == 8);
}

TEST_CASE("key table: the loader refuses a key the table does not have, naming the known ones") {
  const std::string err = load_error(with_line("training", "bogus_key = 1\n"));
  CHECK(err.find("t.toml:9:1:") == 0);
  CHECK(err.find("bogus_key: unknown key") != std::string::npos);
  std::string known;
  for (auto n : key_names("training")) known += (known.empty() ? "" : ", ") + std::string(n);
  CHECK(err.find("(known keys: " + known + ")") != std::string::npos);
}

TEST_CASE("key table: docs/scenario-format.md holds every key as `tetrasim keys --markdown` writes it") {
  const std::string doc = read_file(std::string(TETRA_SOURCE_DIR) + "/docs/scenario-format.md");
  const std::string begin = "<!-- keys begin: tetrasim keys --markdown -->\n";
  const std::string end = "<!-- keys end -->";
  const auto b = doc.find(begin);
  const auto e = doc.find(end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  // Regenerate with: tetrasim keys --markdown, pasted between the two markers.
  CHECK(doc.substr(b + begin.size(), e - b - begin.size()) == keys_markdown());
  for (const KeyInfo& k : scenario_keys()) {
    CAPTURE(k.name);
    CHECK(doc.find("| `" + std::string(k.name) + "` |") != std::string::npos);
  }
}

TEST_CASE("key table: the names it lists for [training] and [layout] are the names the loader accepts") {
  for (const KeyInfo& k : scenario_keys()) {
    if (k.type != "name" || (k.table != "training" && k.table != "layout")) continue;
    CAPTURE(k.name);
    const std::string extra = k.name == "fp8_recipe" ? "precision = \"fp8\"\n" : "";
    // Every listed value loads (a value may still break a layout rule, never the parse).
    std::string values(k.bounds);
    std::size_t start = 0;
    while (start < values.size()) {
      const std::size_t comma = values.find(", ", start);
      const std::string v = values.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      start = comma == std::string::npos ? values.size() : comma + 2;
      const std::string err = load_error(with_line(k.table, extra + std::string(k.name) + " = \"" + v + "\"\n"));
      CAPTURE(v);
      CHECK(err.find("unknown value") == std::string::npos);
    }
    // And a value not listed is refused.
    const std::string err = load_error(with_line(k.table, extra + std::string(k.name) + " = \"zzz\"\n"));
    CHECK(err.find("unknown value \"zzz\"") != std::string::npos);
  }
}

TEST_CASE("key table: each plain [training] key loads into its member at its bounds and is refused beyond them") {
  // kBase without its own seq_len and global_batch, so each key can be written once.
  const std::string base =
      "[model]\npreset = \"llama2-7b\"\n[cluster]\npreset = \"dgx-a100-80gb\"\nnodes = 1\n[training]\n";
  auto with = [&](std::string_view name, const std::string& value) {
    std::string text = base + std::string(name) + " = " + value + "\n";
    if (name != "seq_len") text += "seq_len = 2048\n";
    if (name != "global_batch") text += "global_batch = 8\n";
    return text;
  };
  auto training_of = [](const std::string& text) { return load_scenario_text(text, "t.toml", {}, false).training; };
  int rows = 0;
#define TRAINING_SWITCH(name, value, needs, meaning, source)                                          \
  {                                                                                                    \
    CAPTURE(#name);                                                                                    \
    ++rows;                                                                                            \
    CHECK(tetra::parallel::Training{}.name == (value));                                                   \
    if (std::string_view(needs).empty()) CHECK(training_of(with(#name, (value) ? "false" : "true")).name == !(value)); \
    CHECK(load_error(with(#name, "1")).find(#name) != std::string::npos);                              \
  }
#define TRAINING_NUMBER(type, name, value, lowest, highest, meaning, source)      \
  {                                                                                \
    CAPTURE(#name);                                                                \
    ++rows;                                                                        \
    CHECK(tetra::parallel::Training{}.name == (value));                               \
    CHECK(training_of(with(#name, #highest)).name == (highest));                  \
    const std::string above = std::to_string(static_cast<long long>(highest) + 1); \
    CHECK(load_error(with(#name, above)).find("t.toml:") == 0);                    \
    CHECK(load_error(with(#name, above)).find(#name) != std::string::npos);        \
  }
#include "tetra/parallel/training_keys.def"
  CHECK(rows == 16);
}

TEST_CASE("key table: a power_limit above the GPU's rated_power is refused at the key") {
  // The A100 SXM4 is rated 400 W; a cap can lower that, not raise it.
  const std::string err = load_error(kBase + "[cluster.gpu]\npower_limit = \"500W\"\n");
  CHECK(err.find("t.toml:10:15:") == 0);
  CHECK(err.find("power_limit") != std::string::npos);
  CHECK(err.find("above the GPU's rated_power (500 W > 400 W)") != std::string::npos);
  CHECK(load_error(kBase + "[cluster.gpu]\npower_limit = \"300W\"\n").empty());
}

}  // TEST_SUITE
