"""Bounded reads, measured (issue 24 item 6): the peak memory of each reader fed an endless or
oversized file, against the same process reading a small honest file (the floor).

Each reader once with ``/dev/zero`` (or a 1 GiB sparse file) where a file is expected: the
lock (``envtool check``), a hosts file (``envtool verify --hosts``), an nccl-tests log
(``envtool nccl-tests``), a conda-meta record on the node side (``python -m
envtool_node.export``) and on the controller (``envtool export --prefix``). Peak RSS is the
process's own (``os.wait4``); every run must end with a one-line error, exit 1 or 2.

    python bench/bench_bounded.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENVTOOL = str(Path(sys.executable).parent / "envtool")
GIB = 1 << 30


def _run(argv: list[str], cwd: Path) -> tuple[float, float, int, str]:
    """(seconds, peak RSS in MiB, exit code, last line of stderr)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    last = (err.decode(errors="replace").strip().splitlines() or [""])[-1]
    return (
        time.perf_counter() - start,
        usage.ru_maxrss / 1024,
        os.waitstatus_to_exitcode(status),
        last,
    )


def _prefix(root: Path, record: str) -> Path:
    """A prefix whose one conda-meta record is ``record`` (a symlink to /dev/zero, or 1 GiB)."""
    meta = root / "conda-meta"
    meta.mkdir(parents=True)
    (root / "bin").mkdir()
    path = meta / "numpy-1.26.4-py39_0.json"
    if record == "zero":
        path.symlink_to("/dev/zero")
    else:
        with path.open("wb") as fh:
            fh.truncate(GIB)  # sparse: nothing written, 1 GiB to read
    return root


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="envtool-bench-bounded-") as tmp:
        work = Path(tmp)
        lock = str(REPO / "conda-lock.yml")
        hosts = work / "hosts.txt"
        hosts.write_text("localhost\n")
        big = work / "big.log"
        with big.open("wb") as fh:
            fh.truncate(GIB)
        node = [sys.executable, "-B", "-m", "envtool_node.export", "--prefix"]
        cases = [
            ("lock: envtool check", [ENVTOOL, "check", lock], [ENVTOOL, "check", "/dev/zero"]),
            ("hosts file: envtool verify --hosts",
             [ENVTOOL, "verify", "--hosts", str(hosts), "--transport", "local", "--no-lock"],
             [ENVTOOL, "verify", "--hosts", "/dev/zero", "--transport", "local", "--no-lock"]),
            ("nccl-tests log (1 GiB sparse)", [ENVTOOL, "nccl-tests", lock],
             [ENVTOOL, "nccl-tests", str(big)]),
            ("conda-meta record -> /dev/zero, node side", [*node, str(REPO)],
             [*node, str(_prefix(work / "p1", "zero"))]),
            ("conda-meta record of 1 GiB, controller (envtool export)",
             [ENVTOOL, "export", "--prefix", str(REPO)],
             [ENVTOOL, "export", "--prefix", str(_prefix(work / "p2", "big"))]),
        ]  # fmt: skip
        print(f"{'reader':58} {'floor MiB':>9} {'hostile MiB':>11} {'ratio':>6} {'s':>6}  exit")
        for name, floor_argv, hostile_argv in cases:
            floor = _run(floor_argv, REPO)
            hostile = _run(hostile_argv, REPO)
            print(f"{name:58} {floor[1]:9.0f} {hostile[1]:11.0f} {hostile[1] / floor[1]:6.2f} "
                  f"{hostile[0]:6.2f}  {hostile[2]}: {hostile[3][:90]}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
