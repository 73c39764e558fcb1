"""Reliability figures: faults on real sshd nodes, and 64 hosts with ~10 % faulty, peak RSS.

    python bench/bench_faults.py [--interrupts-only] [--runs N]

1. Faults: 3 healthy sshd nodes plus one per fault (closes mid-transfer, probe killed, temp
   dir not writable, garbage printed, hung by SIGSTOP) and a refused address. Prints each
   faulty host's finding, the wall time against the per-host deadline, and whether any
   bundle directory was left behind.
2. Scale: 58 healthy nodes + the 6 faulty ones; `envtool verify` on 8, 32 and 64 of them,
   peak RSS of the envtool process (GNU time's %M) and wall time.
3. Interrupts: SIGINT to `envtool verify` while a node's probe hangs, and while a node runs
   the all-reduce (torchrun + 2 gloo ranks): seconds until envtool exits and until nothing
   of the run is left on the nodes (no process carrying the node's TMPDIR, no bundle dir);
   and what the node script's watchdog costs a normal run (the script with and without it,
   paired runs over ssh).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import statistics
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


def _interrupted(lab: faulty.InterruptLab, work: Path, ready: str, count: int, *extra: str) -> str:
    """SIGINT a verify once ``count`` node processes show ``ready``: seconds to exit and
    until nothing is left on the nodes."""
    argv = [str(BIN / "envtool"), "verify", "--hosts", "node1,node2", "--no-lock"]
    run = subprocess.Popen(
        [*argv, "-F", str(lab.cluster.ssh_config), "--min-gpus", "0", *extra],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    end = time.monotonic() + 120
    while sum(ready in a for a in lab.node_side().values()) < count:
        if time.monotonic() > end or run.poll() is not None:
            raise RuntimeError(f"{ready!r} never ran on the nodes")
        time.sleep(0.05)
    start = time.monotonic()
    run.send_signal(signal.SIGINT)
    code = run.wait()
    exited = time.monotonic() - start
    while lab.node_side() or lab.bundle_dirs():
        if time.monotonic() - start > 30:
            return f"exit {code} after {exited:.2f} s; LEFT on the nodes after 30 s"
        time.sleep(0.02)
    return f"exit {code} after {exited:.2f} s, nothing left on the nodes after " + (
        f"{time.monotonic() - start:.2f} s"
    )


def _watchdog_cost(lab: faulty.InterruptLab, runs: int) -> str:
    """Paired ssh runs of node1's script with and without the watchdog (milliseconds)."""
    from envtool.cluster import bundle
    from envtool.cluster.nodescript import _WATCHDOG, node_script
    from envtool.cluster.options import FanoutOptions

    options = FanoutOptions(node_args=("--no-torch",))
    bundle, with_it = bundle.bundle(), node_script(options)
    scripts = {"with": with_it, "without": with_it.replace(_WATCHDOG, "")}
    seconds: dict[str, list[float]] = {"with": [], "without": []}
    ssh = ["ssh", "-F", str(lab.cluster.ssh_config), "node1"]
    for _ in range(runs):
        for name, script in scripts.items():
            start = time.monotonic()
            subprocess.run([*ssh, script], input=bundle, capture_output=True, check=True)
            seconds[name].append(time.monotonic() - start)
    diff = [a - b for a, b in zip(seconds["with"], seconds["without"], strict=True)]
    return (
        f"median {statistics.median(seconds['without']):.3f} s without, "
        f"{statistics.median(seconds['with']):.3f} s with; paired difference median "
        f"{statistics.median(diff) * 1000:+.0f} ms, mean {statistics.mean(diff) * 1000:+.0f} ms"
    )


def interrupts(work: Path, runs: int) -> None:
    """Section 3."""
    lab = faulty.interrupt_lab(work / "interrupts")
    try:
        print(f"interrupts ({runs} runs each):")
        for i in range(runs):
            print(f"  hung probe on node2, run {i + 1}: " + _interrupted(lab, work, lab.hang, 1))
        sweep = "-b 1M -e 1M -n 1000000 -w 1 --nproc 2 --backend gloo"
        for i in range(runs):
            line = _interrupted(
                lab,
                work,
                "-m envtool_node.allreduce --worker",
                2,
                "--allreduce",
                "node",
                "--allreduce-args",
                sweep,
            )
            print(f"  all-reduce ranks running, run {i + 1}: {line}")
        print(
            f"  watchdog cost on a normal run ({runs * 6} pairs): {_watchdog_cost(lab, runs * 6)}"
        )
    finally:
        for pid in lab.node_side():
            os.kill(pid, signal.SIGKILL)
        lab.cluster.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interrupts-only", action="store_true", help="only section 3")
    parser.add_argument("--runs", type=int, default=5, help="runs per interrupt figure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envtool-bench-faults-") as tmp:
        work = Path(tmp)
        interrupts(work, args.runs)
        if args.interrupts_only:
            return 0
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
