# Timing shared by the probes: the median of CUDA-event timed runs after warm-up.
import torch


def median_seconds(fn, warm=3, iters=10):
    """Median wall time on the GPU stream of `iters` calls of fn, after `warm` untimed calls."""
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return sorted(times)[len(times) // 2]
