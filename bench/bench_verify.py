"""``envtool verify`` vs ClusterShell's ``clush`` on 8-64 loopback sshd hosts, in one run.

Both run the same thing on every host: the probe bundle (envtool_node/ as a gzipped tar) fed
to the same node script on stdin, which unpacks it and runs the node package (export + GPU facts, no
all-reduce). clush gets the bundle on its stdin (it forwards stdin to every node) and runs
with the same fan-out (64) and the same ssh_config. envtool also parses, validates and
compares every answer with the lock, which clush does not.

The hosts' python is Debian's /usr/bin/python3 (no torch), so the figures measure the
fan-out, not 64 torch imports on 2 cores.

    python bench/bench_verify.py [--hosts 8,16,32,64] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from fixtures import sshnodes  # noqa: E402
from fixtures.channel import build_channel, realistic_packages  # noqa: E402

from envtool.cluster import bundle  # noqa: E402
from envtool.cluster.nodescript import node_script  # noqa: E402
from envtool.cluster.options import FanoutOptions  # noqa: E402

BIN = Path(sys.executable).parent


def _prefix(work: Path) -> Path:
    """A real prefix installed from the test channel, whose python is Debian's python3."""
    channel = build_channel(work / "channel", realistic_packages(python_exe="/usr/bin/python3"))
    (work / "environment.yml").write_text(
        f"name: ddp\nchannels: [{channel.as_uri()}]\ndependencies: [python=3.9, "
        "'pytorch=*=cuda118*', cudatoolkit=11.8, nccl, numpy, pip]\n"
    )
    (work / "virtual-packages.yml").write_text(
        'subdirs:\n  linux-64:\n    packages:\n      __cuda: "11.8"\n      __glibc: "2.28"\n'
    )
    for argv in (["lock"], ["install", "--allow-insecure-url", "--prefix", str(work / "prefix")]):
        subprocess.run(
            [str(BIN / "envtool"), *argv, "--cache-dir", str(work / "cache")],
            cwd=work,
            check=True,
            capture_output=True,
        )
    return work / "prefix"


def _time(argv: list[str], cwd: Path, stdin: bytes | None, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True, timeout=900, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="8,16,32,64")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    counts = [int(n) for n in args.hosts.split(",")]
    with tempfile.TemporaryDirectory(prefix="envtool-bench-verify-") as tmp:
        work = Path(tmp)
        prefix = _prefix(work)
        cluster = sshnodes.start_cluster(
            work / "ssh", [{"CONDA_PREFIX": str(prefix)}] * max(counts)
        )
        try:
            rows = [_measure(work, cluster, n, args.runs) for n in counts]
        finally:
            cluster.stop()
    base = rows[0][1]
    print(f"median of {args.runs} runs; fan-out 64; probes without all-reduce")
    print(f"{'hosts':>5}  {'envtool':>9}  {'clush':>9}  {'ratio':>6}  {'vs 8 hosts':>10}")
    for n, t_env, t_clush in rows:
        print(
            f"{n:5d}  {t_env:8.2f}s  {t_clush:8.2f}s  {t_env / t_clush:5.2f}x  {t_env / base:9.2f}x"
        )
    return 0


def _measure(work: Path, cluster: sshnodes.Cluster, n: int, runs: int) -> tuple[int, float, float]:
    nodeset = f"node[1-{n}]"
    envtool = [
        str(BIN / "envtool"),
        "verify",
        "--hosts",
        nodeset,
        "-F",
        str(cluster.ssh_config),
        "--no-lock",
        "--min-gpus",
        "0",
        "--format",
        "json",
        "--fanout",
        "64",
    ]
    script = node_script(FanoutOptions(timeout=120))
    clush = [
        str(BIN / "clush"),
        "-w",
        nodeset,
        "-f",
        "64",
        "-o",
        f"-F {cluster.ssh_config}",
        "-b",
        script,
    ]
    t_env = _time(envtool, work, None, runs)
    t_clush = _time(clush, work, bundle.bundle(), runs)
    return n, t_env, t_clush


if __name__ == "__main__":
    sys.exit(main())
