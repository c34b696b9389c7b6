#pragma once
/// Time a training job loses to failures and checkpoints (`tetrasim plan`): the expected
/// goodput of a synchronous job of N GPUs that writes a checkpoint every τ seconds of
/// training and restarts from the last one after each failure. Pure functions.
///
/// Model (first order in δ/M and τ/M, failures a Poisson process):
///   M = 1 / (λ · N)                    mean time between failures of the whole job, with λ
///                                      the failures per GPU-hour
///   δ = checkpoint bytes / bandwidth   time to write one checkpoint (training stops)
///   τ = sqrt(2 · δ · M)                Young's optimum interval (J. W. Young, "A first order
///                                      approximation to the optimum checkpoint interval",
///                                      CACM 17(9):530-531, 1974; J. T. Daly, "A higher order
///                                      estimate of the optimum checkpoint interval for
///                                      restart dumps", FGCS 22(3):303-312, 2006, whose
///                                      first-order term it is)
///   each failure costs R + (τ + δ)/2   the restart, and on average half a segment of work
///                                      since the last checkpoint (Daly 2006's first-order
///                                      wall-time model)
///   wall = train · (1 + δ/τ) / (1 − (R + (τ + δ)/2) / M)
///   goodput = train / wall
/// so the lost time is the checkpoint writes plus, per failure, the restart and the rework.

#include <cstdint>

namespace tetra::plan {

/// Llama 3's 405B pre-training: 419 unexpected interruptions in a 54-day snapshot on up to
/// 16,384 H100 (Dubey et al., "The Llama 3 Herd of Models", arXiv 2407.21783, §3.3.4; 466
/// interruptions in all, 47 of them planned maintenance). 419 / (54 · 24 · 16,384) =
/// 1.973e-5 failures per GPU-hour, a job MTBF of 3.09 h at 16,384 GPUs. A floor on the rate:
/// the job did not use all 16,384 GPUs for the whole snapshot.
inline constexpr double kLlama3Interruptions = 419;
inline constexpr double kLlama3SnapshotDays = 54;
inline constexpr double kLlama3Gpus = 16384;
inline constexpr double kDefaultFailuresPerGpuHour =
    kLlama3Interruptions / (kLlama3SnapshotDays * 24.0 * kLlama3Gpus);

/// Llama 3's checkpoint storage, Meta's Tectonic file system: 2 TB/s sustained, 7 TB/s peak
/// (arXiv 2407.21783, §3.3.1 "Storage"). The sustained figure, bytes per second.
inline constexpr double kDefaultCheckpointBandwidth_Bps = 2e12;

/// Restart after a failure: reschedule on healthy nodes, start the processes, initialise
/// NCCL, read the checkpoint back. [assumed] 10 minutes: Llama 3 (§3.3.4) reports the
/// interruptions and an effective training time above 90 % but not the restart time.
inline constexpr double kDefaultRestart_s = 600;

/// The keys of [plan] that set the model (defaults above).
struct GoodputParams {
  double failures_per_gpu_hour = kDefaultFailuresPerGpuHour;  ///< λ, ≥ 0
  double checkpoint_bandwidth_Bps = kDefaultCheckpointBandwidth_Bps;  ///< > 0
  double restart_s = kDefaultRestart_s;                        ///< R, ≥ 0
};

/// The outcome for one job size.
struct Goodput {
  double checkpoint_bytes = 0;   ///< what one checkpoint writes
  double checkpoint_write_s = 0; ///< δ
  double mtbf_s = 0;             ///< M; +inf without failures
  double interval_s = 0;         ///< τ, training seconds between checkpoints; +inf without failures
  double checkpoint_fraction = 0;  ///< δ/τ: checkpoint writes per second of training
  double failure_fraction = 0;   ///< (R + (τ + δ)/2) / M: wall time lost per wall second
  double goodput = 1;            ///< training / wall time, in [0, 1]; 0 when failures come
                                 ///< faster than the job can recover (it never finishes)
};

/// The model above for `gpus` GPUs. Preconditions: gpus ≥ 1, checkpoint_bytes ≥ 0,
/// params as documented. λ = 0 gives M = τ = +inf, no checkpoints and goodput 1.
[[nodiscard]] Goodput goodput(std::int64_t gpus, double checkpoint_bytes,
                              const GoodputParams& params) noexcept;

}  // namespace tetra::plan
