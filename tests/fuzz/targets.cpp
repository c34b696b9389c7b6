#include "targets.hpp"

// Relative paths in fuzzed inputs (model TOML files, hf_config, profiles) resolve here.
#ifndef TETRA_FUZZ_DATA_DIR
#define TETRA_FUZZ_DATA_DIR "."
#endif

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tetra/calib/bounded_fit.hpp"
#include "tetra/interop/import.hpp"
#include "tetra/calib/curve_fit.hpp"
#include "tetra/calib/trace_import.hpp"
#include "tetra/costmodel/builtin_profiles.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/base/error.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/model/presets.hpp"
#include "tetra/scenarios/measurements.hpp"
#include "tetra/scenarios/plan.hpp"
#include "tetra/scenarios/profile_io.hpp"
#include "tetra/scenarios/scenario.hpp"
#include "tetra/sim/simulator.hpp"

namespace tetra::fuzz {
namespace {

[[noreturn]] void die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz invariant broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

/// A user error must be one non-empty line.
void check_message(const UserError& e) {
  const std::string msg = e.what();
  if (msg.empty()) die("empty error message", msg);
  if (msg.find('\n') != std::string::npos || msg.find('\r') != std::string::npos) {
    die("error message spans lines", msg);
  }
}

template <class F>
void guarded(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    check_message(e);
  }
}

constexpr std::string_view kBaseScenario = R"([model]
preset = "llama3.1-8b"
[cluster]
preset = "dgx-h100"
nodes = 2
[training]
seq_len = 4096
global_batch = 64
[layout]
tp = 2
pp = 2
)";

/// A loaded scenario must give finite, non-negative memory numbers, and (when the step is
/// small enough to simulate quickly) a finite positive step time.
void check_models(const scenarios::Scenario& sc) {
  if (!sc.has_layout) return;
  const costmodel::MemoryReport m = costmodel::estimate_memory(sc.model, sc.cluster, sc.training, sc.layout);
  if (!std::isfinite(m.peak_bytes) || m.peak_bytes < 0) die("memory peak", std::to_string(m.peak_bytes));
  for (const auto& st : m.stages) {
    if (!std::isfinite(st.reserved_bytes) || st.reserved_bytes < 0) {
      die("stage memory", std::to_string(st.reserved_bytes));
    }
  }
  const double steps = static_cast<double>(parallel::micro_batches(sc.layout, sc.training)) * sc.layout.pp *
                       sc.layout.vp;
  const long long chunks = static_cast<long long>(sc.layout.pp) * sc.layout.vp;
  const long long inner = static_cast<long long>(sc.layout.tp) * sc.layout.cp;
  if (steps > 4096 || chunks > 256 || inner > 4096) return;
  const costmodel::CostParams costs = costmodel::cost_params(sc.cluster, sc.profile ? &*sc.profile : nullptr);
  const sim::Result r = sim::simulate(sim::sim_input(sc.model, sc.cluster, sc.training, sc.layout, costs));
  if (!std::isfinite(r.step_time_s) || r.step_time_s <= 0) die("step time", std::to_string(r.step_time_s));
}

}  // namespace

void scenario(std::string_view input) {
  guarded([&] {
    const scenarios::Scenario sc = scenarios::load_scenario_text(input, TETRA_FUZZ_DATA_DIR "/fuzz.toml");
    check_models(sc);
  });
  guarded([&] { (void)scenarios::load_scenario_text(input, "fuzz.toml", {}, false); });
  guarded([&] { (void)scenarios::load_plan_scenario_text(input, TETRA_FUZZ_DATA_DIR "/fuzz.toml"); });
}

void layout(std::string_view input) {
  guarded([&] {
    parallel::Layout l;
    scenarios::apply_layout_string(l, input, "--layout");
    const std::string text = scenarios::format_layout(l);
    parallel::Layout back;
    scenarios::apply_layout_string(back, text, "format_layout");
    if (scenarios::format_layout(back) != text) die("format_layout round trip", text);
  });
  guarded([&] { check_models(scenarios::load_scenario_text(kBaseScenario, "base.toml", input)); });
}

void hf_config(std::string_view input) {
  guarded([&] { (void)model::model_from_hf_config_text(input, "config.json"); });
}

void measurements(std::string_view input) {
  guarded([&] { (void)scenarios::read_measurements_text(input, TETRA_FUZZ_DATA_DIR "/fuzz.csv"); });
}

void profile(std::string_view input) {
  guarded([&] {
    const costmodel::Profile p = scenarios::parse_profile(input, "fuzz_profile.toml");
    const std::string text = scenarios::format_profile(p);
    const costmodel::Profile back = scenarios::parse_profile(text, "formatted.toml");
    if (scenarios::format_profile(back) != text) die("format_profile round trip", text);
  });
  guarded([&] {
    const fit::FitSummary f = scenarios::parse_fitted(input, "fuzz_fitted.toml");
    const std::string text = scenarios::format_fitted(f);
    const fit::FitSummary back = scenarios::parse_fitted(text, "formatted.toml");
    if (scenarios::format_fitted(back) != text) die("format_fitted round trip", text);
  });
}

void trace(std::string_view input) {
  guarded([&] { (void)calib::import_trace_text(input, "trace.json"); });
}

void trace_fit(std::string_view input) {
  guarded([&] {
    calib::TraceImportOptions options;
    options.max_bytes = std::size_t{16} << 20;
    const calib::TraceImport imp = calib::import_trace_text(input, "trace.json.gz", options);
    static const calib::DeviceSpec dev = *calib::find_device("h100-sxm");
    const calib::BoundedFit b = calib::fit_bounded(imp.profile, dev);
    const auto& p = b.profile;
    auto bounded = [](double v, double limit) { return std::isfinite(v) && v >= 0 && v <= limit; };
    for (const auto& r : p.gemm) {
      const double flops = 2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k);
      if (!bounded(flops / r.seconds, calib::peak_flops(dev, r.dtype))) die("gemm row above its peak", r.dtype);
    }
    for (const auto& r : p.memory_bound) {
      if (!bounded(r.bytes / r.seconds, dev.hbm_Bps)) die("memory row above HBM", r.kernel);
    }
    for (const auto& r : p.attention) {
      if (!bounded(calib::attention_flops(r) / r.seconds, dev.bf16_flops)) die("attention row above peak", "");
    }
    const auto& f = p.fit;
    if (!bounded(f.gemm_peak_flops, dev.bf16_flops) || !bounded(f.hbm_Bps, dev.hbm_Bps) ||
        !bounded(f.attention_fwd_flops, dev.bf16_flops) || !bounded(f.attention_bwd_flops, dev.bf16_flops)) {
      die("fit above the datasheet", calib::describe_reports(b.tables));
    }
    for (const auto& c : f.collectives) {
      if (!bounded(c.busbw_Bps, dev.link_Bps)) die("collective fit above the link", c.op);
    }
  });
}

// An imported scenario that does not load is a UserError of the importer's making only when
// the layout breaks a rule; anything else it writes must be valid TOML with known keys.
void import_as(std::string_view input, interop::Launcher launcher) {
  guarded([&] {
    interop::ImportOptions o;
    o.from = launcher;
    o.gpus = 64;
    const std::string toml = interop::import_scenario(input, "fuzz.cfg", o);
    try {
      (void)scenarios::load_scenario_text(toml, "imported.toml");
    } catch (const UserError& e) {
      check_message(e);
      if (e.key().rfind("[layout]", 0) != 0 && e.key().rfind("[training]", 0) != 0 && e.key().rfind("[model]", 0) != 0) {
        die("imported scenario does not load", e.what());
      }
    }
  });
}

void import_megatron(std::string_view input) { import_as(input, interop::Launcher::megatron); }
void import_torchtitan(std::string_view input) { import_as(input, interop::Launcher::torchtitan); }
void import_nemo(std::string_view input) { import_as(input, interop::Launcher::nemo); }

const std::vector<Target>& targets() {
  static const std::vector<Target> all{{"scenario", &scenario},
                                       {"layout", &layout},
                                       {"hf_config", &hf_config},
                                       {"measurements", &measurements},
                                       {"profile", &profile},
                                       {"trace", &trace},
                                       {"trace_fit", &trace_fit},
                                       {"import_megatron", &import_megatron},
                                       {"import_torchtitan", &import_torchtitan},
                                       {"import_nemo", &import_nemo}};
  return all;
}

}  // namespace tetra::fuzz
