"""The history store at a fleet's scale: 1,000 hosts x 1 year of nightly verify runs, made by
a generator (each night a verify document of 1,000 hosts: an NCCL drift that starts on ~1 %
of the hosts a night and lasts 1 to 10 nights, a small /dev/shm on 1 % of them all year, a
host unreachable now and then; the documents have the verify report's shape, with no node
facts). Measured in one run:

- recording's cost per run (one 1,000-host document into the store), against the cost of
  making that run's report JSON (``verify_report.dumps``: what every run pays anyway);
- ``envtool history`` (the store's two queries, the timeline and its text) against the
  ``sqlite3`` command running the same two queries, at 1, 3 and 12 months: how it grows;
- the metrics file's size for 1,000 hosts;
- ``envtool history`` (the process: wall time and its peak RSS) on one host's 10,000,
  100,000 and 1,000,000 runs, against ``sqlite3`` running the same queries.

    python bench/bench_history.py [--hosts 1000] [--nights 365] [--runs-only]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # the store of many runs the tests read too
sys.path.insert(0, str(REPO))

from fixtures import history_runs  # noqa: E402

from envtool.history import metrics, queries, store, timeline  # noqa: E402
from envtool.protocol import verify_report  # noqa: E402
from envtool.protocol.verify_report import (  # noqa: E402
    AllReduceEntry,
    FindingEntry,
    HostEntry,
    VerifyDocument,
)
from envtool.report import history_text  # noqa: E402

DAY = 86400.0
START = 1767225600.0  # 2026-01-01 UTC
SWEEP = tuple((8 << 2 * i, 380.0 * i / 11) for i in range(12))  # verify's -b 8 -e 32M -f 4


def nights(hosts: int, count: int, seed: int = 7) -> list[VerifyDocument]:
    """The fleet's nightly verify documents."""
    rnd = random.Random(seed)
    names = [f"gpu{i:04d}" for i in range(hosts)]
    shm = set(rnd.sample(names, max(1, hosts // 100)))
    drift: dict[str, int] = {}  # host → the last night of its drift
    docs = []
    for night in range(count):
        for name in rnd.sample(names, max(1, hosts // 100)):
            drift.setdefault(name, night + rnd.randint(0, 9))
        drift = {h: end for h, end in drift.items() if end >= night}
        down = set(rnd.sample(names, 2))
        entries = [HostEntry(n, n not in down, "unreachable" if n in down else None, 1.0, (),
                             None if n in down else 312, None,
                             None if n in down else AllReduceEntry("nccl", 8, 380.0, 0, None,
                                                                   sizes=SWEEP))
                   for n in names]  # fmt: skip
        found = []
        late = tuple(sorted(h for h in drift if h not in down))
        if late:
            found.append(FindingEntry("version-differs", "error", "nccl", "nccl=2.18.3.1",
                                      "nccl=2.16.5.1", "install nccl=2.18.3.1", late))  # fmt: skip
        small = tuple(sorted(shm - down))
        found.append(FindingEntry("shm-small", "warning", "/dev/shm", "1 GiB", "64 MiB",
                                  "--shm-size=1g", small))  # fmt: skip
        docs.append(VerifyDocument("conda-lock.yml", 40.0, not late, tuple(entries),
                                   tuple(found), lock_sha256="c" * 64))  # fmt: skip
    return docs


QUERIES = """\
SELECT h.host, h.run, r.at, h.checks FROM host_run h JOIN run r ON r.id = h.run WHERE r.at >= 0 ORDER BY h.host, r.at, r.id;
SELECT f.host, r.at, f.run, f.kind, f.subject, f.severity FROM finding f JOIN run r ON r.id = f.run WHERE r.at >= 0 ORDER BY f.host, r.at, r.id;
SELECT d.host, (SELECT h.run FROM host_run h WHERE h.host = d.host AND h.ok = 1 AND NOT EXISTS (SELECT 1 FROM finding f WHERE f.run = h.run AND f.host = h.host AND f.severity = 'error') ORDER BY h.run DESC LIMIT 1) FROM (SELECT DISTINCT host FROM host_run WHERE '' = '' OR host = '') d;
"""  # noqa: E501


def _envtool_history(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    with store.opened(path, create=False) as db:
        lives = list(timeline.lives(*queries.observations(db)))
        queries.last_good(db)
        span = queries.span(db)
    with contextlib.redirect_stdout(io.StringIO()):
        history_text.timeline(lives, span, "text")
    return time.perf_counter() - start, len(lives)


def _sqlite3(path: Path) -> float:
    tool = shutil.which("sqlite3")
    if tool is None:
        sys.exit("bench_history: the sqlite3 command is needed (apt-get install sqlite3)")
    start = time.perf_counter()
    subprocess.run([tool, str(path)], input=QUERIES, text=True, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - start


def _process(path: Path) -> tuple[float, float]:
    """``envtool history`` as a user runs it: its wall time and its own peak RSS (MiB)."""
    start = time.perf_counter()
    code, _, rss = history_runs.peak([sys.executable, "-m", "envtool", "history", "--history",
                                      str(path)])  # fmt: skip
    assert code == 0
    return time.perf_counter() - start, rss


def runs_growth(tmp: Path) -> None:
    """How ``envtool history`` grows with the runs of one host, to a million."""
    print("| one host's runs | envtool history (process) | its peak RSS | sqlite3, same queries "
          "| ratio |")  # fmt: skip
    print("|---|---|---|---|---|")
    for runs in (10_000, 100_000, 1_000_000):
        path = tmp / f"runs{runs}.sqlite"
        history_runs.one_host(path, runs)
        (ours, rss), peer = min(_process(path) for _ in range(3)), min(
            _sqlite3(path) for _ in range(3))  # fmt: skip
        print(f"| {runs:,} | {ours:.2f} s | {rss:.0f} MiB | {peer:.2f} s | {ours / peer:.1f}x |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--runs-only", action="store_true", help="only the one-host growth")
    args = parser.parse_args()
    if args.runs_only:
        with tempfile.TemporaryDirectory() as tmp:
            runs_growth(Path(tmp))
        return
    docs = nights(args.hosts, args.nights)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.sqlite"
        marks = sorted({n for n in (30, 91, args.nights) if n <= args.nights})
        record, dumps, done = [], [], 0
        print(f"{args.hosts} hosts, {args.nights} nights")
        print("| nights | runs' host rows | store size | envtool history | sqlite3, same queries "
              "| ratio | finding lives |")  # fmt: skip
        print("|---|---|---|---|---|---|---|")
        for mark in marks:
            with store.opened(path) as db:
                for night in range(done, mark):
                    t0 = time.perf_counter()
                    verify_report.dumps(docs[night])
                    t1 = time.perf_counter()
                    store.record(db, docs[night], "verify", START + night * DAY)
                    dumps.append(t1 - t0)
                    record.append(time.perf_counter() - t1)
            done = mark
            ours, lives = min(_envtool_history(path) for _ in range(3))
            peer = min(_sqlite3(path) for _ in range(3))
            size = path.stat().st_size + sum(p.stat().st_size for p in Path(tmp).glob("*-wal"))
            print(f"| {mark} | {mark * args.hosts:,} | {size / 2**20:.1f} MiB | {ours:.2f} s "
                  f"| {peer:.2f} s | {ours / peer:.1f}x | {lives:,} |")  # fmt: skip
        rec, dump = sorted(record)[len(record) // 2], sorted(dumps)[len(dumps) // 2]
        print(f"recording one {args.hosts}-host run: median {rec * 1000:.1f} ms; its report "
              f"JSON: {dump * 1000:.1f} ms (ratio {rec / dump:.2f}x)")  # fmt: skip
        text = metrics.text(metrics.snapshot(docs[-1], START))
        print(
            f"metrics file for {args.hosts} hosts: {len(text.encode()):,} bytes, "
            f"{sum(1 for ln in text.splitlines() if not ln.startswith('#')):,} series"
        )
        runs_growth(Path(tmp))


if __name__ == "__main__":
    main()
