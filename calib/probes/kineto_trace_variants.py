# One training step of a small model whose kernels a trace importer must not mistake: an fp32
# Linear with TF32 off (a SIMT GEMM), an FP8 GEMM (torch._scaled_mm), a batched matmul (bmm), a
# plain SiLU MLP (no gate) and, when NCCL initialises, a one-rank all-reduce. The step runs under
# torch.profiler with record_shapes and TensorBoard's trace handler, which writes
# DIR/*.pt.trace.json.gz. Usage: python3 calib/probes/kineto_trace_variants.py DIR
import os, sys, tempfile
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity, tensorboard_trace_handler

torch.manual_seed(0)
torch.backends.cuda.matmul.allow_tf32 = False
dev, bf = "cuda", torch.bfloat16
H, B, S = 1024, 4, 512
dist = None
try:
    import torch.distributed as dist
    store = tempfile.mktemp()
    dist.init_process_group("nccl", init_method="file://" + store, rank=0, world_size=1)
except Exception as ex:  # noqa: BLE001
    print("no NCCL:", ex)
    dist = None

fp32_lin = nn.Linear(H, H, device=dev, dtype=torch.float32)
up = nn.Linear(H, 4 * H, bias=False, device=dev, dtype=bf)
down = nn.Linear(4 * H, H, bias=False, device=dev, dtype=bf)
w8 = torch.randn(H, H, device=dev, dtype=bf).to(torch.float8_e4m3fn)
one = torch.ones((), device=dev, dtype=torch.float32)
params = list(fp32_lin.parameters()) + list(up.parameters()) + list(down.parameters())
opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
x = torch.randn(B * S, H, device=dev, dtype=torch.float32)


def step():
    y = fp32_lin(x).to(bf)                                   # fp32 GEMM
    y8 = torch._scaled_mm(y.to(torch.float8_e4m3fn), w8.t(), scale_a=one, scale_b=one, out_dtype=bf)
    z = y + y8.detach()
    a = torch.bmm(z.view(B, S, H), z.view(B, S, H).transpose(1, 2))   # batched, B x S x S
    z = z + torch.bmm(a.softmax(-1), z.view(B, S, H)).view(B * S, H)
    z = z + down(F.silu(up(z)))                              # plain SiLU, no gate
    z.float().pow(2).mean().backward()
    if dist is not None:
        for p in params:
            dist.all_reduce(p.grad)
    opt.step(); opt.zero_grad(set_to_none=True)


for _ in range(2):
    step()
torch.cuda.synchronize()
os.makedirs(sys.argv[1], exist_ok=True)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
             on_trace_ready=tensorboard_trace_handler(sys.argv[1], worker_name="h100", use_gzip=True)) as prof:
    step()
    torch.cuda.synchronize()
if dist is not None:
    dist.destroy_process_group()
