"""Readers are linear (issue 24, item 6): each reader timed on its large input, against a
linear floor measured in the same run (``str.splitlines`` over the same bytes).

    python bench/bench_readers.py [--runs 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from envtool.cluster import hosts  # noqa: E402
from envtool.lock import explicit, lockfile  # noqa: E402
from envtool.nccl import parse as nccl  # noqa: E402

SHA = "ab" * 32
ROW = "  8  2  float  sum  -1  10.54  0.00  0.00  0  10.40  0.00  0.00  0"


def _nccl_header() -> str:
    return f"# nThread 1 nGpus 1 {'x' * 60_000}\n{ROW}\n# Avg bus bandwidth    : 0.0\n"


def _explicit() -> str:
    url = "https://files.example/six-1.16.0-py2.py3-none-any.whl"
    lines = [f"# pip six @ {url} \\"] + [f"# pip --hash=sha256:{SHA} \\"] * 75_000
    return "@EXPLICIT\n" + "\n".join(lines) + f"\n# pip --hash=sha256:{SHA}\n"


def _lock(n: int = 16_000) -> str:
    url = "https://conda.anaconda.org/conda-forge/noarch/six-1.16.0-pyhd8ed1ab_0.conda"
    entry = (
        "- name: six\n  version: 1.16.0\n  manager: conda\n  platform: linux-64\n"
        f"  dependencies: {{}}\n  url: {url}\n  hash:\n    md5: {'a' * 32}\n"
        f"    sha256: {SHA}\n  category: CAT\n  optional: true\n"
    )
    head = (
        "version: 1\nmetadata:\n  content_hash:\n    linux-64: x\n  channels: []\n"
        "  platforms: [linux-64]\n  sources: []\npackage:\n"
    )
    return head + "".join(entry.replace("CAT", f"c{i:05d}") for i in range(n))


def _node_set() -> str:
    return ",".join(f"gpu{i}" for i in range(0, 200_000, 2))


CASES: dict[str, tuple[Callable[[], str], Callable[[str], object]]] = {
    "nccl-tests 60 KB header": (_nccl_header, nccl.parse),
    "@EXPLICIT 6.4 MB pip continuation": (
        _explicit,
        lambda t: explicit.parse(t, Path("x.txt"), "linux-64"),
    ),
    "conda-lock 16,000 categories": (_lock, lambda t: lockfile.parse(t, Path("l.yml"))),
    "--hosts 100,000 names": (_node_set, lambda t: hosts.parse_text(t, "--hosts")),
}


def _best(fn: Callable[[str], object], text: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    """Print one row per reader: input size, its time, the floor and the ratio."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"{'reader':36} {'bytes':>10} {'time s':>8} {'floor s':>8} {'ratio':>8}")
    for name, (make, read) in CASES.items():
        text = make()
        took = _best(read, text, args.runs)
        floor = _best(str.splitlines, text, max(args.runs, 5))
        ratio = took / floor if floor else float("inf")
        print(f"{name:36} {len(text):>10} {took:>8.3f} {floor:>8.4f} {ratio:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
