#pragma once
/// Model FLOPs of one training step as Megatron-LM reports them
/// (`NVIDIA/Megatron-LM: megatron/training/training.py::num_floating_point_operations`,
/// master d98e8a6). tetrasim's MFU and `tflops_per_gpu` use the current-master form
/// (forward + backward, no recomputation, causal attention at half).

#include "tetra/parallel/layout.hpp"
#include "tetra/model/model.hpp"

namespace tetra::parallel {

/// Current master (d98e8a6), dense, GQA, BSHD. With T = B·s tokens, q = heads·head_dim,
/// kv = kv_heads·head_dim, E = 3 for SwiGLU (llama) else 2:
///   T·[6·h·F·E·L + 6·L·(h·(q + 2·kv) + q·h) + 6·h·V] + B·s²·L·6·q
/// `vocab` is the vocabulary the LM head multiplies by (Megatron passes the padded one);
/// 0 means `model.vocab`.
/// MoE, MLA and MTP models use Megatron-LM's MoE form (flops.cpp): the MLP term becomes
/// F·E·L_dense + (f_e·k·E + f_s·E)·L_moe (the grouped expert GEMMs of the k routed experts and
/// the shared experts), MLA its own projection and core-attention terms, and every MTP module
/// adds a layer, 6(3h + 2h²) and one more LM head. DeepSeek-V3 at s = 4096, V = 129280:
/// 249,812,054,016 per token (Megatron-Bridge prints about 250 GFLOP/token for its runs without MTP).
[[nodiscard]] double megatron_step_flops(const model::Model& model, long long seq_len,
                                         long long global_batch, long long vocab = 0) noexcept;

/// The model FLOPs of one step that tetrasim's MFU and `tflops_per_gpu` count:
/// `megatron_step_flops` of the global batch over the vocabulary padded for the layout's TP
/// (`padded_vocab`, as Megatron passes it).
[[nodiscard]] double spec_step_flops(const model::Model& model, const Training& training,
                                     const Layout& layout) noexcept;

/// core_r0.6.0 closed form (non-causal attention term s/h):
///   12·B·s·L·h²·(1 + (F/h)·(3/2 if SwiGLU else 1) + kv_heads/heads + s/h + V/(2·L·h))
/// Equal to the current form with q = h when the attention term is doubled.
[[nodiscard]] double megatron_r060_step_flops(const model::Model& model, long long seq_len,
                                              long long global_batch, long long vocab = 0) noexcept;

/// Model FLOPs per token (current master), `megatron_step_flops / (B·s)`.
[[nodiscard]] double megatron_flops_per_token(const model::Model& model, long long seq_len,
                                              long long vocab = 0) noexcept;

}  // namespace tetra::parallel
