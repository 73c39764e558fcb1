"""How long one all-reduce call takes, as nccl-tests times it: warm-up calls, then ``iters``
timed calls, the mean per call on the slowest rank; eagerly, or captured in a CUDA graph and
replayed (``-G``). Python 3.9, torch passed in (never imported here).
"""

from __future__ import annotations

import time
from typing import Any


def sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def eager(torch: Any, dist: Any, device: Any, step: Any, iters: int, warmup: int) -> float:
    """Mean seconds per call of ``step`` on the slowest rank."""
    for _ in range(warmup):
        step()
    sync(torch, device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        step()
    sync(torch, device)
    elapsed = torch.tensor(
        [(time.perf_counter() - start) / max(iters, 1)], dtype=torch.float64, device=device
    )
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item())


def graphed(
    torch: Any, dist: Any, device: Any, step: Any, iters: int, warmup: int, replays: int
) -> float:
    """Mean seconds per call of ``step`` captured ``iters`` times in a CUDA graph and replayed
    ``replays`` times (nccl-tests' -G), on the slowest rank. The warm-up runs eagerly on a
    side stream first, as capture requires (NCCL's communicator exists by then)."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(max(1, warmup)):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(iters):
            step()
    graph.replay()  # the first replay uploads the graph: not timed
    torch.cuda.synchronize(device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize(device)
    per_call = (time.perf_counter() - start) / max(iters * replays, 1)
    elapsed = torch.tensor([per_call], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item())
