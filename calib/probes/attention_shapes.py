# Times cuDNN's fused attention (PyTorch SDPA, cuDNN backend) forward and backward at the
# attention shapes of the MoE validation layouts; writes JSON to argv[1].
# Usage: python3 calib/probes/attention_shapes.py OUT.json  (PyTorch with CUDA)
import json, sys
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from cuda_timing import median_seconds

dev, bf = "cuda", torch.bfloat16
# name, batch, q heads, kv heads, head dim (q/k), head dim (v), sequence
cases = [
    ("gpt-oss-120b", 1, 64, 8, 64, 64, 4096),
    ("gpt-oss-120b", 4, 64, 8, 64, 64, 4096),
    ("qwen3-30b-a3b", 1, 32, 4, 128, 128, 4096),
    ("qwen3-30b-a3b", 4, 32, 4, 128, 128, 4096),
    ("qwen3-235b-a22b", 1, 64, 4, 128, 128, 4096),
    ("deepseek-v3 (MLA)", 1, 128, 128, 192, 128, 4096),
    ("llama3-70b tp4", 1, 16, 2, 128, 128, 8192),
]

rows = []
for name, b, hq, hkv, dqk, dv, s in cases:
    row = {"case": name, "batch": b, "heads": hq, "kv_heads": hkv, "head_dim": dqk, "head_dim_v": dv, "seq": s,
           "causal": True}
    try:
        q = torch.randn(b, hq, s, dqk, device=dev, dtype=bf, requires_grad=True)
        k = torch.randn(b, hkv, s, dqk, device=dev, dtype=bf, requires_grad=True)
        v = torch.randn(b, hkv, s, dv, device=dev, dtype=bf, requires_grad=True)
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            fwd = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                          enable_gqa=hq != hkv)
            row["fwd_s"] = median_seconds(fwd)
            out = fwd()
            g = torch.randn_like(out)
            row["bwd_s"] = median_seconds(lambda: torch.autograd.grad(out, (q, k, v), g, retain_graph=True))
    except Exception as ex:  # noqa: BLE001
        row["error"] = str(ex)[:300]
    rows.append(row)
    print(json.dumps(row), flush=True)
json.dump({"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
           "cudnn": torch.backends.cudnn.version(), "attention": rows}, open(sys.argv[1], "w"), indent=1)
