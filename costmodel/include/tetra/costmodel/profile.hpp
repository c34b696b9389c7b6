#pragma once
/// Calibration profile (file format: tetra/scenarios/profile_io.hpp, docs/calibration.md):
/// measured tables of one (GPU, node) kind and the parameters fitted from them. Built-in
/// profiles come from published measurements;
/// `tetrasim calibrate` writes real ones; scenarios reads and writes the TOML form.

#include <string>
#include <vector>

namespace tetra::costmodel {

struct ProfileMeta {
  std::string gpu;               ///< device name as the driver reports it, or the preset name
  std::string driver;
  std::string cuda;
  std::string cublas;
  std::string cudnn;
  std::string nccl;              ///< e.g. "2.21.5"; selects the NCCL tuning constants
  std::string date;
  std::string source;            ///< "built-in (published measurements)" or "calibrate"
  int hosts = 1;
  int gpus_per_node = 8;
  double device_memory_bytes = 0;
  int sms = 0;                   ///< streaming multiprocessors (cudaDeviceProp::multiProcessorCount); 0 unknown
  double l2_bytes = 0;           ///< L2 cache (cudaDeviceProp::l2CacheSize); 0 unknown
};

/// One cuBLASLt GEMM: C[m,n] = A[m,k] B[k,n], CUPTI kernel time (median of runs).
struct GemmRow {
  long long m = 0, n = 0, k = 0;
  std::string dtype = "bf16";
  double seconds = 0;
};

enum class AttentionPass { fwd, bwd };

struct AttentionRow {
  int batch = 1, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool causal = true;
  AttentionPass pass = AttentionPass::fwd;
  double seconds = 0;
};

/// kernel: copy | rmsnorm | swiglu | rope | adam | cross_entropy; bytes moved (read + write).
struct MemoryBoundRow {
  std::string kernel;
  double bytes = 0;
  double seconds = 0;
};

/// op: all_reduce | all_gather | reduce_scatter | send_recv | all_to_all. bytes as
/// nccl-tests counts its "size" column; seconds per operation.
struct CollectiveRow {
  std::string op;
  int ranks = 0;
  int ranks_per_node = 0;
  double bytes = 0;
  double seconds = 0;
  std::string algorithm;         ///< NCCL_ALGO forced for the sweep (ring, tree, nvls, ...); "" = NCCL's choice
  std::string protocol;          ///< NCCL_PROTO forced for the sweep (ll, ll128, simple); "" = NCCL's choice
};

/// t(S) = latency + S * f / busbw for one collective op at one group shape
/// (f = nccl-tests' bus factor, `NVIDIA/nccl-tests: doc/PERFORMANCE.md`).
struct CollectiveFit {
  std::string op;
  int ranks = 0;
  int ranks_per_node = 0;
  double latency_s = 0;
  double busbw_Bps = 0;
  std::string algorithm;         ///< as in CollectiveRow; "" = NCCL's choice
  std::string protocol;          ///< as in CollectiveRow; "" = NCCL's choice
};

/// t(bytes) = launch_s + bytes / Bps for one memory-bound kernel kind (bytes over achieved HBM
/// bandwidth), fitted on its own rows.
struct MemoryBoundFit {
  std::string kernel;
  double launch_s = 0;
  double Bps = 0;
};

/// Parameters fitted from the tables; recomputed on load when absent (`valid == false`).
struct ProfileFit {
  bool valid = false;
  double gemm_peak_flops = 0;      ///< achievable best-shape GEMM rate (MAMF)
  double gemm_launch_s = 0;        ///< fixed cost per GEMM call
  double attention_fwd_flops = 0;  ///< achieved attention forward rate at long sequences
  double attention_bwd_flops = 0;  ///< achieved attention backward rate (FlashAttention FLOP count)
  double hbm_Bps = 0;              ///< achieved streaming bandwidth of memory-bound kernels
  double kernel_launch_s = 0;      ///< fixed cost per memory-bound kernel
  std::vector<CollectiveFit> collectives;
  /// Wave-quantised GEMM model the fit assumes (NVIDIA Matrix Multiplication Background
  /// User's Guide, "Wave Quantization"):
  /// t = gemm_launch_s + waves * (gemm_wave_s + tile_m * tile_n * 2K * sms / gemm_peak_flops),
  /// waves = ceil(ceil(M/tile_m) * ceil(N/tile_n) / sms).
  double gemm_wave_s = 0;          ///< fixed cost per wave of output tiles (prologue/epilogue)
  int gemm_tile_m = 128;           ///< output tile rows the fit assumed (0: the compute model
                                   ///< searches its own tile set, as built-in profiles do)
  int gemm_tile_n = 128;           ///< output tile columns the fit assumed (0: as gemm_tile_m)
  std::vector<MemoryBoundFit> memory_bound;  ///< per-kernel fits, sorted by kernel name
};

struct Profile {
  ProfileMeta meta;
  std::vector<GemmRow> gemm;
  std::vector<AttentionRow> attention;
  std::vector<MemoryBoundRow> memory_bound;
  std::vector<CollectiveRow> collective;
  ProfileFit fit;
};

}  // namespace tetra::costmodel
