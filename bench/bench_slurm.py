"""``envtool verify --transport slurm`` vs a bare ``srun -N4`` of the same probe, in one run.

A real Slurm cluster on this machine (slurmctld + 4 slurmd), one prefix per node. The bare
srun runs exactly what envtool's step runs (the node script with the bundle on stdin,
``--input=all``) and discards the output; envtool also validates and compares the answers.

    python bench/bench_slurm.py [--runs 5]
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

from fixtures import slurm  # noqa: E402
from fixtures.channel import build_channel, realistic_packages  # noqa: E402

from envtool.cluster import bundle  # noqa: E402
from envtool.cluster.hosts import Host  # noqa: E402
from envtool.cluster.options import FanoutOptions  # noqa: E402
from envtool.cluster.slurm import srun_argv  # noqa: E402

BIN = Path(sys.executable).parent


def _timed(
    argv: list[str], stdin: bytes | None, env: dict[str, str], cwd: Path, runs: int
) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        out = subprocess.run(
            argv, input=stdin, env=env, cwd=cwd, capture_output=True, timeout=600, check=False
        )
        times.append(time.perf_counter() - start)
        answers = out.stdout.count(b'"schema": "envtool.node/1"') + out.stdout.count(
            b'"schema": "envtool.verify/1"'
        )
        if out.returncode not in (0, 1) or answers not in (1, 4):
            raise SystemExit(f"{argv[0]} failed: {out.stderr.decode()[-500:]}")
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envtool-bench-slurm-") as tmp:
        work = Path(tmp)
        channel = build_channel(work / "channel", realistic_packages("/usr/bin/python3"))
        (work / "environment.yml").write_text(
            f"name: ddp\nchannels: [{channel.as_uri()}]\ndependencies: [python=3.9, nccl, pip]\n"
        )
        (work / "virtual-packages.yml").write_text(
            'subdirs:\n  linux-64:\n    packages:\n      __cuda: "11.8"\n      __glibc: "2.28"\n'
        )
        subprocess.run(
            [str(BIN / "envtool"), "lock", "--cache-dir", str(work / "c")],
            cwd=work,
            check=True,
            capture_output=True,
        )
        for i in range(1, 5):
            subprocess.run(
                [
                    str(BIN / "envtool"),
                    "install",
                    "--allow-insecure-url",
                    "--prefix",
                    str(work / f"node{i}"),
                    "--cache-dir",
                    str(work / "c"),
                ],
                cwd=work,
                check=True,
                capture_output=True,
            )
        cluster = slurm.start(work / "slurm", nodes=4)
        env = {**os.environ, **cluster.env}
        try:
            prefix = f"{work}/{{node}}"
            envtool = [
                str(BIN / "envtool"),
                "verify",
                "--transport",
                "slurm",
                "--hosts",
                "node[1-4]",
                "--prefix",
                prefix,
                "--min-gpus",
                "0",
                "--format",
                "json",
            ]
            options = FanoutOptions(transport="slurm", prefix=prefix)
            bare = srun_argv([Host(f"node{i}") for i in range(1, 5)], options)
            t_env = _timed(envtool, None, env, work, args.runs)
            t_bare = _timed(bare, bundle.bundle(), env, work, args.runs)
        finally:
            cluster.stop()
    print(f"4 Slurm nodes, median of {args.runs} runs, probes without all-reduce")
    print(
        f"envtool verify --transport slurm {t_env:6.2f} s   bare srun -N4 {t_bare:6.2f} s   "
        f"ratio {t_env / t_bare:5.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
