"""``envtool explain`` on a ~200 MB interleaved job log (issue 34's measure, on a smaller file):
lines per second against ``grep -c 'NCCL WARN'`` on the same file in the same run (a ratio),
and explain's peak memory (its process's own, ``os.wait4``), which must not grow with the file.

The log is synthetic, made here: 16 ranks under ``srun --label`` on 4 nodes writing
``NCCL_DEBUG=INFO`` lines, training steps and a few WARN lines, then rank 6's /dev/shm runs
out and the other ranks' watchdogs time out. A 10 MB log of the same kind is timed too: the
peak RSS of both must be about the same (the read is bounded, not the file).

    python bench/bench_explain.py [MEGABYTES]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RANKS = 16


def _line(i: int) -> str:
    task = i % RANKS
    host, pid = f"node{task // 4 + 1:02d}", 7000 + task
    head = f"{task:>2}: {host}:{pid}:{pid + 3} [{task % 4}] NCCL INFO"
    kind = i % 10
    if kind < 6:
        peer = (task + 1) % RANKS
        return f"{head} Channel {i % 32:02d}/0 : {task}[{task % 4}] -> {peer} via P2P/IPC"
    if kind < 9:
        return f"{task:>2}: [rank{task}]: step {i // RANKS} loss {1.0 + (i % 97) / 100:.3f} lr 3e-4"
    if i % 1000 == 9:
        return f"{task:>2}: {host}:{pid}:{pid + 3} [{task % 4}] NCCL WARN NET/Socket : peer slow"
    return f"{head} comm 0x55d0 rank {task} nranks {RANKS} cudaDev {task % 4} - Init COMPLETE"


def write_log(path: Path, megabytes: int) -> int:
    """The synthetic log, written in blocks; its line count."""
    n, size, limit = 0, 0, megabytes * 10**6
    with path.open("w") as fh:
        while size < limit:
            block = "".join(_line(n + j) + "\n" for j in range(10_000))
            fh.write(block)
            size, n = size + len(block), n + 10_000
        fh.write(
            " 6: node02:7006:7011 [2] include/shm.h:28 NCCL WARN Call to posix_fallocate "
            "failed : No space left on device\n"
        )
        for task in (t for t in range(RANKS) if t != 6):
            fh.write(
                f"{task:>2}: [rank{task}]:[E] [Rank {task}] Watchdog caught collective "
                "operation timeout: WorkNCCL(SeqNum=812, OpType=ALLREDUCE, NumelIn=1, "
                "NumelOut=1, Timeout(ms)=600000) ran for 600011 milliseconds\n"
            )
    return n + RANKS


def _timed(argv: list[str]) -> tuple[float, float, int, bytes]:
    """(seconds, peak RSS in MiB, exit code, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    return (
        time.perf_counter() - start,
        usage.ru_maxrss / 1024,
        os.waitstatus_to_exitcode(status),
        out,
    )


def main() -> None:
    megabytes = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    explain = [sys.executable, "-m", "envtool", "explain"]
    with tempfile.TemporaryDirectory() as tmp:
        for mb in (10, megabytes):
            log = Path(tmp) / f"job-{mb}.log"
            lines = write_log(log, mb)
            size = log.stat().st_size / 2**20
            g_s, _, _, count = _timed(["grep", "-c", "NCCL WARN", str(log)])
            e_s, rss, code, out = _timed([*explain, str(log)])
            print(
                f"{size:7.1f} MiB, {lines:,} lines: explain {e_s:.2f} s ({lines / e_s:,.0f} "
                f"lines/s, peak RSS {rss:.0f} MiB, exit {code}); grep -c 'NCCL WARN' "
                f"{g_s:.2f} s ({count.decode().strip()} lines); ratio {e_s / g_s:.1f}x"
            )
            print("   ", out.decode().splitlines()[0])


if __name__ == "__main__":
    main()
