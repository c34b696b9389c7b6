#pragma once
/// The input entry points that libFuzzer drives (tests/fuzz/fuzz_<name>.cpp) and that the
/// regression test replays (tests/properties/test_fuzz_replay.cpp). Each one feeds `input` to
/// one reader; a tetra::UserError with a one-line message is the only allowed failure. Any
/// other exception escapes (and aborts the fuzzer); a malformed error message aborts.

#include <string_view>
#include <vector>

namespace tetra::fuzz {

/// One fuzz target: its name (corpus folder) and its entry point.
struct Target {
  const char* name;
  void (*run)(std::string_view input);
};

/// Scenario TOML (scenarios::load_scenario_text), with and without a required layout.
void scenario(std::string_view input);
/// --layout strings: apply_layout_string, format_layout round trip, and the override applied
/// to a fixed valid scenario.
void layout(std::string_view input);
/// Hugging Face config.json (model::model_from_hf_config_text).
void hf_config(std::string_view input);
/// Measurement CSV (scenarios::read_measurements_text).
void measurements(std::string_view input);
/// Calibration profile TOML (scenarios::parse_profile) and fitted-factor TOML
/// (scenarios::parse_fitted), each with its format/parse round trip.
void profile(std::string_view input);
/// Kineto / Nsight Systems trace JSON (calib::import_trace_text).
void trace(std::string_view input);
/// A trace, plain or gzip, imported with a 16 MiB limit and fitted within the H100 SXM
/// datasheet (calib::fit_bounded): every kept row and every fitted value must be finite and
/// within the datasheet.
void trace_fit(std::string_view input);

/// Megatron-LM arguments (interop::import_scenario with --from megatron and 64 GPUs): the
/// shell reader and the flag mapping, then the scenario written must load.
void import_megatron(std::string_view input);
/// torchtitan job TOML (interop::import_scenario with --from torchtitan and 64 GPUs), then the
/// scenario written must load.
void import_torchtitan(std::string_view input);
/// Megatron-Bridge / NeMo launcher YAML (interop::import_scenario with --from nemo and 64 GPUs):
/// the bounded libyaml reader and the key mapping, then the scenario written must load.
void import_nemo(std::string_view input);

/// Every target, in a fixed order.
[[nodiscard]] const std::vector<Target>& targets();

}  // namespace tetra::fuzz
