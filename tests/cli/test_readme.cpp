// The README and what the executable says about itself: the annotated scenario that README.md
// embeds is scenarios/quickstart.toml byte for byte and runs; the README stays short; --version
// prints the newest version of CHANGELOG.md; --help covers A100 to GB300 and cites no section
// of a document outside this repository.

#include <doctest/doctest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "support/run_tetrasim.hpp"

namespace fs = std::filesystem;

namespace {

using tetra::test::slurp;

fs::path source_path(const std::string& relative) { return fs::path(TETRA_SOURCE_DIR) / relative; }

/// The text between the README's quickstart marker lines, without the code fence around it;
/// empty when a marker or the fence is missing.
std::string quickstart_block(const std::string& readme) {
  const std::string begin = "<!-- quickstart.toml begin -->\n```toml\n";
  const std::string end = "```\n<!-- quickstart.toml end -->";
  const auto b = readme.find(begin);
  if (b == std::string::npos) return {};
  const auto from = b + begin.size();
  const auto e = readme.find(end, from);
  if (e == std::string::npos) return {};
  return readme.substr(from, e - from);
}

std::size_t count_lines(const std::string& s) {
  std::size_t n = 0;
  for (char c : s) n += c == '\n' ? 1 : 0;
  if (!s.empty() && s.back() != '\n') ++n;
  return n;
}

/// The first version heading of CHANGELOG.md ("## 0.5.0 (unreleased)" gives "0.5.0").
std::string newest_changelog_version() {
  std::istringstream in(slurp(source_path("CHANGELOG.md")));
  const std::regex heading(R"(^## ([0-9]+\.[0-9]+\.[0-9]+)\b.*)");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_match(line, m, heading)) return m[1].str();
  }
  return {};
}

}  // namespace

TEST_SUITE("cli") {

TEST_CASE("readme: the embedded scenario is scenarios/quickstart.toml byte for byte") {
  const std::string readme = slurp(source_path("README.md"));
  const std::string file = slurp(source_path("scenarios/quickstart.toml"));
  REQUIRE_FALSE(file.empty());
  const std::string block = quickstart_block(readme);
  REQUIRE_MESSAGE(!block.empty(), "README.md lacks the quickstart.toml markers and ```toml fence");
  CHECK(block == file);
}

TEST_CASE("readme: the quickstart scenario simulates and searches") {
  const auto sim = tetra::test::run_tetrasim("simulate scenarios/quickstart.toml");
  CAPTURE(sim.err);
  CHECK(sim.code == 0);
  CHECK(sim.out.find("step time") != std::string::npos);
  const auto search = tetra::test::run_tetrasim("search scenarios/quickstart.toml");
  CAPTURE(search.err);
  CHECK(search.code == 0);
  CHECK(search.out.find("rank") != std::string::npos);
}

TEST_CASE("readme: README.md has at most 200 lines") {
  const std::string readme = slurp(source_path("README.md"));
  REQUIRE_FALSE(readme.empty());
  CHECK(count_lines(readme) <= 200);
}

TEST_CASE("readme: --version prints the newest version of CHANGELOG.md") {
  const std::string version = newest_changelog_version();
  REQUIRE_MESSAGE(!version.empty(), "CHANGELOG.md has no '## x.y.z' heading");
  const auto r = tetra::test::run_tetrasim("--version");
  CHECK(r.code == 0);
  CHECK(r.out == "tetrasim " + version + "\n");
}

TEST_CASE("readme: --help names A100 to GB300 and cites no section of an outside document") {
  const auto top = tetra::test::run_tetrasim("--help");
  CHECK(top.code == 0);
  CHECK(top.out.find("A100/H100") == std::string::npos);
  CHECK(top.out.find("GB300") != std::string::npos);
  for (const char* cmd : {"memory", "simulate", "search", "plan", "validate", "fit", "bands",
                          "calibrate", "presets", "keys"}) {
    CAPTURE(cmd);
    const auto r = tetra::test::run_tetrasim(std::string(cmd) + " --help");
    CHECK(r.code == 0);
    // Sections of a document outside this repository are not cited.
    CHECK_FALSE(std::regex_search(r.out, std::regex("section [0-9]")));
  }
}

}  // TEST_SUITE

TEST_CASE("test sources: every test case name reaches ctest whole") {
  // doctest_discover_tests registers each case under its name, and CMake splits lists on
  // ';': a name holding one becomes a filter that matches nothing, and its checks never run.
  const std::regex test_case(R"re(TEST_CASE\("([^"]*)"\))re");
  int cases = 0;
  for (const auto& entry : fs::recursive_directory_iterator(source_path("tests"))) {
    if (entry.path().extension() != ".cpp") continue;
    const std::string text = slurp(entry.path());
    for (std::sregex_iterator it(text.begin(), text.end(), test_case), end; it != end; ++it) {
      ++cases;
      const std::string name = (*it)[1].str();
      CAPTURE(entry.path().string());
      CAPTURE(name);
      CHECK(name.find(';') == std::string::npos);
    }
  }
  CHECK(cases > 400);
}
