# Times the GEMMs of small dense layers (MPT 125M to 7B: QKV, projection, FC1, FC2 and the vocabulary
# head; forward, data-gradient and weight-gradient shapes) in bf16 and, where the GPU has it, FP8
# (torch._scaled_mm, per-tensor scales) at 2k-16k tokens, where tile and wave quantization and the
# per-kernel cost set the rate. Writes JSON to argv[1].
# Usage: python3 calib/probes/small_gemm.py OUT.json  (PyTorch with CUDA; about a minute on an H100)
import json, sys
import torch

from cuda_timing import median_seconds

dev, bf = "cuda", torch.bfloat16
props = torch.cuda.get_device_properties(0)
out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "sms": props.multi_processor_count,
       "cuda": torch.version.cuda}
fp8 = props.major >= 9 and hasattr(torch, "_scaled_mm")
# name, hidden, ffn, vocab (MPT models of llm-foundry: ffn = 4 h, vocabulary 50368)
models = [("mpt-125m", 768, 3072), ("mpt-350m", 1024, 4096), ("mpt-760m", 1536, 6144),
          ("mpt-1b", 2048, 8192), ("mpt-3b", 2560, 10240), ("mpt-7b", 4096, 16384)]
VOCAB = 50368


def shapes(h, ffn, tokens):
    # (op, M, N, K) of y[M,N] = x[M,K] w[K,N] for forward, dgrad, wgrad of each linear layer
    for op, n, k in (("qkv", 3 * h, h), ("proj", h, h), ("fc1", ffn, h), ("fc2", h, ffn), ("head", VOCAB, h)):
        yield op + ".fwd", tokens, n, k
        yield op + ".dgrad", tokens, k, n
        yield op + ".wgrad", n, k, tokens


def time_bf16(m, n, k):
    a = torch.randn(m, k, device=dev, dtype=bf)
    b = torch.randn(n, k, device=dev, dtype=bf).t()
    return median_seconds(lambda: torch.mm(a, b))


def time_fp8(m, n, k):
    # _scaled_mm wants a row-major A and a column-major B, dimensions multiple of 16
    a = torch.randn(m, k, device=dev, dtype=bf).to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device=dev, dtype=bf).to(torch.float8_e4m3fn).t()
    one = torch.ones((), device=dev, dtype=torch.float32)
    return median_seconds(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=bf))


rows, seen = [], set()
for name, h, ffn in models:
    for tokens in (2048, 4096, 8192, 16384):
        for op, m, n, k in shapes(h, ffn, tokens):
            if (m, n, k) in seen:
                continue
            seen.add((m, n, k))
            row = {"model": name, "op": op, "m": m, "n": n, "k": k}
            flops = 2.0 * m * n * k
            try:
                row["bf16_s"] = time_bf16(m, n, k)
                row["bf16_tflops"] = flops / row["bf16_s"] / 1e12
                if fp8:
                    row["fp8_s"] = time_fp8(m, n, k)
                    row["fp8_tflops"] = flops / row["fp8_s"] / 1e12
            except Exception as ex:  # noqa: BLE001
                row["error"] = str(ex)[:200]
            rows.append(row)
            print(json.dumps(row), flush=True)
            torch.cuda.empty_cache()
out["gemm"] = rows
json.dump(out, open(sys.argv[1], "w"), indent=1)
