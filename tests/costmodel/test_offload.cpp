// Activation offloading's time (costmodel/offload.hpp): Transformer Engine's
// `AsyncDoubleBufferGroupOffloadHandler` (`transformer_engine/pytorch/cpu_offload.py`, v2.8)
// waits for offload group i after the forward of layer `layer_window_map[i]`, and copies each
// group over the GPU's host link at the rate `nvbandwidth` measures; priced by hand.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <vector>

#include "tetra/costmodel/memory.hpp"
#include "tetra/costmodel/offload.hpp"
#include "tetra/hw/presets.hpp"
#include "tetra/model/presets.hpp"

using tetra::test::approx;
using namespace tetra;

TEST_SUITE("costmodel") {

TEST_CASE("offload: the layers TE waits at, layer_window_map of cpu_offload.py") {
  // 80 layers, 40 offloaded (Megatron-Bridge's Llama 3 70B GB200 recipe): every second layer,
  // the first wait after layer 1.
  const std::vector<int> even = costmodel::offload_windows(80, 40);
  REQUIRE(even.size() == 40);
  CHECK(even.front() == 1);
  CHECK(even[1] == 3);
  CHECK(even.back() == 79);
  // 126 layers, 95 offloaded (the 405B GB200 recipe): 126 = 95 + 31, so the first 31 groups
  // get two layers each (waits 1, 3, ..., 61) and the other 64 one each (62 .. 125).
  const std::vector<int> uneven = costmodel::offload_windows(126, 95);
  REQUIRE(uneven.size() == 95);
  CHECK(uneven[0] == 1);
  CHECK(uneven[30] == 61);
  CHECK(uneven[31] == 62);
  CHECK(uneven[94] == 125);
  CHECK(costmodel::offload_windows(4, 0).empty());
  CHECK(costmodel::offload_windows(4, 5).empty());
}

TEST_CASE("offload: what a copy exposes beyond the layers that hide it") {
  // 4 layers, 2 offloaded: waits after layers 1 and 3, so group 0 hides behind one layer and
  // group 1 behind two. 1 GB at 10 GB/s = 0.1 s per copy.
  // Forward 0.06 s a layer: group 0 exposes 0.1 - 0.06 = 0.04 s, group 1 nothing (0.12 s).
  // Backward 0.12 s a layer: nothing.
  auto e = costmodel::offload_exposure(4, 2, 1e9, 10e9, 0.06, 0.12);
  CHECK(e.forward_s == approx(0.04));
  CHECK(e.backward_s == approx(0.0));
  // Backward 0.03 s a layer: group 0 0.1 - 0.03 = 0.07, group 1 0.1 - 0.06 = 0.04.
  e = costmodel::offload_exposure(4, 2, 1e9, 10e9, 0.06, 0.03);
  CHECK(e.backward_s == approx(0.11));
  // Nothing to copy, or no link known: nothing exposed.
  CHECK(costmodel::offload_exposure(4, 2, 0.0, 10e9, 0.06, 0.03).forward_s == 0.0);
  CHECK(costmodel::offload_exposure(4, 2, 1e9, 0.0, 0.06, 0.03).backward_s == 0.0);
}

TEST_CASE("offload: a copy moves what the memory model keeps of one layer and micro-batch") {
  // Without offloading, the stage's saved layer activations are inflight x layers x what one
  // layer copies; a dense model and a MoE model (its routed experts' tensors included).
  for (const char* name : {"llama3.1-8b", "qwen3-30b-a3b"}) {
    CAPTURE(name);
    const model::Model m = *model::find_model_preset(name);
    const hw::Cluster c = *hw::find_cluster_preset("dgx-h100");
    parallel::Training t;
    t.seq_len = 4096;
    t.global_batch = 16;
    parallel::Layout l;
    l.dp = 8;
    l.ep = m.moe ? 8 : 1;
    const costmodel::MemoryReport r = costmodel::estimate_memory(m, c, t, l);
    const costmodel::StageMemory& s = r.stages.front();
    const double per_layer = (s.layer_activations_bytes + s.expert_activations_bytes) / (s.inflight * m.layers);
    CHECK(costmodel::offloaded_bytes_per_layer(m, c, t, l) == approx(per_layer));
  }
}

TEST_CASE("offload: the host links of the built-in GPUs, at nvbandwidth's achieved share") {
  // PCIe Gen5 x16: 64 GB/s a direction (H100 datasheet: 128 GB/s both); nvbandwidth on an
  // H200 node copies 55.06 GB/s device to host (stas00/ml-engineering network/README.md).
  CHECK(costmodel::host_copy_Bps(*hw::find_gpu_preset("h100-sxm-80gb")) == approx(55.06e9));
  CHECK(costmodel::host_copy_Bps(*hw::find_gpu_preset("h200-sxm-141gb")) == approx(55.06e9));
  // PCIe Gen4 x16: 32 GB/s a direction (A100 datasheet: 64 GB/s both) -> 27.53 GB/s.
  CHECK(costmodel::host_copy_Bps(*hw::find_gpu_preset("a100-sxm-80gb")) == approx(27.53e9));
  // GB200: NVLink-C2C 900 GB/s both directions for one Grace and two GPUs -> 225 GB/s a GPU
  // and direction -> 193.57 GB/s.
  CHECK(costmodel::host_copy_Bps(*hw::find_gpu_preset("gb200")) == approx(193.5703125e9));
}

}  // TEST_SUITE
