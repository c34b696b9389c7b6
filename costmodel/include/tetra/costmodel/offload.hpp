#pragma once
/// The time activation offloading costs (Layout::offload_layers; its memory is in memory.cpp).
/// Transformer Engine's `AsyncDoubleBufferGroupOffloadHandler`
/// (`transformer_engine/pytorch/cpu_offload.py`, v2.8), which Megatron-Core's
/// `cpu_offloading_num_layers` drives, copies the saved tensors of the first N of a rank's L
/// layers to host memory on a stream of its own while the later layers compute, and copies them
/// back, one layer ahead, while backward runs. The compute stream waits for each copy at fixed
/// layers (`layer_window_map`): a copy the layers between two of them cannot hide is exposed.

#include <vector>

#include "tetra/hw/cluster.hpp"

namespace tetra::costmodel {

/// Share of the link's line rate a pinned host copy achieves: `nvbandwidth` on a PCIe Gen5 x16
/// H200 node copies 55.43 GB/s host to device and 55.06 GB/s device to host
/// (stas00/ml-engineering `network/README.md`), 0.86 of the 64 GB/s per direction of Gen5 x16;
/// taken for every link [assumed for Gen4 and NVLink-C2C].
inline constexpr double kHostCopyShare = 55.06 / 64.0;

/// Bytes per second one copy between the GPU and host memory moves, per direction; 0 when the
/// GPU's host link is unknown.
[[nodiscard]] double host_copy_Bps(const hw::Gpu& gpu) noexcept;

/// The layer after whose forward the compute stream waits for offload group i, for
/// i = 0..groups-1 (`layer_window_map`): ⌊L/N⌋ (i+1) − 1 + min(i+1, L mod N). Empty unless
/// 0 < groups <= layers.
[[nodiscard]] std::vector<int> offload_windows(int layers, int groups);

/// Exposed seconds of one micro-batch's forward and backward on a rank of `layers` layers that
/// offloads `groups` of them, `bytes_per_layer` each, over a copy rate `copy_Bps`, when one
/// layer's forward takes `layer_forward_s` and its backward `layer_backward_s`. Forward: group
/// k's copy to the host starts once the wait for group k−1 is over (group 0's after layer 0)
/// and must end with the forward of layer window[k], so it hides behind the
/// window[k] − window[k−1] layers between (window[−1] = 0). Backward: group k's copy back
/// starts when backward reaches layer window[k] and must end before the backward of layer
/// window[k−1] (layer 0 for group 0), hiding behind as many layers' backward. Each group
/// exposes what its copy takes beyond its layers' time.
struct OffloadExposure {
  double forward_s = 0;
  double backward_s = 0;
};
[[nodiscard]] OffloadExposure offload_exposure(int layers, int groups, double bytes_per_layer, double copy_Bps,
                                               double layer_forward_s, double layer_backward_s);

}  // namespace tetra::costmodel
