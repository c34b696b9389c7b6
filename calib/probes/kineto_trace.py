# A two-layer Llama-style block (PyTorch eager, SDPA, nn.RMSNorm, fused AdamW) trained for three
# steps; the third runs under torch.profiler (record_shapes) and its Chrome trace is written to
# argv[1]. With a second argument `nvtx` the third step instead runs under emit_nvtx(record_shapes)
# between cudaProfilerStart/Stop, for Nsight Systems (--capture-range=cudaProfilerApi).
# Usage: python3 calib/probes/kineto_trace.py OUT.json
#        nsys profile -t cuda,nvtx --capture-range=cudaProfilerApi -o R python3 calib/probes/kineto_trace.py - nvtx
import sys, torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity

torch.manual_seed(0)
dev, bf = "cuda", torch.bfloat16
H, HEADS, KV, D, FFN, SEQ, B = 2048, 16, 4, 128, 5632, 2048, 1

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1 = nn.RMSNorm(H, device=dev, dtype=bf)
        self.qkv = nn.Linear(H, (HEADS + 2 * KV) * D, bias=False, device=dev, dtype=bf)
        self.o = nn.Linear(HEADS * D, H, bias=False, device=dev, dtype=bf)
        self.n2 = nn.RMSNorm(H, device=dev, dtype=bf)
        self.up = nn.Linear(H, 2 * FFN, bias=False, device=dev, dtype=bf)
        self.down = nn.Linear(FFN, H, bias=False, device=dev, dtype=bf)
    def forward(self, x):
        q, k, v = self.qkv(self.n1(x)).split([HEADS * D, KV * D, KV * D], -1)
        q = q.view(B, SEQ, HEADS, D).transpose(1, 2)
        k = k.view(B, SEQ, KV, D).transpose(1, 2)
        v = v.view(B, SEQ, KV, D).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, SEQ, HEADS * D))
        g, u = self.up(self.n2(x)).chunk(2, -1)
        return x + self.down(F.silu(g) * u)

model = nn.Sequential(Block(), Block())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
x = torch.randn(B, SEQ, H, device=dev, dtype=bf)
def step():
    y = model(x)
    y.float().pow(2).mean().backward()
    opt.step(); opt.zero_grad(set_to_none=True)
for _ in range(2):
    step()
torch.cuda.synchronize()
if len(sys.argv) > 2 and sys.argv[2] == "nvtx":
    torch.cuda.profiler.start()
    with torch.autograd.profiler.emit_nvtx(record_shapes=True):
        step()
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()
else:
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(sys.argv[1])
