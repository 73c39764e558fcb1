"""verify's package judgment at a fleet's scale: each node's records against the lock
(judge/packages.py ``against_lock``), for 1,000 nodes that sent the real pangeo-pytorch
lock's 767 packages as their records, 10 of them with an older nccl. Measured in one run:
``against_lock`` (hosts with the same records compared once) against the same comparison
made host by host (``diff`` per host, as before), and ``package_spread`` (where the lock is
silent: each node's packages against the others') beside them.

    python bench/bench_judge.py [--hosts 1000] [--runs 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from envtool import environments
from envtool.judge import packages, verdict
from envtool.lock import lockfile
from envtool.models import Environment

LOCK = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "real"
    / "pangeo-pytorch.conda-lock.yml"
)


def _fleet(lock: Environment, hosts: int) -> dict[str, Environment]:
    old = tuple(replace(p, version="2.16.5.1", sha256="") if p.name == "nccl" else p
                for p in lock.packages)  # fmt: skip
    return {f"gpu{i:04d}": Environment(f"gpu{i:04d}", "probe", old if i % 100 == 7 else
                                       lock.packages) for i in range(hosts)}  # fmt: skip


def _best(runs: int, work: object) -> float:
    assert callable(work)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if not LOCK.is_file():
        sys.exit(f"bench_judge: {LOCK} is needed (../shared/data/real)")
    lock = environments.from_lock(lockfile.read(LOCK), str(LOCK), "linux-64")
    fleet = _fleet(lock, args.hosts)
    once = _best(args.runs, lambda: packages.against_lock(lock, fleet))
    each = _best(args.runs, lambda: [f for env in fleet.values()
                                     for f in packages.diff(lock, env)])  # fmt: skip
    spread = _best(args.runs, lambda: verdict.package_spread(fleet, lock))
    found = packages.against_lock(lock, fleet)
    print(f"{args.hosts} hosts x {len(lock.packages)} packages ({len(found)} findings), best "
          f"of {args.runs}:")  # fmt: skip
    print(f"  against_lock, same records once: {once * 1000:.1f} ms")
    print(f"  diff host by host (before):       {each * 1000:.1f} ms  ({each / once:.0f}x)")
    print(f"  package_spread:                   {spread * 1000:.1f} ms")


if __name__ == "__main__":
    main()
