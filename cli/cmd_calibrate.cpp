// tetrasim calibrate [--out PROFILE] [--gemm] [--attention] [--memory] [--nccl] [--quick] [--host]
//                    [--import-trace FILE[,FILE...] [--gpu NAME] [--other-gpu] [--ranks-per-node N]]
//                    [--tables FILE] [--sms N] [--json]
// Measures this node (or a job of nodes under mpirun / srun), or takes the rows from a trace
// of a real run or from recorded tables, fits them and writes a calibration profile
// (docs/calibration.md). Without a GPU the measuring path says so on one line and exits 1.
// --host measures the host memory rates a data loader's worker moves (no GPU needed) and
// prints them as a scenario's [cluster.host] table.

#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "output.hpp"
#include "tetra/calib/bounded_fit.hpp"
#include "tetra/calib/curve_fit.hpp"
#include "tetra/calib/host_rates.hpp"
#include "tetra/calib/rank_merge.hpp"
#include "tetra/calib/runner.hpp"
#include "tetra/calib/tables.hpp"
#include "tetra/calib/trace_import.hpp"
#include "tetra/base/error.hpp"
#include "tetra/scenarios/profile_io.hpp"

namespace tetra::cli {

namespace {

struct CalibrateArgs {
  std::string out = "tetrasim.profile.toml";
  bool gemm = false, attention = false, memory = false, nccl = false, quick = false, json = false;
  bool host = false;
  std::vector<std::string> import_trace;  // one trace, or the traces of the ranks of one run
  std::string tables;
  std::string gpu;
  bool other_gpu = false;
  int sms = 0;
  int ranks_per_node = 0;
};

nlohmann::json reports_json(const std::vector<calib::TableReport>& tables) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& t : tables) {
    j.push_back({{"table", t.table},
                 {"rows", t.rows},
                 {"kept", t.kept},
                 {"fitted", t.fitted},
                 {"fitted_rows", t.fitted_rows},
                 {"dropped", t.dropped},
                 {"unfitted", t.unfitted},
                 {"notes", t.notes}});
  }
  return j;
}

/// The datasheet a trace's rows are bounded by: the GPU the trace names, or --gpu where it
/// names none (or one without a datasheet). A trace of one known GPU is not turned into a
/// profile for another unless --other-gpu says so. Errors name the trace file.
calib::DeviceSpec trace_device(const CalibrateArgs& args, const std::string& path, costmodel::Profile& profile) {
  const std::string recorded = profile.meta.gpu;
  const auto from_trace = recorded.empty() ? std::nullopt : calib::find_device(recorded, profile.meta.device_memory_bytes);
  if (!args.gpu.empty()) {
    const auto wanted = calib::find_device(args.gpu);
    if (!wanted) {
      throw UserError("calibrate: --gpu " + args.gpu + ": no datasheet for that GPU (known: " + calib::known_devices() + ")");
    }
    if (from_trace && !calib::same_device(from_trace->key, wanted->key)) {
      if (!args.other_gpu) {
        throw UserError(path + ": recorded on " + recorded + " (" + from_trace->key + "), not " + wanted->key +
                        "; give --other-gpu to make a profile for another GPU from it");
      }
      profile.meta.source += " (recorded on " + recorded + ", for " + wanted->key + ")";
      return *from_trace;  // the rows obey the physics of the GPU that ran them
    }
    if (recorded.empty() || !from_trace) {
      profile.meta.gpu = recorded.empty() ? wanted->key : recorded + " (" + wanted->key + ")";
    }
    return *wanted;
  }
  if (recorded.empty()) {
    throw UserError(path + ": the trace does not name its GPU (no deviceProperties); give --gpu NAME (known: " +
                    calib::known_devices() + ")");
  }
  if (!from_trace) {
    throw UserError(path + ": no datasheet for the trace's GPU \"" + recorded + "\" to bound the fits; give --gpu NAME (known: " +
                    calib::known_devices() + ")");
  }
  return *from_trace;
}

nlohmann::json rows_json(const costmodel::Profile& p) {
  return {{"gemm", p.gemm.size()},
          {"attention", p.attention.size()},
          {"memory_bound", p.memory_bound.size()},
          {"collective", p.collective.size()}};
}

nlohmann::json fit_json(const costmodel::ProfileFit& f) {
  nlohmann::json j;
  j["gemm_peak_flops"] = f.gemm_peak_flops;
  j["gemm_launch_s"] = f.gemm_launch_s;
  j["gemm_wave_s"] = f.gemm_wave_s;
  j["attention_fwd_flops"] = f.attention_fwd_flops;
  j["attention_bwd_flops"] = f.attention_bwd_flops;
  j["hbm_Bps"] = f.hbm_Bps;
  j["kernel_launch_s"] = f.kernel_launch_s;
  j["collectives"] = nlohmann::json::array();
  for (const auto& c : f.collectives) {
    j["collectives"].push_back({{"op", c.op},
                                {"ranks", c.ranks},
                                {"ranks_per_node", c.ranks_per_node},
                                {"latency_s", c.latency_s},
                                {"busbw_Bps", c.busbw_Bps}});
  }
  return j;
}

/// What the merge of the ranks' traces did: ranks, clock offsets, instances.
nlohmann::json merge_json(const calib::RankMerge& m) {
  nlohmann::json traces = nlohmann::json::array();
  for (const auto& t : m.traces) {
    traces.push_back({{"path", t.path},
                      {"rank", t.rank},
                      {"rank_from", t.rank_from_trace ? "distributedInfo" : "position"},
                      {"clock_offset_us", t.clock_offset_us},
                      {"nccl_kernels", t.nccl_kernels}});
  }
  return {{"traces", traces},
          {"world_size", m.world_size},
          {"instances", m.instances.size()},
          {"instances_with_rows", m.instances_with_rows},
          {"instances_whole_group", m.instances_whole_group},
          {"median_end_spread_us", m.median_end_spread_s * 1e6}};
}

/// The text lines of the merge: which trace is which rank, how the clocks were aligned.
std::string merge_text(const calib::RankMerge& m) {
  std::string s = "ranks: " + std::to_string(m.traces.size()) + " traces" +
                  (m.world_size > 0 ? " of world size " + std::to_string(m.world_size) : std::string()) + "\n";
  char buf[200];
  for (const auto& t : m.traces) {
    std::snprintf(buf, sizeof buf, "  rank %d (%s) ", t.rank, t.rank_from_trace ? "distributedInfo" : "order given");
    s += buf + t.path + ": " + std::to_string(t.nccl_kernels) + " NCCL kernels, ";
    if (&t == &m.traces.front()) {
      s += "the clock reference\n";
    } else {
      std::snprintf(buf, sizeof buf, "clock %+.3f ms against rank %d\n", t.clock_offset_us * 1e-3,
                    m.traces.front().rank);
      s += buf;
    }
  }
  std::snprintf(buf, sizeof buf,
                "collectives: %zu instances matched across the traces, %d with sizes, %d traced on every rank of "
                "their group; aligned ends within %.1f us (median)\n",
                m.instances.size(), m.instances_with_rows, m.instances_whole_group, m.median_end_spread_s * 1e6);
  return s + buf;
}

/// --import-trace: one trace, or the ranks of one run merged; the rows bounded by the datasheet
/// of their GPU. Fills the report, the table reports, `device` (the datasheet) and `lines`
/// (the text summary's lines on ranks).
costmodel::Profile import_profile(const CalibrateArgs& args, nlohmann::json& report,
                                  std::vector<calib::TableReport>& tables, std::string& device, std::string& lines) {
  calib::TraceImportOptions options;
  options.ranks_per_node = args.ranks_per_node;
  calib::TraceImport imp;
  std::optional<calib::RankMerge> merge;
  std::string path = args.import_trace.front();  // the trace errors about the GPU name
  if (args.import_trace.size() == 1) {
    imp = calib::import_trace(path, options);
  } else {
    auto merged = calib::import_rank_traces(args.import_trace, options);
    imp = std::move(merged.import);
    merge = std::move(merged.merge);
    if (!merge->gpu_trace.empty()) path = merge->gpu_trace;
  }
  if (args.sms > 0) imp.profile.meta.sms = args.sms;
  const calib::DeviceSpec dev = trace_device(args, path, imp.profile);
  device = dev.key;
  calib::BoundedFitOptions fit_options;
  fit_options.merged_ranks = merge ? static_cast<int>(merge->traces.size()) : 0;
  auto bounded = calib::fit_bounded(imp.profile, dev, fit_options);
  tables = std::move(bounded.tables);
  report["kernels"] = imp.kernels;
  report["used"] = imp.used;
  report["skipped"] = imp.skipped;  // std::map: sorted keys
  report["linked_by_external_id"] = imp.linked_by_external_id;
  report["linked_by_time"] = imp.linked_by_time;
  report["gemm_kernels"] = imp.gemm_kernels;
  report["gemm_kernels_used"] = imp.gemm_kernels_used;
  report["assumed_bf16"] = imp.assumed_bf16;
  report["ranks_per_node"] = imp.ranks_per_node;
  report["ranks_per_node_from"] = imp.ranks_per_node_from.empty() ? "group size" : imp.ranks_per_node_from;
  if (merge) {
    report["merge"] = merge_json(*merge);
    lines += merge_text(*merge);
  }
  // Ranks per node shape only collective rows: said where there are some.
  if (merge || !imp.profile.collective.empty()) {
    lines += "ranks per node: " +
             (imp.ranks_per_node > 0
                  ? std::to_string(imp.ranks_per_node) + " (" + imp.ranks_per_node_from + ")"
                  : std::string("not in the traces' metadata: each group taken as one node (--ranks-per-node N)")) +
             "\n";
  }
  const auto& p = bounded.profile;
  if (p.gemm.empty() && p.attention.empty() && p.memory_bound.empty() && p.collective.empty()) {
    std::string why, files;
    for (const auto& t : tables) why += (why.empty() ? "" : ", ") + t.table + " " + std::to_string(t.rows) + " found";
    for (const auto& f : args.import_trace) files += (files.empty() ? "" : ", ") + f;
    throw UserError(files + ": no usable rows within the " + dev.key + " datasheet (" + why + ")");
  }
  return std::move(bounded.profile);
}

/// --host: the fastest of five passes over 512 MiB, as a scenario's [cluster.host] table.
int run_host_calibration(const CalibrateArgs& args) {
  const calib::HostRates r = calib::measure_host_rates(std::size_t{512} << 20, 5);
  if (args.json) {
    print_json({{"first_touch_bandwidth_Bps", std::round(r.first_touch_Bps)},
                {"copy_bandwidth_Bps", std::round(r.copy_Bps)}});
  } else {
    std::cout << "[cluster.host]\n"
              << "first_touch_bandwidth = \"" << fixed(r.first_touch_Bps / 1e9, 2) << "GB/s\"\n"
              << "copy_bandwidth = \"" << fixed(r.copy_Bps / 1e9, 2) << "GB/s\"\n";
  }
  return 0;
}

int run_calibrate(const CalibrateArgs& args) {
  if (args.host) return run_host_calibration(args);
  if (!args.import_trace.empty() && !args.tables.empty()) {
    throw UserError("calibrate: give either --import-trace or --tables, not both");
  }
  costmodel::Profile profile;
  nlohmann::json report;
  std::vector<calib::TableReport> tables;
  std::string device, trace_lines;
  if (!args.import_trace.empty()) {
    profile = import_profile(args, report, tables, device, trace_lines);
  } else {
    if (!args.tables.empty()) {
      profile = calib::read_tables_csv(args.tables);
    } else {
      calib::CalibrationOptions options;
      const bool any = args.gemm || args.attention || args.memory || args.nccl;
      options.gemm = !any || args.gemm;
      options.attention = !any || args.attention;
      options.memory = !any || args.memory;
      options.nccl = !any || args.nccl;
      options.quick = args.quick;
      options.progress = [](const std::string& line) { std::cerr << "calibrate: " << line << '\n'; };
      const int rank = calib::run_calibration(options, profile);
      if (rank != 0) return 0;  // rank 0 holds every row and writes the profile
    }
    if (profile.gemm.empty() && profile.attention.empty() && profile.memory_bound.empty() &&
        profile.collective.empty()) {
      throw UserError("calibrate: nothing to fit: no usable row was measured or found");
    }
    calib::ProfileFitOptions fit_options;
    fit_options.sms = args.sms;
    profile.fit = calib::fit_profile(profile, fit_options);
  }
  write_file_atomic(args.out, scenarios::format_profile(profile));

  if (args.json) {
    report["out"] = args.out;
    report["gpu"] = profile.meta.gpu;
    report["source"] = profile.meta.source;
    report["rows"] = rows_json(profile);
    report["fit"] = fit_json(profile.fit);
    if (!device.empty()) {
      report["device"] = device;
      report["tables"] = reports_json(tables);
    }
    print_json(report);
  } else {
    std::cout << "wrote " << args.out << ": " << profile.gemm.size() << " gemm, " << profile.attention.size()
              << " attention, " << profile.memory_bound.size() << " memory-bound, " << profile.collective.size()
              << " collective rows\n";
    if (!device.empty()) {
      std::cout << "trace: " << report["kernels"].get<int>() << " kernels, " << report["used"].get<int>()
                << " used; linked to their op by External id " << report["linked_by_external_id"].get<int>()
                << ", by the op enclosing the launch " << report["linked_by_time"].get<int>() << "; bounded by the "
                << device << " datasheet\n";
      if (const int n = report["assumed_bf16"].get<int>(); n > 0) {
        std::cout << "  " << n << " used kernels taken as bf16: their NVTX ranges carry no types\n";
      }
      for (const auto& [why, n] : report["skipped"].items()) std::cout << "  skipped " << n.get<int>() << ": " << why << "\n";
      std::cout << trace_lines;
      std::cout << calib::describe_reports(tables);
    } else {
      std::cout << calib::describe_fit(profile.fit);
    }
  }
  return 0;
}

}  // namespace

void register_calibrate(CLI::App& app, Action& action) {
  auto args = std::make_shared<CalibrateArgs>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "measure this GPU node (GEMM, attention, memory-bound kernels, NCCL) and write a calibration profile; "
      "under mpirun/srun also across nodes");
  cmd->add_option("--out", args->out, "profile file to write (TOML, docs/calibration.md)");
  cmd->add_flag("--gemm", args->gemm, "cuBLASLt bf16 GEMM sweep (layer op-list shapes, square shapes)");
  cmd->add_flag("--attention", args->attention, "cuDNN fused attention, forward and backward");
  cmd->add_flag("--memory", args->memory, "memory-bound kernels: copy, RMSNorm, SwiGLU, RoPE, Adam, cross entropy");
  cmd->add_flag("--nccl", args->nccl, "NCCL sweeps 8 B .. 8 GiB over the job's process groups");
  cmd->add_flag("--quick", args->quick, "reduced sweep (under 2 minutes on one 8-GPU node)");
  auto* import = cmd->add_option("--import-trace", args->import_trace,
                                 "take kernel times from a torch.profiler (Kineto) or Nsight Systems JSON trace; "
                                 "no GPU needed. Several (repeated or comma-separated): the ranks of one run, each "
                                 "collective timed from its last arriving rank")
                     ->delimiter(',');
  cmd->add_option("--gpu", args->gpu,
                  "with --import-trace: the GPU whose datasheet bounds the fits, when the trace does not name it "
                  "(a100-sxm-80gb, h100-sxm, h200, b200, mi300x, ...)");
  cmd->add_flag("--other-gpu", args->other_gpu,
                "with --import-trace --gpu: accept a trace recorded on a GPU other than --gpu");
  cmd->add_option("--tables", args->tables, "fit recorded tables (CSV, calib/README.md) instead of measuring");
  cmd->add_option("--ranks-per-node", args->ranks_per_node,
                  "with --import-trace: ranks per node of the traced job, when the trace's metadata does not say")
      ->check(CLI::Range(1, 1024))
      ->needs(import);
  cmd->add_option("--sms", args->sms, "SM count for the GEMM fit when the source does not say")->check(CLI::Range(1, 100000));
  auto* host = cmd->add_flag("--host", args->host,
                              "measure this host's memory rates for a data loader's worker (no GPU needed) and print "
                              "them as a [cluster.host] table");
  host->excludes(import)->excludes("--tables")->excludes("--gemm")->excludes("--attention")->excludes("--memory")
      ->excludes("--nccl")->excludes("--quick")->excludes("--out")->excludes("--sms");
  cmd->add_flag("--json", args->json, "print the summary as JSON");
  cmd->callback([args, &action] { action = [args] { return run_calibrate(*args); }; });
}

}  // namespace tetra::cli
