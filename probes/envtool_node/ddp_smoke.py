"""A two-process DistributedDataParallel smoke test: one training step, checked.

    python -m envtool_node.ddp_smoke [--nproc 2] [--backend auto|nccl|gloo] [--timeout 120]

The launcher starts ``python -m envtool_node.ddp_smoke --worker`` ranks at once
(envtool_node.launch, no torchrun): NCCL with one process per GPU (at most ``--nproc``)
where CUDA works, gloo on the CPU otherwise. Each rank builds the same small model, wraps it
in DDP, runs forward and backward on its own deterministic batch, and the ranks then check
together that

- the gradients DDP left on every rank are equal (all-gathered, compared with rank 0's),
- they equal the mean of the ranks' local gradients (computed without DDP, reduced by hand),
- an all-reduce of ``rank + 1`` gives ``n(n+1)/2`` exactly,
- after one SGD step the parameters are still equal on every rank.

It prints one JSON document (schema ``envtool.ddp-smoke/1``) and exits 0 when every check
passed, 1 when one failed or the run did not finish. Standard library and torch only.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from typing import Any

from . import launch as ranks
from . import rank
from .schema import DDP_SMOKE

TOLERANCE = 1e-5  # float32 sums in another order


def build_parser() -> argparse.ArgumentParser:
    """Options of the launcher and the workers."""
    p = argparse.ArgumentParser(
        prog="python -m envtool_node.ddp_smoke", description="DDP smoke test"
    )
    p.add_argument("--nproc", type=int, default=2, help="processes (NCCL: at most the GPUs)")
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--timeout", type=float, default=120.0, help="deadline in seconds")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default="", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--started", default="", help=argparse.SUPPRESS)
    return p


# ---------------------------------------------------------------- worker side (one rank)


def _flat_grads(model: Any, torch: Any) -> Any:
    return torch.cat([p.grad.detach().flatten() for p in model.parameters()])


def _gathered_max_diff(torch: Any, dist: Any, value: Any) -> float:
    """The largest difference between any rank's ``value`` and rank 0's."""
    parts = [torch.empty_like(value) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, value)
    return max(float((p - parts[0]).abs().max().item()) for p in parts)


def _max_over_ranks(torch: Any, dist: Any, value: float, device: Any) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _step(torch: Any, dist: Any, device: Any) -> dict[str, Any]:
    from torch.nn.parallel import DistributedDataParallel

    rank, nranks = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    ).to(device)
    local = torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)
    ).to(device)
    local.load_state_dict(model.state_dict())
    ddp = DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )
    gen = torch.Generator().manual_seed(1000 + rank)  # each rank its own batch
    x = torch.randn(8, 16, generator=gen).to(device)
    y = torch.randn(8, 4, generator=gen).to(device)
    loss = ((ddp(x) - y) ** 2).mean()
    loss.backward()
    ((local(x) - y) ** 2).mean().backward()
    grads = _flat_grads(ddp.module, torch)
    mean = _flat_grads(local, torch)
    dist.all_reduce(mean)
    mean /= nranks
    ones = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(ones)
    torch.optim.SGD(ddp.parameters(), lr=0.1).step()
    params = torch.cat([p.detach().flatten() for p in ddp.module.parameters()])
    del ddp  # its reducer holds the process group: gone before the group is destroyed
    gc.collect()
    figures: dict[str, Any] = {
        "grad_max_diff_across_ranks": _gathered_max_diff(torch, dist, grads),
        "grad_max_diff_vs_mean": _max_over_ranks(
            torch, dist, float((grads - mean).abs().max().item()), device
        ),
        "allreduce_sum": float(ones.item()),
        "params_max_diff_after_step": _gathered_max_diff(torch, dist, params),
        "loss_rank0": float(loss.item()),
    }
    figures["checks"] = {
        "gradients equal across ranks": figures["grad_max_diff_across_ranks"] <= TOLERANCE,
        "gradients are the mean of the ranks' gradients": figures["grad_max_diff_vs_mean"]
        <= TOLERANCE,
        "all-reduce sum exact": figures["allreduce_sum"] == nranks * (nranks + 1) / 2,
        "parameters equal after an SGD step": figures["params_max_diff_after_step"] <= TOLERANCE,
    }
    return figures


def worker(args: Any) -> int:
    """One rank: the step and its checks; rank 0 writes the document to ``--out``."""
    begun = rank.begin(args, default_cpu=args.nproc)
    if begun is None:  # the launcher's guess was wrong; rank 0 told it the plan
        return 0
    torch, backend = begun
    dist, device = rank.init(torch, backend)
    try:
        start = time.perf_counter()
        figures = _step(torch, dist, device)
        if dist.get_rank() == 0 and args.out:
            doc = {
                "schema": DDP_SMOKE,
                "backend": backend,
                "nranks": dist.get_world_size(),
                "device": device.type,
                "torch": str(torch.__version__),
                "seconds": time.perf_counter() - start,
                "ok": all(figures["checks"].values()),
                **figures,
            }
            rank.write(args.out, doc)
        dist.barrier()  # no rank leaves while another still talks to it
    finally:
        dist.destroy_process_group()
    rank.leave()
    return 0


# ---------------------------------------------------------------- launcher side


def _error(backend: str, nproc: int, message: str) -> dict[str, Any]:
    return {"schema": DDP_SMOKE, "backend": backend, "nranks": nproc, "ok": False, "error": message}


def launch(args: Any) -> dict[str, Any]:
    """The ranks at once with a deadline; rank 0's document, or an error document."""
    nproc = max(1, args.nproc)
    job = ranks.Job("%s.ddp_smoke" % __package__, (), args.timeout, args.backend, nproc, nproc)
    text, why = ranks.finish(job, ranks.begin(job))
    if not text:
        return _error(args.backend, nproc, why or "the ranks exited 0 without a result")
    doc: dict[str, Any] = json.loads(text)
    return doc


def main(argv: list[str] | None = None) -> int:
    """Launcher or worker, by ``--worker``."""
    args = build_parser().parse_args(argv)
    return rank.main(
        args, worker, launch, lambda why: _error(args.backend, args.nproc, why), "ddp_smoke"
    )


if __name__ == "__main__":
    sys.exit(main())
