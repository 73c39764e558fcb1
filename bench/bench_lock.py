"""Lock and start-up speed: ``envtool lock`` vs the real ``conda-lock lock`` in one run.

Both lock the repo's environment.yml (python 3.9, cuda118 pytorch, cudatoolkit 11.8, nccl,
numpy, pip; 68 packages) against the same file:// channel: ../shared's conda-forge snapshot
when present, else the tests' synthetic channel. No conda binary exists here, so conda-lock
drives the micromamba test double (tests/fixtures/fake_micromamba.py), which solves with
py-rattler: the ratio measures conda-lock's own overhead, not a slower solver. With a real
micromamba, conda-lock would also pay micromamba's solve.

    python bench/bench_lock.py [--runs N]
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

from fixtures.channel import build_channel, realistic_packages  # noqa: E402
from fixtures.fake_micromamba import make_fake_micromamba  # noqa: E402

BIN = Path(sys.executable).parent


def _timed(argv: list[str], cwd: Path, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, capture_output=True, timeout=600)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _channel(work: Path) -> tuple[Path, str]:
    snapshot = REPO.parent / "shared" / "data" / "conda-forge-snapshot"
    if snapshot.is_dir():
        return snapshot, "conda-forge snapshot (../shared, 68-package solve)"
    return build_channel(work / "channel", realistic_packages()), "synthetic test channel"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envtool-bench-") as tmp:
        work = Path(tmp)
        channel, label = _channel(work)
        env = (
            (REPO / "environment.yml")
            .read_text()
            .replace("  - conda-forge", f"  - {channel.as_uri()}")
        )
        (work / "environment.yml").write_text(env)
        (work / "virtual-packages.yml").write_text((REPO / "virtual-packages.yml").read_text())
        double = make_fake_micromamba(work / "bin")
        envtool = [
            str(BIN / "envtool"),
            "lock",
            "--cache-dir",
            str(work / "cache"),
            "--lockfile",
            "envtool.lock.yml",
        ]
        conda_lock = [
            str(BIN / "conda-lock"),
            "lock",
            "--conda",
            str(double),
            "-f",
            "environment.yml",
            "-p",
            "linux-64",
            "--virtual-package-spec",
            "virtual-packages.yml",
            "--lockfile",
            "conda-lock.lock.yml",
        ]
        _timed(envtool, work, 1)  # warm the repodata cache and the page cache for both
        _timed(conda_lock, work, 1)
        t_envtool = _timed(envtool, work, args.runs)
        t_conda_lock = _timed(conda_lock, work, args.runs)
        h_envtool = _timed([str(BIN / "envtool"), "--help"], work, args.runs * 2)
        h_conda_lock = _timed([str(BIN / "conda-lock"), "--help"], work, args.runs * 2)
    print(f"channel: {label}; median of {args.runs} runs (help: {args.runs * 2})")
    print(
        f"lock   envtool {t_envtool * 1000:8.0f} ms   conda-lock {t_conda_lock * 1000:8.0f} ms"
        f"   ratio {t_conda_lock / t_envtool:5.1f}x"
    )
    print(
        f"--help envtool {h_envtool * 1000:8.0f} ms   conda-lock {h_conda_lock * 1000:8.0f} ms"
        f"   ratio {h_conda_lock / h_envtool:5.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
