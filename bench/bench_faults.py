"""Reliability figures: faults on real sshd nodes, and 64 hosts with ~10 % faulty, peak RSS.

    python bench/bench_faults.py

1. Faults: 3 healthy sshd nodes plus one per fault (closes mid-transfer, probe killed, temp
   dir not writable, garbage printed, hung by SIGSTOP) and a refused address. Prints each
   faulty host's finding, the wall time against the per-host deadline, and whether any
   bundle directory was left behind.
2. Scale: 58 healthy nodes + the 6 faulty ones; `envtool verify` on 8, 32 and 64 of them,
   peak RSS of the envtool process (GNU time's %M) and wall time.
"""

from __future__ import annotations

import glob
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fixtures import faulty  # noqa: E402

BIN = Path(sys.executable).parent
TIMEOUT, CONNECT = 8, 2


def _verify(
    lab: faulty.FaultyLab, hosts: Path, work: Path, timeout: int = TIMEOUT
) -> tuple[dict, float, int]:  # type: ignore[type-arg]
    argv = [
        "/usr/bin/time",
        "-f",
        "%M",
        str(BIN / "envtool"),
        "verify",
        "--no-lock",
        "--hosts",
        str(hosts),
        "-F",
        str(lab.cluster.ssh_config),
        "--timeout",
        str(timeout),
        "--connect-timeout",
        str(CONNECT),
        "--min-gpus",
        "0",
        "--format",
        "json",
    ]
    start = time.monotonic()
    out = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=600, check=False)
    elapsed = time.monotonic() - start
    rss_kb = int(out.stderr.strip().splitlines()[-1])
    return json.loads(out.stdout), elapsed, rss_kb


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="envtool-bench-faults-") as tmp:
        work = Path(tmp)
        lab = faulty.build(work / "lab", healthy=58)
        try:
            names = [line for line in lab.hosts_file.read_text().splitlines() if line]
            healthy, faulty_hosts = names[:58], names[58:]
            before = set(glob.glob("/tmp/envtool.*"))
            small = work / "faults.txt"
            small.write_text("\n".join(healthy[:3] + faulty_hosts) + "\n")
            doc, elapsed, _ = _verify(lab, small, work)
            time.sleep(0.5)
            left = set(glob.glob("/tmp/envtool.*")) - before
            print(
                f"faults: {len(faulty_hosts)} faulty + 3 healthy hosts, per-host deadline "
                f"{TIMEOUT + CONNECT + 5} s, wall {elapsed:.1f} s, bundle dirs left: {len(left)}"
            )
            for host in faulty_hosts:
                key = host.split(":")[0]
                found = [f for f in doc["findings"] if key in f["hosts"]]
                what = lab.faults.get(key, "?")
                print(
                    f"  {key:18s} {what:20s} "
                    + "; ".join(f"{f['kind']}: {f['actual'][:70]}" for f in found)
                )
            print("scale (58 healthy + 6 faulty sshd hosts):")
            for n in (8, 32, 64):
                subset = work / f"h{n}.txt"
                chosen = healthy[: n - 6] + faulty_hosts if n == 64 else healthy[:n]
                subset.write_text("\n".join(chosen) + "\n")
                # every healthy node imports torch on the same 2 cores: a deadline of 180 s
                doc, elapsed, rss = _verify(lab, subset, work, timeout=180)
                answered = sum(h["ok"] for h in doc["hosts"])
                named = {h for f in doc["findings"] if f["severity"] == "error" for h in f["hosts"]}
                print(
                    f"  {n:3d} hosts: {elapsed:5.1f} s, peak RSS {rss / 1024:6.1f} MiB, "
                    f"{answered} answered, {len(named)} hosts with errors"
                )
        finally:
            lab.cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
