# Times the expert GEMMs of MoE layouts on one GPU and the eager launch cost of small ops.
# Usage: python3 calib/probes/grouped_gemm.py OUT.json  (PyTorch with CUDA; about 20 s on an H100)
import json, sys, time
import torch

from cuda_timing import median_seconds

out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
       "sms": torch.cuda.get_device_properties(0).multi_processor_count}
dev = "cuda"
bf = torch.bfloat16

# (name, local experts, tokens per expert (mean), N, K): expert FC1 (N = 2*ffn, K = h) and
# FC2 (N = h, K = ffn) at the per-expert token counts of the MoE validation layouts.
cases = []
for name, h, ffn in [("qwen3-30b", 2048, 768), ("qwen3-235b", 4096, 1536), ("gpt-oss-120b", 2880, 2880),
                     ("deepseek-v3", 7168, 2048)]:
    for local, m in [(16, 256), (16, 1024), (16, 2048), (8, 4096), (4, 8192), (32, 512)]:
        cases.append((name + ".fc1", local, m, 2 * ffn, h))
        cases.append((name + ".fc2", local, m, h, ffn))
rows = []
gen = torch.Generator(device="cpu").manual_seed(0)
have_grouped = hasattr(torch, "_grouped_mm")
for name, local, m, n, k in cases:
    try:
        total = local * m
        x = torch.randn(total, k, device=dev, dtype=bf)
        w = torch.randn(local, n, k, device=dev, dtype=bf)
        wt = w.transpose(1, 2)  # (local, k, n)
        row = {"case": name, "local_experts": local, "m": m, "n": n, "k": k}
        for balance in ("balanced", "skewed"):
            if balance == "balanced":
                counts = [m] * local
            else:  # multinomial draw with a Zipf-like popularity, same total
                p = torch.tensor([1.0 / (i + 1) ** 0.5 for i in range(local)])
                counts = torch.distributions.Multinomial(total, p / p.sum()).sample().long().tolist()
                counts[-1] += total - sum(counts)
            offs = torch.tensor(counts, device=dev).cumsum(0).to(torch.int32)
            chunks = list(torch.split(x, counts))
            def loop():
                for i in range(local):
                    torch.mm(chunks[i], wt[i])
            row[balance + "_loop_s"] = median_seconds(loop)
            if have_grouped:
                try:
                    row[balance + "_grouped_s"] = median_seconds(lambda: torch._grouped_mm(x, wt, offs=offs))
                except Exception as ex:  # noqa: BLE001
                    row[balance + "_grouped_error"] = str(ex)[:200]
            row[balance + "_max_count"] = max(counts)
        # one dense GEMM of the same FLOPs for reference
        row["dense_s"] = median_seconds(lambda: torch.mm(x, wt[0]))
        rows.append(row)
        print(json.dumps(row), flush=True)
        del x, w, wt
    except Exception as ex:  # noqa: BLE001
        rows.append({"case": name, "error": str(ex)[:300]})
out["grouped"] = rows

# Eager host cost: tiny kernels, so the CPU sets the pace.
def host_rate(fn, n=3000):
    fn(); torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n): fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / n, (t2 - t0) / n
a = torch.randn(64, 64, device=dev, dtype=bf)
b = torch.randn(64, 64, device=dev, dtype=bf)
host = {}
host["add_launch_s"], host["add_wall_s"] = host_rate(lambda: a + b)
host["mm_launch_s"], host["mm_wall_s"] = host_rate(lambda: a @ b)
lin = torch.nn.Linear(64, 64, device=dev, dtype=bf)
xin = torch.randn(64, 64, device=dev, dtype=bf, requires_grad=True)
def fwd_bwd():
    y = torch.nn.functional.silu(lin(xin))
    y.sum().backward()
host["linear_silu_fwd_bwd_launch_s"], host["linear_silu_fwd_bwd_wall_s"] = host_rate(fwd_bwd, 1000)
# kernels that step launches
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CUDA]) as prof:
    fwd_bwd(); torch.cuda.synchronize()
host["linear_silu_fwd_bwd_kernels"] = sum(1 for e in prof.events() if e.device_type.name == "CUDA")
# D2H round trip on an idle GPU (the alltoall dispatcher's split sizes)
c = torch.ones(8, device=dev, dtype=torch.int64)
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(500): c.sum().item()
host["d2h_item_s"] = (time.perf_counter() - t0) / 500
out["host"] = host
print(json.dumps(host), flush=True)
try:
    out["cpu"] = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
except Exception:  # noqa: BLE001
    pass
json.dump(out, open(sys.argv[1], "w"), indent=1)
