#pragma once
/// The energy of a training run (`tetrasim plan`): its GPUs at their power under training load
/// for the run's wall time, times the data centre's PUE. Pure functions.
///
///   E = GPUs × P_gpu × hours × PUE
///
/// P_gpu is the board power the GPU is held to: its power limit, or its rated power (the
/// datasheets presets.cpp cites: A100 SXM 400 W, H100 / H200 SXM 700 W, B200 1000 W, B300
/// 1100 W, GB200 1200 W, GB300 1400 W). Training holds GPUs there: the peak power across GPUs
/// in LLM training iterations reaches or exceeds their TDP (Patel et al., "Characterizing Power
/// Management Opportunities for LLMs in the Cloud", ASPLOS 2024, doi 10.1145/3620666.3651329),
/// and Meta counts the energy of its Llama 3.1 training the same way, GPU-hours times "the
/// peak power capacity per GPU device used", 700 W for the H100 (`meta-llama/llama-models:
/// models/llama3_1/MODEL_CARD.md`, "Training Energy Use").
/// Only the GPUs are counted, not the CPUs, memory, NICs, switches and fans of the nodes: an
/// 8x H100 HGX node training Llama-2-13B peaked at 8.4 kW (Latif et al., "Empirical
/// Measurements of AI Training Power Demand on a GPU-Accelerated Node", arXiv 2412.08602),
/// where its GPUs at 700 W account for 5.6 kW. The hours are the run's wall time, restarts and
/// checkpoint writes included, all at training power.

#include "tetra/hw/cluster.hpp"

namespace tetra::plan {

/// Power usage effectiveness, facility energy over IT energy: 1.56, the average annual PUE
/// operators reported for their largest data centre in the Uptime Institute Global Data Center
/// Survey 2024 (1.55 to 1.59 since 2020; new large facilities reach 1.3 or better).
inline constexpr double kDefaultPue = 1.56;
/// The range [plan] pue accepts.
inline constexpr double kMinPue = 1.0;
inline constexpr double kMaxPue = 3.0;

/// Watts a GPU draws under training load: power_limit_w when set, else rated_power_w; 0 when
/// neither is known (a cluster file without rated_power).
[[nodiscard]] double training_power_w(const hw::Gpu& gpu) noexcept;

/// E in megawatt-hours for `gpus` GPUs drawing `gpu_power_w` each for `hours` in a facility
/// of `pue`. Preconditions: all arguments ≥ 0.
[[nodiscard]] double energy_mwh(double gpus, double gpu_power_w, double hours, double pue) noexcept;

}  // namespace tetra::plan
