# Times PyTorch SDPA forward and backward by backend (cuDNN fused attention, FlashAttention 2,
# memory-efficient) at the block shapes of context-parallel attention: the causal diagonal block
# (q = kv = L) and the non-causal off-diagonal blocks of a load-balanced ring (q = L, kv = L/2 and
# q = L/2, kv = L), with Llama 3.1 8B heads at TP 1 and TP 4. Writes JSON to argv[1].
# Usage: python3 calib/probes/attention_chunks.py OUT.json  (PyTorch with CUDA; about two minutes on an H100)
import json, sys
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from cuda_timing import median_seconds

dev, bf = "cuda", torch.bfloat16
backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}
heads = [("llama31-8b tp1", 32, 8), ("llama31-8b tp4", 8, 2)]
D = 128
rows = []
for L in (512, 1024, 2048, 4096, 8192, 16384, 32768):
    for kind, lq, lk, causal in (("diagonal", L, L, True), ("q-half", L // 2, L, False),
                                 ("kv-half", L, L // 2, False), ("full", L, L, False)):
        for hname, hq, hkv in heads:
            q = torch.randn(1, hq, lq, D, device=dev, dtype=bf, requires_grad=True)
            k = torch.randn(1, hkv, lk, D, device=dev, dtype=bf, requires_grad=True)
            v = torch.randn(1, hkv, lk, D, device=dev, dtype=bf, requires_grad=True)
            for bname, backend in backends.items():
                row = {"heads": hname, "q_heads": hq, "kv_heads": hkv, "head_dim": D, "block": kind,
                       "q_len": lq, "kv_len": lk, "causal": causal, "backend": bname}
                iters = 5 if L >= 16384 else 10
                try:
                    with sdpa_kernel([backend]):
                        fwd = lambda: torch.nn.functional.scaled_dot_product_attention(
                            q, k, v, is_causal=causal, enable_gqa=True)
                        row["fwd_s"] = median_seconds(fwd, iters=iters)
                        o = fwd()
                        g = torch.randn_like(o)
                        row["bwd_s"] = median_seconds(
                            lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True), iters=iters)
                        del o, g
                except Exception as ex:  # noqa: BLE001
                    row["error"] = str(ex).splitlines()[0][:200] if str(ex) else type(ex).__name__
                rows.append(row)
                print(json.dumps(row), flush=True)
            del q, k, v
            torch.cuda.empty_cache()
json.dump({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
           "cudnn": torch.backends.cudnn.version(), "attention": rows}, open(sys.argv[1], "w"), indent=1)
