"""The reshaped layout against the code before it, in one run: ``envtool --help`` start-up and
``envtool verify`` on 8 and 32 sshd hosts, with ClusterShell's ``clush`` as the floor.

The "before" tree is ``git archive REF`` (default: 3bf7972, the commit before the reshape),
run from its own folder with PYTHONPATH; the "after" tree is this checkout, run the same way,
so both start the same interpreter with the same installed dependencies. Runs alternate
(before, after, clush) so machine noise hits all three alike; medians are printed.

    python bench/bench_house.py [--before 3bf7972] [--hosts 8,32] [--runs 5] [--help-runs 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from bench_verify import _prefix  # noqa: E402
from fixtures import sshnodes  # noqa: E402

from envtool.cluster import bundle  # noqa: E402
from envtool.cluster.nodescript import node_script  # noqa: E402
from envtool.cluster.options import FanoutOptions  # noqa: E402

BIN = Path(sys.executable).parent


def _tree(ref: str, into: Path) -> Path:
    """``ref``'s envtool (and its probes/ or envtool_node/) unpacked into ``into``."""
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-tree", "--name-only", ref],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    parts = [p for p in ("envtool", "probes", "envtool_node") if p in listed]
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref, *parts], capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def _timed(argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes | None = None) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, timeout=900)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{argv[:4]} exited {done.returncode}: {done.stderr[-500:]!r}")
    return seconds


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="3bf7972")
    parser.add_argument("--hosts", default="8,32")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--help-runs", type=int, default=21)
    args = parser.parse_args()
    counts = [int(n) for n in args.hosts.split(",")]
    with tempfile.TemporaryDirectory(prefix="envtool-bench-house-") as tmp:
        work = Path(tmp)
        trees = {"before": _tree(args.before, work / "before"), "after": REPO}
        envtool = [sys.executable, "-m", "envtool"]
        helps: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(args.help_runs):
            for name, tree in trees.items():
                helps[name].append(_timed([*envtool, "--help"], work, _env(tree)))
        prefix = _prefix(work)
        cluster = sshnodes.start_cluster(
            work / "ssh", [{"CONDA_PREFIX": str(prefix)}] * max(counts)
        )
        try:
            rows = [_verify(work, cluster, n, trees, args.runs) for n in counts]
        finally:
            cluster.stop()
    before, after = statistics.median(helps["before"]), statistics.median(helps["after"])
    print(f"envtool --help, median of {args.help_runs}: before {before * 1000:.0f} ms, "
          f"after {after * 1000:.0f} ms, after/before {after / before:.2f}x")  # fmt: skip
    print(f"verify (no all-reduce, fan-out 64), median of {args.runs} runs")
    print(f"{'hosts':>5}  {'before':>8}  {'after':>8}  {'clush':>8}  {'after/before':>12}"
          f"  {'after/clush':>11}")  # fmt: skip
    for n, t_before, t_after, t_clush in rows:
        print(f"{n:5d}  {t_before:7.2f}s  {t_after:7.2f}s  {t_clush:7.2f}s  "
              f"{t_after / t_before:11.2f}x  {t_after / t_clush:10.2f}x")  # fmt: skip
    return 0


def _verify(
    work: Path, cluster: sshnodes.Cluster, n: int, trees: dict[str, Path], runs: int
) -> tuple[int, float, float, float]:
    nodeset = f"node[1-{n}]"
    argv = [
        sys.executable, "-m", "envtool", "verify", "--hosts", nodeset,
        "-F", str(cluster.ssh_config), "--no-lock", "--min-gpus", "0",
        "--format", "json", "--fanout", "64",
    ]  # fmt: skip
    script = node_script(FanoutOptions(timeout=120))
    clush = [str(BIN / "clush"), "-w", nodeset, "-f", "64", "-o", f"-F {cluster.ssh_config}",
             "-b", script]  # fmt: skip
    times: dict[str, list[float]] = {"before": [], "after": [], "clush": []}
    for _ in range(runs):
        for name, tree in trees.items():
            times[name].append(_timed(argv, work, _env(tree)))
        times["clush"].append(_timed(clush, work, dict(os.environ), bundle.bundle()))
    med = {k: statistics.median(v) for k, v in times.items()}
    return n, med["before"], med["after"], med["clush"]


if __name__ == "__main__":
    sys.exit(main())
