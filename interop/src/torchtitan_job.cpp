// torchtitan job TOML -> LaunchConfig. Keys and defaults are those of pytorch/torchtitan
// torchtitan/config/job_config.py (at 238fa99, the last commit with TOML job files).

#include <map>
#include <sstream>
#include <string>

#include <toml++/toml.h>

#include "readers.hpp"
#include "tetra/base/error.hpp"

namespace tetra::interop::detail {
namespace {

SourceLocation where_of(const toml::node& n, const std::string& path) {
  const auto& s = n.source();
  return SourceLocation{path, static_cast<int>(s.begin.line), static_cast<int>(s.begin.column)};
}

// `key = value` with the value as the file spells it (toml++ would reprint 1.5e-4 as
// 0.00014999999999999999).
std::string written(const std::string& key, const toml::node& n, std::string_view text) {
  const auto& s = n.source();
  if (s.begin.line == s.end.line && s.end.column > s.begin.column) {
    std::size_t at = 0;
    for (std::size_t line = 1; line < s.begin.line && at != std::string_view::npos; ++line) {
      at = text.find('\n', at);
      if (at != std::string_view::npos) ++at;
    }
    if (at != std::string_view::npos && at + s.end.column - 1 <= text.size()) {
      return key + " = " + std::string(text.substr(at + s.begin.column - 1, s.end.column - s.begin.column));
    }
  }
  std::ostringstream out;
  out << key << " = ";
  n.visit([&out](const auto& v) { out << v; });
  return out.str();
}

// torchtitan model name and flavor -> the built-in preset of the same network.
const std::map<std::string, std::string, std::less<>>& flavor_presets() {
  static const std::map<std::string, std::string, std::less<>> presets{
      {"llama3/8B", "llama3.1-8b"},           {"llama3/70B", "llama3.1-70b"},
      {"llama3/405B", "llama3.1-405b"},       {"llama4/17bx16e", "llama4-scout"},
      {"llama4/17bx128e", "llama4-maverick"}, {"deepseek_v3/671B", "deepseek-v3"},
      {"qwen3/30B-A3B", "qwen3-30b-a3b"},     {"qwen3/235B-A22B", "qwen3-235b-a22b"},
  };
  return presets;
}

class JobReader {
 public:
  JobReader(const std::string& path, std::string_view text, LaunchConfig& c) : path_(path), text_(text), c_(c) {}

  void read(const toml::table& root) {
    for (const auto& [k, node] : root) {
      const std::string table(k.str());
      if (const toml::table* t = node.as_table()) {
        read_table(table, *t);
      } else {
        c_.not_mapped.push_back(written(table, node, text_));
      }
    }
  }

 private:
  void read_table(const std::string& name, const toml::table& t) {
    for (const auto& [k, node] : t) {
      const std::string key(k.str());
      const std::string full = "[" + name + "]." + key;
      if (const toml::table* sub = node.as_table()) {
        read_table(name + "." + key, *sub);
      } else if (!read_key(name, key, full, node)) {
        c_.not_mapped.push_back(written(full, node, text_));
      }
    }
  }

  Number integer(const std::string& full, const toml::node& n, long long lowest = 1) const {
    const SourceLocation at = where_of(n, path_);
    // Only an integer node is read: toml++'s value<> would cast a float such as 2e21 to an
    // integer first, out of range.
    const toml::value<int64_t>* v = n.as_integer();
    if (v == nullptr) throw UserError(at, full, "is not an integer");
    return parse_number(std::to_string(v->get()), full, at, lowest);
  }
  std::string text(const std::string& full, const toml::node& n) const {
    if (!n.is_string()) throw UserError(where_of(n, path_), full, "is not a string");
    return *n.value<std::string>();
  }
  bool flag(const std::string& full, const toml::node& n) const {
    if (!n.is_boolean()) throw UserError(where_of(n, path_), full, "is not true or false");
    return *n.value<bool>();
  }

  // Sets what key `key` of table `table` says; false when it says nothing tetrasim models.
  bool read_key(const std::string& table, const std::string& key, const std::string& full, const toml::node& n) {
    using Field = std::optional<Number> LaunchConfig::*;
    static const std::map<std::string, Field, std::less<>> numbers{
        {"parallelism.tensor_parallel_degree", &LaunchConfig::tp},
        {"parallelism.pipeline_parallel_degree", &LaunchConfig::pp},
        {"parallelism.context_parallel_degree", &LaunchConfig::cp},
        {"parallelism.expert_parallel_degree", &LaunchConfig::ep},
        {"parallelism.expert_tensor_parallel_degree", &LaunchConfig::etp},
        {"parallelism.data_parallel_replicate_degree", &LaunchConfig::dp_replicate},
        {"parallelism.pipeline_parallel_microbatch_size", &LaunchConfig::mbs},
        {"parallelism.pipeline_parallel_layers_per_stage", &LaunchConfig::layers_per_virtual_stage},
        {"training.local_batch_size", &LaunchConfig::local_batch},
        {"training.batch_size", &LaunchConfig::local_batch},  // its name before local_batch_size
        {"training.seq_len", &LaunchConfig::seq_len},
    };
    const std::string dotted = table + "." + key;
    if (const auto it = numbers.find(dotted); it != numbers.end()) {
      c_.*(it->second) = integer(full, n);
    } else if (dotted == "parallelism.data_parallel_shard_degree") {
      Number v = integer(full, n, -1);  // -1: every GPU the other degrees leave
      if (v.value == 0) throw UserError(v.where, full, "must be positive or -1");
      c_.dp_shard = v;
    } else if (dotted == "training.global_batch_size") {
      Number v = integer(full, n, -1);  // -1 (the default): local batch x data-parallel ranks
      if (v.value > 0) c_.global_batch = v;
    } else if (dotted == "parallelism.enable_async_tensor_parallel") {
      c_.async_tp = flag(full, n);
    } else if (dotted == "parallelism.pipeline_parallel_schedule") {
      static const std::map<std::string, std::string, std::less<>> schedules{
          {"1F1B", "1f1b"}, {"GPipe", "gpipe"}, {"Interleaved1F1B", "interleaved"}};
      const auto it = schedules.find(text(full, n));
      if (it == schedules.end()) return false;
      c_.schedule = it->second;
    } else if (dotted == "activation_checkpoint.mode") {
      const std::string mode = text(full, n);
      if (mode != "none" && mode != "full" && mode != "selective") return false;
      mode_ = mode;
    } else if (dotted == "activation_checkpoint.selective_ac_option") {
      const std::string option = text(full, n);
      if (option != "op") c_.ac_freq = parse_number(option, full, where_of(n, path_));
      selective_op_ = option == "op";
    } else if (dotted == "compile.enable") {
      compile_ = flag(full, n);
    } else if (dotted == "compile.components") {
      return components(full, n);
    } else if (dotted == "model.name" || dotted == "model.flavor") {
      (key == "name" ? name_ : flavor_) = text(full, n);
      c_.model_name = Number{0, "[model]." + key, where_of(n, path_)};
    } else if (dotted == "model.converters") {
      return converters(full, n);
    } else if (dotted == "quantize.linear.float8.recipe_name" || dotted == "float8.recipe_name") {
      const std::string recipe = text(full, n);
      if (recipe != "tensorwise" && recipe != "rowwise") return false;
      c_.fp8_recipe = recipe;
    } else if (dotted == "quantize.linear.float8.enable_fsdp_float8_all_gather") {
      c_.fp8_param_gather = flag(full, n);
    } else {
      return false;
    }
    return true;
  }

  bool components(const std::string& full, const toml::node& n) {
    const toml::array* a = n.as_array();
    if (a == nullptr) throw UserError(where_of(n, path_), full, "is not an array");
    model_compiled_ = false;
    loss_compiled_ = false;
    for (const auto& e : *a) {
      const std::string v = text(full, e);
      model_compiled_ = model_compiled_ || v == "model";
      loss_compiled_ = loss_compiled_ || v == "loss";
    }
    return true;
  }

  bool converters(const std::string& full, const toml::node& n) {
    const toml::array* a = n.as_array();
    if (a == nullptr) throw UserError(where_of(n, path_), full, "is not an array");
    bool all = true;
    for (const auto& e : *a) {
      const std::string v = text(full, e);
      if (v == "float8" || v == "quantize.linear.float8") {
        c_.precision = "fp8";
      } else if (v == "mx" || v == "quantize.linear.mx") {
        c_.precision = "fp8";
        c_.fp8_recipe = "mxfp8";
      } else {
        all = false;
      }
    }
    return all;
  }

 public:
  // What only the whole file decides: the checkpointing policy, compile, the model preset.
  void finish() {
    if (mode_ == "selective") {
      c_.recompute = selective_op_ ? "selective_op" : "selective_layer";
    } else {
      c_.recompute = mode_;
    }
    if (c_.recompute != "selective_layer") c_.ac_freq.reset();
    c_.compile = compile_ && model_compiled_;
    c_.compile_loss = loss_compiled_;
    if (c_.precision == "fp8" && c_.fp8_recipe.empty()) c_.fp8_recipe = "tensorwise";  // torchao's default
    if (c_.precision != "fp8") c_.fp8_param_gather.reset();
    if (!name_.empty() || !flavor_.empty()) {
      const auto it = flavor_presets().find(name_ + "/" + flavor_);
      if (it != flavor_presets().end()) {
        c_.model_preset = it->second;
      } else {
        unknown_model_ = name_ + " flavor " + flavor_;
      }
    }
  }
  std::string unknown_model_;

 private:
  std::string path_;
  std::string_view text_;
  LaunchConfig& c_;
  // torchtitan's defaults: selective checkpointing of every second block, compile off.
  std::string mode_ = "selective";
  bool selective_op_ = false;
  bool compile_ = false;
  bool model_compiled_ = true;
  bool loss_compiled_ = true;
  std::string name_ = "llama3", flavor_ = "debugmodel";
};

}  // namespace

LaunchConfig read_torchtitan(std::string_view text, const std::string& path) {
  LaunchConfig c;
  c.launcher = Launcher::torchtitan;
  c.path = path;
  c.framework = "fsdp";
  c.zero_stage = 3;  // FSDP2 shards weights, gradients and optimizer states
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& s = e.source();
    throw UserError(SourceLocation{path, static_cast<int>(s.begin.line), static_cast<int>(s.begin.column)}, "",
                    std::string(e.description()));
  }
  JobReader reader(path, text, c);
  reader.read(root);
  reader.finish();
  if (!reader.unknown_model_.empty()) {
    c.not_mapped.push_back("[model] " + reader.unknown_model_ + " (no built-in preset)");
  }
  if (c.ac_freq && c.recompute != "selective_layer") c.ac_freq.reset();
  if (c.tp && c.tp->value > 1) c.sp = true;  // torchtitan's tensor parallelism shards the norms too
  return c;
}

}  // namespace tetra::interop::detail
