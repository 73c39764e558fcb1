"""The network and limits layer's cost per node (issue 28's goal: <= 0.2 s): the node package's
``network.collect`` (interfaces from /sys/class/net with their addresses, NCCL_SOCKET_IFNAME
and GLOO_SOCKET_IFNAME resolved, InfiniBand ports, nvidia_peermem) and ``limits.collect``
(/dev/shm, ulimits, kernel, glibc), timed in process on this machine (no connects: the
rendezvous check is bench_rendezvous.py), with the import of both modules measured apart.

    python bench/bench_fabric.py [--runs 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "probes"))

IMPORT = "import time; t = time.perf_counter(); import envtool_node.network, envtool_node.limits; "
IMPORT += "print(time.perf_counter() - t)"


def main() -> int:
    from envtool_node import limits, network

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    times, interfaces = [], 0
    for _ in range(args.runs):
        start = time.perf_counter()
        doc = network.collect(os.environ)
        limits.collect()
        times.append(time.perf_counter() - start)
        interfaces = len(doc["interfaces"])
    env = {**os.environ, "PYTHONPATH": str(REPO / "probes")}
    imports = [float(subprocess.run([sys.executable, "-c", IMPORT], env=env, check=True,
                                    capture_output=True, text=True).stdout)
               for _ in range(min(args.runs, 7))]  # fmt: skip
    median, worst = statistics.median(times), max(times)
    print(f"runs: {args.runs}; {interfaces} interfaces here")
    print(f"network.collect + limits.collect: median {median * 1000:.1f} ms, worst "
          f"{worst * 1000:.1f} ms  ({median / 0.2:.1%} of the 0.2 s goal)")  # fmt: skip
    print(f"their import (fresh interpreter): median {statistics.median(imports) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
