// `tetrasim keys`: every key a scenario file takes, with its type, default and meaning.

#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "tetra/scenarios/keys.hpp"

namespace tetra::cli {

namespace {

struct KeysOptions {
  bool json = false;
  bool markdown = false;
  std::string table;
};

int run_keys(const KeysOptions& o) {
  using scenarios::KeyInfo;
  if (o.markdown) {
    std::cout << scenarios::keys_markdown();
    return 0;
  }
  if (o.json) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const KeyInfo& k : scenarios::scenario_keys()) {
      if (!o.table.empty() && k.table != o.table) continue;
      out.push_back({{"table", k.table}, {"key", k.name}, {"type", k.type}, {"default", k.default_value},
                     {"accepted", k.bounds}, {"meaning", k.meaning}, {"source", k.source}});
    }
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  for (const std::string_view table : scenarios::key_tables()) {
    if (!o.table.empty() && table != o.table) continue;
    std::cout << "[" << table << "]\n";
    for (const KeyInfo& k : scenarios::scenario_keys()) {
      if (k.table != table) continue;
      std::cout << "  " << k.name << " (" << k.type << ", default " << k.default_value << "): " << k.meaning
                << "\n";
    }
  }
  return 0;
}

}  // namespace

void register_keys(CLI::App& app, Action& action) {
  auto opts = std::make_shared<KeysOptions>();
  auto* cmd = app.add_subcommand("keys", "list every key a scenario file takes: type, default, meaning");
  cmd->add_option("--table", opts->table, "Only this table (training, layout, search, plan, cluster.gpu, ...)");
  cmd->add_flag("--json", opts->json, "Machine-readable output on stdout");
  cmd->add_flag("--markdown", opts->markdown, "The key reference of docs/scenario-format.md");
  cmd->callback([&action, opts] { action = [opts] { return run_keys(*opts); }; });
}

}  // namespace tetra::cli
