"""``envtool probe`` against its floor: what one node's probe costs beyond the work itself.

The floor is the work with nothing around it: the ranks started at once, each importing torch
once, initialising a gloo process group (env://) and running the same all-reduce sweep
(``dist.all_reduce`` out-of-place and in-place, warm-up and timed iterations per size), then
exiting. ``envtool probe`` does the same sweep plus the GPU facts and its launcher, and
``envtool verify --allreduce node`` on this one machine (local transport) adds the export and
the judging; the ratios of the medians are what those add (issue 18's goal: <= 1.3x).

    python bench/bench_probe.py [--runs 5] [--nproc 2]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
SWEEP = ("-b", "8", "-e", "8M", "-f", "4", "-n", "5", "-w", "2")
RANK = """
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
size = 8
while size <= 8 * 2**20:
    send = torch.ones(max(1, size // 4))
    recv = torch.empty_like(send)
    for placement in range(2):
        for _ in range(2 + 5):
            if placement == 0:
                recv.copy_(send)
                dist.all_reduce(recv)
            else:
                dist.all_reduce(send)
    size *= 4
dist.destroy_process_group()
"""


def _port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def floor(nproc: int) -> float:
    """The ranks alone, started at once."""
    port = _port()
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RANK],
            env={
                **os.environ,
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": port,
                "RANK": str(rank),
                "WORLD_SIZE": str(nproc),
            },
        )
        for rank in range(nproc)
    ]
    if any(p.wait(timeout=600) for p in procs):
        raise SystemExit("a floor rank failed")
    return time.perf_counter() - start


def probe(nproc: int) -> float:
    """``envtool probe`` with the same sweep and ranks."""
    start = time.perf_counter()
    argv = [str(BIN / "envtool"), "probe", "--nproc", str(nproc), *SWEEP, "--format", "json"]
    subprocess.run(argv, check=True, capture_output=True, timeout=600)
    return time.perf_counter() - start


def verify(nproc: int) -> float:
    """``envtool verify --allreduce node`` on this machine, the same sweep and ranks."""
    start = time.perf_counter()
    argv = [
        str(BIN / "envtool"), "verify", "--hosts", "localhost", "--transport", "local",
        "--no-lock", "--prefix", sys.prefix, "--min-gpus", "0", "--allreduce", "node",
        "--allreduce-args", " ".join([*SWEEP, "--nproc", str(nproc)]), "--format", "json",
    ]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if '"allreduce"' not in out.stdout or out.returncode not in (0, 1):
        raise SystemExit(f"verify failed: {out.stderr[-300:]}")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nproc", type=int, default=2)
    args = parser.parse_args()
    floors, probes, verifies = [], [], []
    for _ in range(args.runs):  # alternating, so a slow spell of the machine hits all three
        floors.append(floor(args.nproc))
        probes.append(probe(args.nproc))
        verifies.append(verify(args.nproc))
    f, p, v = (statistics.median(x) for x in (floors, probes, verifies))
    print(f"runs: {args.runs} (medians), ranks: {args.nproc}, sweep: {' '.join(SWEEP)}")
    print(f"floor (ranks alone, one import each):     {f:6.2f} s")
    print(f"envtool probe:                            {p:6.2f} s  {p / f:5.2f}x the floor")
    print(f"envtool verify --allreduce node (local):  {v:6.2f} s  {v / f:5.2f}x the floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
