# Host (CPU) time of one expert MLP's forward and backward, by number of local experts, on
# tiny shapes so that the CPU, not the GPU, sets the pace. Transformer Engine's GroupedLinear
# (the experts of Megatron-Core's TEGroupedMLP) when it is installed, in bf16 and FP8 current
# scaling; PyTorch's grouped mm and a per-expert loop of F.linear always. Kernels per call are
# counted with the profiler. Prints one JSON object.
import json
import sys
import time

import torch
import torch.nn.functional as F

dev = "cuda"
bf = torch.bfloat16
HIDDEN, FFN, TOKENS_PER_EXPERT = 256, 128, 16
EXPERTS = [1, 2, 4, 8, 16, 32]


def host_seconds(fn, n=200):
    """Mean CPU time per call of fn with the GPU left to catch up, and the wall time per call."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return (t1 - t0) / n, (t2 - t0) / n


def kernels(fn):
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


def row(name, e, fn):
    try:
        launch, wall = host_seconds(fn)
        return {"case": name, "experts": e, "host_s": launch, "wall_s": wall, "kernels": kernels(fn)}
    except Exception as ex:  # noqa: BLE001
        return {"case": name, "experts": e, "error": str(ex)[:300]}


def fc1_fc2_loop(e):
    w1 = [torch.randn(2 * FFN, HIDDEN, device=dev, dtype=bf, requires_grad=True) for _ in range(e)]
    w2 = [torch.randn(HIDDEN, FFN, device=dev, dtype=bf, requires_grad=True) for _ in range(e)]
    x = torch.randn(e * TOKENS_PER_EXPERT, HIDDEN, device=dev, dtype=bf, requires_grad=True)

    def step():
        outs = []
        for i, xi in enumerate(x.split(TOKENS_PER_EXPERT)):
            h = F.linear(xi, w1[i])
            a, b = h.chunk(2, dim=-1)
            outs.append(F.linear(F.silu(a) * b, w2[i]))
        torch.cat(outs).sum().backward()

    return step


def fc1_fc2_grouped_mm(e):
    w1 = torch.randn(e, HIDDEN, 2 * FFN, device=dev, dtype=bf, requires_grad=True)
    w2 = torch.randn(e, FFN, HIDDEN, device=dev, dtype=bf, requires_grad=True)
    x = torch.randn(e * TOKENS_PER_EXPERT, HIDDEN, device=dev, dtype=bf, requires_grad=True)
    offs = torch.arange(1, e + 1, device=dev, dtype=torch.int32) * TOKENS_PER_EXPERT

    def step():
        h = torch._grouped_mm(x, w1, offs=offs)
        a, b = h.chunk(2, dim=-1)
        y = torch._grouped_mm(F.silu(a) * b, w2, offs=offs)
        y.backward(torch.ones_like(y))  # a dense gradient: the grouped mm takes no stride-0 one

    return step


def fc1_fc2_te(e, recipe):
    import transformer_engine.pytorch as te

    fc1 = te.GroupedLinear(e, HIDDEN, 2 * FFN, bias=False, params_dtype=bf, device=dev)
    fc2 = te.GroupedLinear(e, FFN, HIDDEN, bias=False, params_dtype=bf, device=dev)
    x = torch.randn(e * TOKENS_PER_EXPERT, HIDDEN, device=dev, dtype=bf, requires_grad=True)
    splits = [TOKENS_PER_EXPERT] * e

    def step():
        with te.fp8_autocast(enabled=recipe is not None, fp8_recipe=recipe):
            h = fc1(x, splits)
            a, b = h.chunk(2, dim=-1)
            y = fc2(F.silu(a) * b, splits)
        y.sum().backward()

    return step


out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
try:
    out["cpu"] = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
except OSError:
    pass
rows = []
for e in EXPERTS:
    rows.append(row("torch_loop", e, fc1_fc2_loop(e)))
    if hasattr(torch, "_grouped_mm"):
        rows.append(row("torch_grouped_mm", e, fc1_fc2_grouped_mm(e)))
try:
    import transformer_engine
    import transformer_engine.common.recipe as rcp

    out["transformer_engine"] = transformer_engine.__version__
    recipes = {"te_bf16": None}
    if hasattr(rcp, "Float8CurrentScaling"):
        recipes["te_fp8_current"] = rcp.Float8CurrentScaling()
    recipes["te_fp8_delayed"] = rcp.DelayedScaling()
    for name, recipe in recipes.items():
        for e in EXPERTS:
            rows.append(row(name, e, fc1_fc2_te(e, recipe)))
except ImportError as ex:
    out["transformer_engine"] = "not installed: " + str(ex)[:200]
out["rows"] = rows
json.dump(out, sys.stdout)
print()
