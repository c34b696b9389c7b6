// FP8 / FP4 linears (parallel/include/tetra/parallel/fp8.hpp, ops.hpp): which GEMMs run in the
// recipe's format, the casts TE adds (`NVIDIA/TransformerEngine:
// transformer_engine/pytorch/module/linear.py`, `tensor/float8_tensor.py`), the scale layouts
// (`transformer_engine/common/recipe/__init__.py`), and which GPUs can run which recipe.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include <string>
#include <string_view>
#include <vector>

#include "tetra/hw/presets.hpp"
#include "tetra/parallel/fp8.hpp"
#include "tetra/parallel/layout.hpp"
#include "tetra/ops/ops.hpp"
#include "tetra/model/presets.hpp"

using tetra::test::approx;
using namespace tetra::model;
using namespace tetra::parallel;
using namespace tetra::ops;

namespace {

Model preset(const char* name) {
  auto m = find_model_preset(name);
  REQUIRE(m);
  return *m;
}

double bytes_named(const std::vector<Op>& ops, std::string_view name, Pass pass) {
  double b = 0;
  for (const Op& op : ops) {
    if (name == op.name && op.pass == pass) b += op.bytes;
  }
  return b;
}

/// One Llama-3.1-8B layer at sequence 4096, micro-batch 1, TP 1 and 8 micro-batches under
/// `recipe`: T = 4096 tokens, h = 4096, qkv_out = (32+16)*128 = 6144, f = 14336.
struct Llama8bLayer {
  Model m = preset("llama3.1-8b");
  Training t;
  Layout l;
  explicit Llama8bLayer(Fp8Recipe recipe) {
    t.seq_len = 4096;
    t.global_batch = 8;
    t.fp8.recipe = recipe;
    l.dp = 1;
    l.mbs = 1;
  }
  [[nodiscard]] std::vector<Op> ops() const { return layer_ops(m, t, l); }
};

}  // namespace

TEST_SUITE("llama") {
  TEST_CASE("fp8: scale bytes per element of each recipe (TE recipe/__init__.py, OCP MX v1.0)") {
    CHECK(quantized_bytes_per_element(Fp8Recipe::none) == 0.0);
    CHECK(quantized_bytes_per_element(Fp8Recipe::delayed) == 1.0);
    CHECK(quantized_bytes_per_element(Fp8Recipe::current) == 1.0);
    // MXFP8: one E8M0 byte per 32 elements.
    CHECK(quantized_bytes_per_element(Fp8Recipe::mxfp8) == approx(1.0 + 1.0 / 32.0));
    // Blockwise: one FP32 scale per 128.
    CHECK(quantized_bytes_per_element(Fp8Recipe::blockwise) == approx(1.0 + 4.0 / 128.0));
    // NVFP4: half a byte per E2M1 value and one E4M3 scale per 16.
    CHECK(quantized_bytes_per_element(Fp8Recipe::nvfp4) == approx(0.5 + 1.0 / 16.0));
    CHECK(gemm_format(Fp8Recipe::nvfp4) == GemmFormat::fp4);
    CHECK(gemm_format(Fp8Recipe::mxfp8) == GemmFormat::fp8);
    for (auto r : {Fp8Recipe::none, Fp8Recipe::delayed, Fp8Recipe::current, Fp8Recipe::blockwise,
                   Fp8Recipe::mxfp8, Fp8Recipe::nvfp4}) {
      CHECK(parse_fp8_recipe(to_string(r)) == r);
    }
    CHECK_FALSE(parse_fp8_recipe("fp8"));
    // Which TE quantizers read the operand for a per-tensor amax (quantizer.cpp), which fused
    // norm spares that pass (normalization.cpp), which cast a grouped linear's splits together
    // (cast.cpp split_quantize).
    CHECK(reads_tensor_amax(Fp8Recipe::current));
    CHECK(reads_tensor_amax(Fp8Recipe::nvfp4));
    CHECK_FALSE(reads_tensor_amax(Fp8Recipe::delayed));
    CHECK_FALSE(reads_tensor_amax(Fp8Recipe::mxfp8));
    CHECK(norm_computes_amax(Fp8Recipe::current));
    CHECK_FALSE(norm_computes_amax(Fp8Recipe::nvfp4));
    CHECK(casts_splits_together(Fp8Recipe::delayed));
    CHECK(casts_splits_together(Fp8Recipe::nvfp4));
    CHECK_FALSE(casts_splits_together(Fp8Recipe::current));
    CHECK_FALSE(casts_splits_together(Fp8Recipe::mxfp8));
  }

  TEST_CASE("fp8: a recipe needs the GPU's tensor cores (A100 none, Hopper no block scaling)") {
    const auto a100 = tetra::hw::find_gpu_preset("a100-sxm-80gb");
    const auto h100 = tetra::hw::find_gpu_preset("h100-sxm-80gb");
    REQUIRE(a100);
    REQUIRE(h100);
    CHECK(recipe_problem(Fp8Recipe::none, *a100).empty());
    CHECK(recipe_problem(Fp8Recipe::delayed, *a100).find("FP8 tensor cores") != std::string::npos);
    CHECK(recipe_problem(Fp8Recipe::current, *h100).empty());
    CHECK(recipe_problem(Fp8Recipe::blockwise, *h100).empty());
    CHECK(recipe_problem(Fp8Recipe::mxfp8, *h100).find("compute capability 9.0") != std::string::npos);
    CHECK_FALSE(recipe_problem(Fp8Recipe::nvfp4, *h100).empty());
  }

  TEST_CASE("fp8: the four linears run their three GEMMs in FP8, attention and LM head stay bf16") {
    const Model m = preset("llama3.1-8b");
    Training t;
    t.seq_len = 4096;
    t.global_batch = 8;
    t.fp8.recipe = Fp8Recipe::current;
    Layout l;
    l.dp = 1;
    l.mbs = 1;
    const auto ops = layer_ops(m, t, l);
    int fp8 = 0;
    for (const Op& op : ops) {
      if (op.kind != OpKind::gemm) continue;
      CHECK(op.format == GemmFormat::fp8);
      ++fp8;
    }
    CHECK(fp8 == 12);  // "4 Fprop + 4 Dgrad + 4 Wgrad" per layer (TE docs, speedups)
    for (const Op& op : head_ops(m, t, l)) {
      if (op.kind == OpKind::gemm) CHECK(op.format == GemmFormat::training);
    }
    t.fp8.recipe = Fp8Recipe::none;
    for (const Op& op : layer_ops(m, t, l)) {
      if (op.kind == OpKind::gemm) CHECK(op.format == GemmFormat::training);
    }
  }

  TEST_CASE("fp8: cast and amax bytes of one layer, by hand (current scaling, 8 micro-batches)") {
    // Llama-3.1-8B (Llama8bLayer): fc1_out 28672.
    Llama8bLayer layer(Fp8Recipe::current);
    const Model& m = layer.m;
    Training& t = layer.t;
    Layout& l = layer.l;
    const auto ops = layer.ops();
    const double T = 4096, h = 4096, qkv = 6144, f = 14336;
    // Forward inputs: qkv and fc1 read [T, h], proj [T, h], fc2 [T, f]; each cast reads bf16 (2)
    // and writes two FP8 copies (1 + 1): 4 bytes per element; the amax pass reads 2.
    const double fwd_inputs = T * h + T * h + T * h + T * f;
    // Weights (h x qkv, h x h, h x 2f, f x h) cast once per step over 8 micro-batches.
    const double weights = (h * qkv + h * h + h * 2 * f + f * h) / 8.0;
    CHECK(bytes_named(ops, "fp8_cast", Pass::forward) == approx(4.0 * (fwd_inputs + weights)));
    // The QKV and FC1 inputs are the outputs of TE's LayerNormLinear norm, which computes
    // their amax in the same pass (normalization.cpp FUSED_NORM_AMAX_FP8, TE 2.7 on): the amax
    // passes read the proj and fc2 inputs and the weights only.
    const double own_amax = T * h + T * f;
    CHECK(bytes_named(ops, "fp8_amax", Pass::forward) == approx(2.0 * (own_amax + weights)));
    // A PyTorch-native model's norm is its own module: every input has its amax pass.
    t.framework = Framework::fsdp;
    CHECK(bytes_named(layer_ops(m, t, l), "fp8_amax", Pass::forward) ==
          approx(2.0 * (fwd_inputs + weights)));
    t.framework = Framework::megatron;
    // Backward: the output gradient of each linear, [T, out]: fc2 h, fc1 2f, proj h, qkv qkv.
    const double grads = T * h + T * 2 * f + T * h + T * qkv;
    CHECK(bytes_named(ops, "fp8_cast", Pass::backward_input) == approx(4.0 * grads));
    CHECK(bytes_named(ops, "fp8_amax", Pass::backward_input) == approx(2.0 * grads));
    // Delayed scaling has no amax pass.
    t.fp8.recipe = Fp8Recipe::delayed;
    CHECK(bytes_named(layer_ops(m, t, l), "fp8_amax", Pass::forward) == 0.0);
    // Under SP, current scaling all-reduces the amax of each gathered tensor over TP
    // (quantizer.cpp): the QKV and FC1 inputs in forward, the FC2 and projection output
    // gradients in backward: 4 fp32 values per layer and micro-batch.
    t.fp8.recipe = Fp8Recipe::current;
    l.tp = 2;
    l.sp = true;
    int reductions = 0;
    for (const Op& op : layer_ops(m, t, l)) {
      if (std::string_view(op.name) == "tp_ar_amax") {
        CHECK(op.bytes == 4.0);
        CHECK_FALSE(op.async);
        ++reductions;
      }
    }
    CHECK(reductions == 4);
  }

  TEST_CASE("fp8: current scaling zeroes each amax and derives each scale in kernels of their own "
            "(TE current_scaling.cu)") {
    // Float8CurrentScalingQuantizer::quantize_impl (transformer_engine/pytorch/csrc/
    // quantizer.cpp, v2.8 to v2.18) launches, per tensor, launch_amax_kernel's one-thread
    // zero_amax_kernel and the amax reduction (a cudaMemsetAsync before v2.8), then the
    // one-thread compute_scale_from_amax_kernel, then the cast: four kernels where the model
    // counted two. A norm that computes the amax (quantize_with_amax) leaves the scale and the
    // cast. Llama8bLayer: forward, 4 inputs (QKV and FC1 from the norm) and 4 weights;
    // backward, 4 output gradients.
    Llama8bLayer layer(Fp8Recipe::current);
    const auto ops = layer.ops();
    auto count_named = [&](std::string_view name, Pass pass) {
      int n = 0;
      for (const Op& op : ops) {
        if (name != op.name || op.pass != pass) continue;
        CHECK(op.host_kernels == 0);  // issued by the C++ call that issues the amax and the cast
        CHECK(op.count == 1);
        n += 1;
      }
      return n;
    };
    CHECK(count_named("fp8_amax_zero", Pass::forward) == 6);
    CHECK(count_named("fp8_scale", Pass::forward) == 8);
    CHECK(count_named("fp8_amax_zero", Pass::backward_input) == 4);
    CHECK(count_named("fp8_scale", Pass::backward_input) == 4);
    // One float zeroed; one amax read, the scale and its inverse written: 4 and 12 bytes.
    CHECK(bytes_named(ops, "fp8_amax_zero", Pass::backward_input) == 4.0 * 4.0);
    CHECK(bytes_named(ops, "fp8_scale", Pass::backward_input) == 4.0 * 12.0);
    // Each zero precedes its amax pass; each scale precedes its cast.
    for (std::size_t i = 0; i + 1 < ops.size(); ++i) {
      const std::string_view name(ops[i].name);
      const std::string_view next(ops[i + 1].name);
      if (name == "fp8_amax_zero") CHECK(next == "fp8_amax");
      if (name == "fp8_scale") CHECK(next == "fp8_cast");
    }
    // Delayed scaling (amax history) and MXFP8 (block scales inside the cast) launch neither.
    for (Fp8Recipe r : {Fp8Recipe::delayed, Fp8Recipe::mxfp8, Fp8Recipe::nvfp4}) {
      for (const Op& op : Llama8bLayer(r).ops()) {
        CHECK(std::string_view(op.name) != "fp8_amax_zero");
        CHECK(std::string_view(op.name) != "fp8_scale");
      }
    }
  }

  TEST_CASE("fp8: NVFP4 reads every operand once for its per-tensor amax, norm outputs too "
            "(TE quantizer.cpp NVFP4Quantizer::quantize_impl, normalization.cpp)") {
    // The same Llama-3.1-8B layer as above (T = 4096 tokens, h = 4096, qkv_out = 6144,
    // f = 14336, 8 micro-batches). NVFP4's per-tensor scale needs the operand's amax before
    // the cast (nvte_hadamard_transform_amax under the default random Hadamard transform of
    // activations and gradients, nvte_compute_amax_with_config for weights), and with that
    // transform on, TE's norm writes its output unquantized (Impl::UNFUSED), so the QKV and
    // FC1 inputs get their own pass as well: every forward input and weight, 2 bytes per
    // element read.
    Llama8bLayer layer(Fp8Recipe::nvfp4);
    const auto ops = layer.ops();
    const double T = 4096, h = 4096, qkv = 6144, f = 14336;
    const double fwd_inputs = T * h + T * h + T * h + T * f;                  // 1.09052e8
    const double weights = (h * qkv + h * h + h * 2 * f + f * h) / 8.0;       // 2.72630e7
    CHECK(bytes_named(ops, "fp8_amax", Pass::forward) == approx(2.0 * (fwd_inputs + weights)));
    CHECK(bytes_named(ops, "fp8_amax", Pass::forward) == approx(2.72630e8).epsilon(1e-5));
    // Backward: each linear's output gradient [T, out], amax'd before its cast.
    const double grads = T * h + T * 2 * f + T * h + T * qkv;                 // 1.76161e8
    CHECK(bytes_named(ops, "fp8_amax", Pass::backward_input) == approx(2.0 * grads));
    // MXFP8 computes its scales per block inside the cast: no amax pass.
    CHECK(bytes_named(Llama8bLayer(Fp8Recipe::mxfp8).ops(), "fp8_amax", Pass::forward) == 0.0);
    // Under SP the gathered tensors' amax is all-reduced over TP, as for current scaling.
    layer.l.tp = 2;
    layer.l.sp = true;
    int reductions = 0;
    for (const Op& op : layer.ops()) {
      if (std::string_view(op.name) == "tp_ar_amax") ++reductions;
    }
    CHECK(reductions == 4);
  }

  TEST_CASE("fp8: one copy of a per-tensor-scaled tensor where the GEMMs take any layout "
            "(TE quantizer.cpp, nvte_is_non_tn_fp8_gemm_supported)") {
    // transformer_engine/common/transformer_engine.cpp: non-TN FP8 GEMMs on compute
    // capability 10.x / 11.x and from 13.0; Hopper and Ada are TN-only.
    for (const char* name : {"a100-sxm-80gb", "h100-sxm-80gb", "h200-sxm-141gb"}) {
      const auto gpu = tetra::hw::find_gpu_preset(name);
      REQUIRE(gpu);
      CHECK_FALSE(fp8_gemms_take_any_layout(*gpu));
    }
    for (const char* name : {"b200", "b300", "gb200", "gb300"}) {
      const auto gpu = tetra::hw::find_gpu_preset(name);
      REQUIRE(gpu);
      CHECK(fp8_gemms_take_any_layout(*gpu));
    }
    tetra::hw::Gpu rtx = *tetra::hw::find_gpu_preset("b200");
    rtx.compute_capability = 120;  // GeForce / RTX Blackwell: TN-only again
    CHECK_FALSE(fp8_gemms_take_any_layout(rtx));
    const Fp8Training cs{Fp8Recipe::current, false};
    CHECK(fp8_on(cs, *tetra::hw::find_gpu_preset("gb300")).copies() == 1.0);
    CHECK(fp8_on(cs, rtx).copies() == 2.0);

    // quantizer.cpp creates the transpose only for `columnwise_usage &&
    // !nvte_is_non_tn_fp8_gemm_supported()`: delayed and current scaling keep one copy on
    // Blackwell; MXFP8 scales the column-wise copy along the other axis and keeps two.
    Fp8Training f{Fp8Recipe::current, false};
    CHECK(f.copies() == 2.0);
    f.any_layout_gemms = true;
    CHECK(f.copies() == 1.0);
    f.recipe = Fp8Recipe::delayed;
    CHECK(f.copies() == 1.0);
    f.recipe = Fp8Recipe::mxfp8;
    CHECK(f.copies() == 2.0);

    // Llama-3.1-8B, seq 4096, mbs 1: the forward cast of the four linear inputs (T h, T h,
    // T h, T f) reads bf16 (2) and writes one FP8 copy (1): 3 bytes per element, not 4.
    const Model m = preset("llama3.1-8b");
    Training t;
    t.seq_len = 4096;
    t.global_batch = 8;
    t.fp8.recipe = Fp8Recipe::current;
    t.fp8.any_layout_gemms = true;
    Layout l;
    l.dp = 1;
    l.mbs = 1;
    const double T = 4096, h = 4096, qkv = 6144, f2 = 2 * 14336.0;
    const double fwd_inputs = 3 * T * h + T * 14336.0;
    const double weights = (h * qkv + h * h + h * f2 + 14336.0 * h) / 8.0;
    const auto ops = layer_ops(m, t, l);
    CHECK(bytes_named(ops, "fp8_cast", Pass::forward) == approx(3.0 * (fwd_inputs + weights)));
    // The amax passes of the proj and fc2 inputs and the weights (the norms compute the rest).
    CHECK(bytes_named(ops, "fp8_amax", Pass::forward) ==
          approx(2.0 * (T * h + T * 14336.0 + weights)));
    // MXFP8 on the same GPU: 2 + 2 x (1 + 1/32) per element.
    t.fp8.recipe = Fp8Recipe::mxfp8;
    CHECK(bytes_named(layer_ops(m, t, l), "fp8_cast", Pass::forward) ==
          approx((2.0 + 2.0 * (1.0 + 1.0 / 32.0)) * (fwd_inputs + weights)));
  }

  TEST_CASE("tp_comm_overlap: the SP collectives of the linears run under their GEMMs") {
    const Model m = preset("llama3.1-8b");
    Training t;
    t.seq_len = 4096;
    t.global_batch = 8;
    Layout l;
    l.tp = 4;
    l.sp = true;
    l.dp = 1;
    t.tp_comm_overlap = true;
    const auto ops = layer_ops(m, t, l);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.kind != OpKind::collective || op.pass != Pass::forward) continue;
      // Every forward TP collective is async and directly followed by the GEMM it hides under.
      CHECK(op.async);
      REQUIRE(i + 1 < ops.size());
      CHECK(ops[i + 1].kind == OpKind::gemm);
    }
    t.tp_comm_overlap = false;
    int blocking = 0;
    for (const Op& op : layer_ops(m, t, l)) {
      if (op.kind == OpKind::collective && op.pass == Pass::forward && !op.async) ++blocking;
    }
    CHECK(blocking == 4);  // AG before qkv and fc1, RS after proj and fc2
  }
}

TEST_SUITE("llama") {
  TEST_CASE("FSDP2 all-gathers and reduce-scatters per step, by reshard_after_forward") {
    // Llama-3.1-8B on 8 GPUs, FSDP2 (torch/distributed/_composable/fsdp/_fsdp_collectives.py):
    // a block's bf16 parameters are all-gathered before its forward and, resharded after it,
    // again before its backward: 2 * 218,112,000 B = 436,224,000 B each time; its fp32
    // gradients are reduce-scattered once per step: 4 * 218,112,000 = 872,448,000 B per block.
    const Model m = *find_model_preset("llama3.1-8b");
    Training t;
    t.seq_len = 8192;
    t.global_batch = 8;
    t.zero_stage = 3;
    t.framework = Framework::fsdp;
    Layout l;
    l.dp = 8;
    auto gathers = [&](const Training& tr) {
      double bytes = 0;
      for (const Op& op : layer_ops(m, tr, l)) {
        if (op.kind == OpKind::collective && op.coll == CollectiveKind::all_gather) {
          bytes += op.bytes * op.count;
        }
      }
      return bytes;
    };
    t.torch.reshard_after_forward = TorchNative::kReshardFull;
    CHECK(gathers(t) == approx(2.0 * 436224000.0));
    t.torch.reshard_after_forward = 1;  // false: no gather before backward
    CHECK(gathers(t) == approx(436224000.0));
    double rs = 0;
    for (const Op& op : dp_gradient_ops(m, t, l, 0)) {
      if (op.coll == CollectiveKind::reduce_scatter && std::string(op.name) == "zero3_grad_rs") {
        rs += op.bytes * op.count;
      }
    }
    CHECK(rs == approx(32.0 * 872448000.0));
  }

  TEST_CASE("torchao Float8: tensorwise casts every forward with an amax each, rowwise casts twice and rescales") {
    const Model m = *find_model_preset("llama3.1-8b");
    Training t;
    t.seq_len = 8192;
    t.framework = Framework::fsdp;
    t.torch.compile = true;
    t.fp8.recipe = Fp8Recipe::tensorwise;
    Layout l;
    l.mbs = 1;
    // torchtitan's seven linears (wq, wk, wv, wo, w1, w3, w2) cast their weights in every
    // forward, compiled: one amax read (2 B) and one cast reading bf16 and writing the
    // row-wise and transposed copies, 2 + 2 x 1 = 4 B per element.
    auto sum = [&](const char* name, Pass pass) {
      double bytes = 0;
      for (const Op& op : layer_ops(m, t, l)) {
        if (op.pass == pass && std::string(op.name) == name) bytes += op.bytes;
      }
      return bytes;
    };
    // Weights 4096 x (4096 + 1024 + 1024) + 4096^2 + 2 x 4096 x 14336 + 14336 x 4096
    // = 218,103,808 elements; inputs, one cast per group of linears reading one tensor:
    // 8192 x (4096 + 4096 + 4096 + 14336) = 218,103,808.
    CHECK(sum("fp8_cast", Pass::forward) == approx(4.0 * (218103808.0 + 218103808.0)));
    // Rowwise (`torchao/float8/float8_linear.py` @6243040): the forward copies only (2 + 1 B),
    // then each operand again along the other axis for the backward GEMM: every weight per
    // input channel (218,103,808), every group's input per column (218,103,808) and every
    // output gradient per column (8192 x (4096 + 1024 + 1024 + 4096 + 14336 + 14336 + 4096)
    // = 8192 x 43,008 = 352,321,536): an amax (2 B) and a transposed cast (2 + 1 B) each.
    t.fp8.recipe = Fp8Recipe::rowwise;
    CHECK(sum("fp8_cast", Pass::forward) == approx(3.0 * (218103808.0 + 218103808.0)));
    const double other = 218103808.0 + 218103808.0 + 352321536.0;
    CHECK(sum("fp8_cast_t", Pass::backward_input) + sum("fp8_cast_t", Pass::backward_weight) ==
          approx(3.0 * other));
    CHECK(sum("fp8_amax_t", Pass::backward_input) + sum("fp8_amax_t", Pass::backward_weight) ==
          approx(2.0 * other));
    int rescales = 0;
    for (const Op& op : layer_ops(m, t, l)) rescales += std::string(op.name) == "fp8_rescale";
    CHECK(rescales == 14);  // dgrad and wgrad of the seven linears
    t.fp8.recipe = Fp8Recipe::tensorwise;
    CHECK(sum("fp8_cast_t", Pass::backward_weight) == 0.0);
  }

}
