"""An all-reduce bandwidth test with nccl-tests semantics, launched through torchrun.

    python -m envtool_node.allreduce [-b 8] [-e 32M] [-f 2] [-n 20] [-w 5] [--nproc N]
                                     [--backend auto|nccl|gloo] [--timeout S]

Without ``--worker`` it is the launcher: it starts ``torchrun --standalone`` with one process
per GPU (NCCL), or ``--nproc`` processes on the CPU (gloo), waits with a deadline and prints
rank 0's result as one JSON document (schema envtool.allreduce/1). It measures; envtool lays
the result out in ``all_reduce_perf``'s text (envtool/report/nccl_text.py).
With ``--worker`` (set by the launcher, or by a multi-node torchrun) it is one rank.

Semantics (nccl-tests doc/PERFORMANCE.md): per size S, ``algbw = S / t`` (decimal GB/s),
``busbw = algbw * 2(n-1)/n``; t is the mean of ``-n`` timed iterations after ``-w`` warm-up
ones, the slowest rank's. Inputs are deterministic (rank r, element i: (r+1)*(i%97+1)), the
exact sum is known, and wrong elements are counted and summed over ranks (#wrong).
torch.distributed has no out-of-place all-reduce: out-of-place copies the send buffer into
the receive buffer and reduces that, the copy included in the time; in-place reduces the
send buffer itself.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import Any

from . import perf, torchrun
from .schema import ALLREDUCE


def _size(text: str) -> int:
    try:
        return perf.parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    """The command line shared by the launcher and the workers."""
    p = argparse.ArgumentParser(
        prog="python -m envtool_node.allreduce", description="all-reduce bandwidth test"
    )
    p.add_argument("-b", "--minbytes", type=_size, default=8)
    p.add_argument("-e", "--maxbytes", type=_size, default=32 << 20)
    p.add_argument("-f", "--stepfactor", type=int, default=2)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", type=int, default=5)
    p.add_argument("--nproc", type=int, default=0, help="processes (default: GPUs, else 2)")
    p.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    p.add_argument("--format", choices=("json",), default="json", help="the output (JSON)")
    p.add_argument("--timeout", type=float, default=300.0, help="deadline in seconds")
    p.add_argument("--nnodes", type=int, default=1, help="nodes (> 1: a multi-node run)")
    p.add_argument("--rdzv-endpoint", default="", help="HOST:PORT of the c10d rendezvous")
    p.add_argument("--rdzv-id", default="envtool", help="rendezvous id shared by the nodes")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", default="", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, default=0.0, help=argparse.SUPPRESS)
    return p


# ---------------------------------------------------------------- worker side (one rank)


def _fill(torch: Any, count: int, rank: int, device: Any) -> Any:
    idx = torch.arange(count, dtype=torch.int64, device=device)
    return ((idx % 97) + 1).to(torch.float32) * float(rank + 1)


def _expected(torch: Any, count: int, nranks: int, device: Any) -> Any:
    idx = torch.arange(count, dtype=torch.int64, device=device)
    return ((idx % 97) + 1).to(torch.float32) * float(nranks * (nranks + 1) // 2)


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(torch: Any, dist: Any, device: Any, step: Any, iters: int, warmup: int) -> float:
    """Mean seconds per call of ``step`` on the slowest rank."""
    for _ in range(warmup):
        step()
    _sync(torch, device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        step()
    _sync(torch, device)
    elapsed = torch.tensor(
        [(time.perf_counter() - start) / max(iters, 1)], dtype=torch.float64, device=device
    )
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    return float(elapsed.item())


def _wrong(torch: Any, dist: Any, result: Any, expected: Any, device: Any) -> int:
    bad = torch.tensor([int((result != expected).sum().item())], dtype=torch.int64, device=device)
    dist.all_reduce(bad)
    return int(bad.item())


def _gather_json(torch: Any, dist: Any, device: Any, obj: dict[str, Any]) -> list[Any]:
    """all_gather of small JSON documents through a byte tensor (all_gather_object needs numpy)."""
    data = json.dumps(obj).encode()[:1024].ljust(1024, b" ")
    mine = torch.tensor(list(data), dtype=torch.uint8, device=device)
    parts = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, mine)
    return [json.loads(bytes(p.cpu().tolist()).decode()) for p in parts]


def _one_size(torch: Any, dist: Any, device: Any, size: int, args: Any) -> dict[str, Any]:
    nranks, rank = dist.get_world_size(), dist.get_rank()
    count = size // perf.ELEM
    send = _fill(torch, count, rank, device)
    recv = torch.empty_like(send)
    expected = _expected(torch, count, nranks, device)

    def out_of_place() -> None:
        recv.copy_(send)
        dist.all_reduce(recv)

    t_oop = _timed(torch, dist, device, out_of_place, args.iters, args.warmup_iters)
    out_of_place()
    wrong_oop = _wrong(torch, dist, recv, expected, device)
    buf = send.clone()
    t_ip = _timed(torch, dist, device, lambda: dist.all_reduce(buf), args.iters, args.warmup_iters)
    buf.copy_(send)
    dist.all_reduce(buf)
    wrong_ip = _wrong(torch, dist, buf, expected, device)
    return {
        "size": size,
        "count": count,
        "type": "float",
        "redop": "sum",
        "root": -1,
        "oop": _figures(size, t_oop, nranks, wrong_oop),
        "ip": _figures(size, t_ip, nranks, wrong_ip, moves_data=nranks > 1),
    }


def _figures(
    size: int, seconds: float, nranks: int, wrong: int, moves_data: bool = True
) -> dict[str, Any]:
    """time, algbw, busbw of one placement; an in-place all-reduce of one rank moves no data:
    its time is the call's cost, and it has no bandwidth (0, not size/time)."""
    time_us = seconds * 1e6
    algbw = perf.algbw(size, time_us) if time_us > 0 and moves_data else 0.0
    return {"time_us": time_us, "algbw": algbw, "busbw": perf.busbw(algbw, nranks), "wrong": wrong}


def _device_line(torch: Any, dist: Any, device: Any) -> dict[str, Any]:
    name, bus = "cpu", "cpu"
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name = props.name
        bus = "0x%02x" % getattr(props, "pci_bus_id", 0)
    return {
        "rank": dist.get_rank(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "device": device.index if device.index is not None else 0,
        "name": name,
        "bus": bus,
    }


def worker(args: Any) -> int:
    """One rank: sweep the sizes, rank 0 writes the result document to ``--out``."""
    torch, dist, backend, device = torchrun.init_rank(args.backend, args.deadline)
    try:
        devices = _gather_json(torch, dist, device, _device_line(torch, dist, device))
        rows = [
            _one_size(torch, dist, device, s, args)
            for s in perf.sweep(args.minbytes, args.maxbytes, args.stepfactor)
        ]
        if dist.get_rank() == 0 and args.out:
            doc = _document(args, backend, dist.get_world_size(), rows, devices, torch)
            with open(args.out, "w", encoding="utf-8") as fh:
                json.dump(doc, fh)
    finally:
        dist.destroy_process_group()
    return 0


def _document(
    args: Any, backend: str, nranks: int, rows: list[dict[str, Any]], devices: list[Any], torch: Any
) -> dict[str, Any]:
    busbws = [r[k]["busbw"] for r in rows for k in ("oop", "ip")]  # nccl-tests' own average
    return {
        "schema": ALLREDUCE,
        "backend": backend,
        "nranks": nranks,
        "torch": str(torch.__version__),
        "params": {
            "minbytes": args.minbytes,
            "maxbytes": args.maxbytes,
            "stepfactor": args.stepfactor,
            "iters": args.iters,
            "warmup_iters": args.warmup_iters,
        },
        "devices": devices,
        "rows": rows,
        "wrong_total": sum(r["oop"]["wrong"] + r["ip"]["wrong"] for r in rows),
        "avg_busbw": sum(busbws) / len(busbws) if busbws else 0.0,
    }


# ---------------------------------------------------------------- launcher side


def _worker_args(args: Any) -> list[str]:
    return [
        "-b", str(args.minbytes), "-e", str(args.maxbytes), "-f", str(args.stepfactor),
        "-n", str(args.iters), "-w", str(args.warmup_iters), "--backend", args.backend,
    ]  # fmt: skip


def _rendezvous(args: Any) -> list[str]:
    """--standalone on one node; a c10d rendezvous on the first node across several."""
    if args.nnodes <= 1:
        return ["--standalone"]
    if not args.rdzv_endpoint:
        raise SystemExit("allreduce: --nnodes > 1 needs --rdzv-endpoint HOST:PORT")
    return [
        "--nnodes",
        str(args.nnodes),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        args.rdzv_endpoint,
        "--rdzv-id",
        args.rdzv_id,
        "--rdzv-conf",
        "join_timeout=%d" % max(1, int(args.timeout)),
    ]


def launch(args: Any) -> dict[str, Any]:
    """Run torchrun with a deadline; rank 0's document, a member's, or an error one."""
    gpus = torchrun.gpu_count()
    backend = args.backend if args.backend != "auto" else ("nccl" if gpus else "gloo")
    nproc = args.nproc or (gpus if backend == "nccl" else 2)
    module = "%s.allreduce" % __package__
    text, why = torchrun.run_ranks(
        _rendezvous(args), nproc, module, _worker_args(args), args.timeout
    )
    if text:
        doc: dict[str, Any] = json.loads(text)
        return doc
    if not why and args.nnodes > 1:  # rank 0 ran on another node, which reports the result
        return {"schema": ALLREDUCE, "backend": backend, "nranks": 0, "rows": [], "member": True}
    return _error(backend, nproc, why or "torchrun exited 0 without a result")


def _error(backend: str, nproc: int, message: str) -> dict[str, Any]:
    return {"schema": ALLREDUCE, "backend": backend, "nranks": nproc, "rows": [], "error": message}


def main(argv: list[str] | None = None) -> int:
    """Launcher or worker, by ``--worker``."""
    args = build_parser().parse_args(argv)
    return torchrun.main(
        args, worker, launch, lambda why: _error(args.backend, args.nproc, why), "allreduce"
    )


if __name__ == "__main__":
    sys.exit(main())
