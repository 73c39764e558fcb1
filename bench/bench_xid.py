"""The Xid reader (probes/envtool_node/xid.py) on a kernel log of 100,000 records, against a
floor measured in the same run: the same file read and each record split at its ``;`` (the
least any reader of /dev/kmsg records does). Linear, bounded: the time per record at 25k,
50k, 100k and 200k records, and the events kept (one per Xid code, GPU and sub, never one per
record).

The log is made from the real recordings of tests/fixtures/data/kernel-log/: the gpud
/dev/kmsg capture's 46 records cycled, with every 50th record a driver Xid (the gpud flood's
Xid 13 records, on 8 GPUs), every 5,000th the NVSentinel fallen-off-the-bus record, and every
1,000th the tmpfs record a user's mount makes (``NVRM:`` inside another message: ignored).
The dmesg form (``dmesg --kernel --raw`` lines, parsed in process) is timed too.

    python bench/bench_xid.py [--runs 5] [--records 100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "probes"))

from fixtures.kernel_log import (  # noqa: E402
    HEALTHY,
    Record,
    dmesg_raw,
    kmsg,
    recorded,
)

from envtool_node import xid  # noqa: E402
from envtool_node.xid_parse import Tally, dmesg_records  # noqa: E402


def records(n: int) -> list[Record]:
    """``n`` records of the recordings, mixed as the module says."""
    plain = [Record(line.split(";", 1)[1], 0.0, int(line.split(",")[0]) >> 3,
                    int(line.split(",")[0]) & 7)
             for line in HEALTHY.read_text().split("\n") if ";" in line]  # fmt: skip
    flood = [r for r in recorded("gpud-dmesg-iso-xid-13-flood.txt") if ": 13," in r.message]
    fallen = recorded("nvsentinel155-dmesg-fallen-off-bus.txt")[0]
    framed = Record("tmpfs: Unknown parameter 'NVRM: Xid (PCI:0000:3b:00): 79'", 0.0, 0, 3)
    out = []
    for i in range(n):
        if i % 5000 == 4999:
            out.append(Record(fallen.message, i / 1000))
        elif i % 1000 == 999:
            out.append(Record(framed.message, i / 1000, 0, 3))
        elif i % 50 == 49:
            gpu = f"0000:{0x18 + (i // 50) % 8:02x}:00"
            out.append(Record(flood[i % 16].message.replace("0000:38:00", gpu), i / 1000))
        else:
            out.append(Record(plain[i % len(plain)].message, i / 1000))
    return out


def best(runs: int, fn: Callable[[], object]) -> float:
    """The best of ``runs`` timings of ``fn`` (on a shared machine the median measures the
    neighbours)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def floor(path: Path) -> int:
    """Read the file and split each record at ``;``: the least a reader does."""
    n = 0
    for line in path.read_text().split("\n"):
        head, _, _ = line.partition(";")
        n += bool(head)
    return n


def parse_dmesg(text: str) -> Tally:
    """The dmesg path's work once dmesg has printed: its lines into records, tallied."""
    tally = Tally()
    for facility, seconds, message in dmesg_records(text):
        tally.add(facility, None, seconds, message)
    return tally


def main() -> int:
    """Print the table the docs quote."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for n in sorted({args.records // 4, args.records // 2, args.records, args.records * 2}):
            path = Path(tmp) / f"kmsg-{n}"
            made = records(n)
            path.write_text(kmsg(made))
            part = xid.read(30.0, str(path))
            assert part["records"] == n and part["partial"] is None, part["partial"]
            reader = best(args.runs, lambda p=path: xid.read(30.0, str(p)))  # type: ignore[misc]
            low = best(args.runs, lambda p=path: floor(p))  # type: ignore[misc]
            text = dmesg_raw(made)
            dmesg = best(args.runs, lambda t=text: parse_dmesg(t))  # type: ignore[misc]
            rows.append((n, low, reader, dmesg, len(part["events"]), part["ignored"]))
    print(f"{'records':>8} | {'floor':>9} | {'reader':>9} | {'ratio':>6} | "
          f"{'us/record':>9} | {'dmesg form':>10} | events | ignored")  # fmt: skip
    for n, low, reader, dmesg, events, ignored in rows:
        per = reader / n * 1e6
        print(f"{n:>8} | {low * 1e3:7.1f}ms | {reader * 1e3:7.1f}ms | {reader / low:5.1f}x | "
              f"{per:9.2f} | {dmesg * 1e3:8.1f}ms | {events:>6} | {ignored:>7}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
