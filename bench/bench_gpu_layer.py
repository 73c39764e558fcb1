"""The GPU layer's cost per node, and ``preflight --quick`` against a bare ``nvidia-smi``.

A stand-in ``nvidia-smi`` (tests/fixtures/nvidia_smi.py: a Python script replaying a real
capture from ../shared/data/real/nvidia-smi/) is alone on PATH and NVML is pointed at a
library that does not exist, so the node takes its nvidia-smi path on any machine. Timed, as
subprocesses, the best of ``--runs`` (on a shared machine the median measures the neighbours):

- bare ``nvidia-smi --query-gpu=<the fields the node asks> --format=csv,noheader,nounits``
  (the floor the issue names: what a health check that only asks nvidia-smi pays);
- ``python -m envtool_node.gpus`` per capture and state (both nvidia-smi queries, the Xid
  read, the document);
- ``envtool preflight --quick`` on this node (the real pangeo-pytorch lock, its 767 records
  in a prefix, the lock cache warm; the H100 idle capture): the whole prolog.

The ratios are against the bare stand-in measured in the same run. The stand-in is a Python
process (~40 ms to start) where a real ``nvidia-smi`` pays NVML's initialisation (tens of ms
with persistence mode on, seconds without): on a GPU node the node reads NVML in process
instead, and the ratio there is the one that counts.

    python bench/bench_gpu_layer.py [--runs 7] [--before REV]

``--before REV``: the same node read and prolog timed again, in the same run, with the code of
git revision REV (its envtool/ and probes/ exported to a temporary folder and put first on
PYTHONPATH): the GPU layer and ``preflight --quick`` before and after a change.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "probes"))

from fixtures.lock_records import write_records  # noqa: E402
from fixtures.nvidia_smi import CAPTURES, install  # noqa: E402

NO_NVML = "/nonexistent/libnvidia-ml.so.1"


def _best(argv: list[str], env: dict[str, str], runs: int, cwd: Path = REPO) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False, timeout=120)
        times.append(time.perf_counter() - start)
    return min(times)  # the best run: the least disturbed by other processes on the machine


def _env(folder: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CONDA_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed envtool has its bytecode compiled
    env.update(PATH=str(folder), ENVTOOL_NVML_LIBRARY=NO_NVML, ENVTOOL_CACHE_DIR=str(cache),
               PYTHONPATH=str(REPO / "probes"),
               PYTHONPYCACHEPREFIX=str(cache / "pycache"))  # fmt: skip
    return env


def _prolog(root: Path) -> tuple[Path, Path]:
    from envtool import environments
    from envtool.lock import lockfile

    lock = root / "conda-lock.yml"
    shutil.copy(SHARED / "data" / "real" / "pangeo-pytorch.conda-lock.yml", lock)
    prefix = root / "env"
    write_records(environments.from_lock(lockfile.read(lock), str(lock), "linux-64"), prefix)
    return lock, prefix


def _export(rev: str, into: Path) -> Path:
    """envtool/ and probes/ of git revision ``rev`` under ``into`` (its root)."""
    into.mkdir()
    tar = subprocess.run(["git", "-C", str(REPO), "archive", rev, "envtool", "probes"],
                         capture_output=True, check=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    return into


def _before_after(root: Path, cache: Path, rev: str, runs: int) -> None:
    """The H100 capture's node read and the whole prolog, REV's code against this tree's."""
    old = _export(rev, root / "before")
    lock, prefix = root / "conda-lock.yml", root / "env"
    print(f"\nbefore ({rev}) and after (this tree), the same run, best of {runs}:")
    print(f"{'':<32} {'before':>9} {'after':>9} {'after/before':>13}")
    for state in ("idle", "load"):
        folder = root / f"h100-{state}"
        now = _env(folder, cache)
        then = {**now, "PYTHONPATH": f"{old}:{old / 'probes'}",
                "PYTHONPYCACHEPREFIX": str(cache / "pycache-before")}  # fmt: skip
        quick = [sys.executable, "-m", "envtool", "preflight", "--quick", "--lockfile",
                 str(lock), "--prefix", str(prefix)]  # fmt: skip
        for label, argv, cwd in ((f"envtool_node.gpus, H100 {state}",
                                  [sys.executable, "-m", "envtool_node.gpus"], REPO),
                                 (f"preflight --quick, H100 {state}", quick, root)):  # fmt: skip
            for env in (then, now):  # warm: bytecode and the lock cache
                subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
            a, b = _best(argv, then, runs, cwd), _best(argv, now, runs, cwd)
            print(f"{label:<32} {a * 1000:6.0f} ms {b * 1000:6.0f} ms {b / a:12.2f}x")


def main() -> int:
    from envtool_node.nvsmi import QUERY

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--before", default="", metavar="REV")
    args = parser.parse_args()
    query = [f"--query-gpu={','.join(QUERY)}", "--format=csv,noheader,nounits"]
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        root, cache = Path(tmp), Path(tmp) / "cache"
        print(f"runs: {args.runs} (best of each); stand-in nvidia-smi replaying real captures")
        print(f"{'capture':<18} {'bare --query-gpu':>17} {'envtool_node.gpus':>18} {'ratio':>6}")
        for capture in sorted(CAPTURES):
            for state in ("idle", "load"):
                folder = install(root / f"{capture}-{state}", SHARED, capture, state).parent
                env = _env(folder, cache)
                bare = _best([str(folder / "nvidia-smi"), *query], env, args.runs)
                layer = _best([sys.executable, "-m", "envtool_node.gpus"], env, args.runs)
                print(f"{capture + ' ' + state:<18} {bare * 1000:14.0f} ms "
                      f"{layer * 1000:15.0f} ms {layer / bare:5.1f}x")  # fmt: skip
        lock, prefix = _prolog(root)
        folder = root / "h100-idle"
        env = _env(folder, cache)
        quick = [sys.executable, "-m", "envtool", "preflight", "--quick", "--lockfile", str(lock),
                 "--prefix", str(prefix)]  # fmt: skip
        subprocess.run(quick, env=env, cwd=root, capture_output=True, check=False)  # the cache
        bare = _best([str(folder / "nvidia-smi"), *query], env, args.runs)
        python = _best([sys.executable, "-c", "pass"], env, args.runs)
        whole = _best(quick, env, args.runs, root)
        drain = _best([*quick, "--drain-reason"], env, args.runs, root)
        print(f"\npreflight --quick (H100 idle, {lock.name} of 767 records, cache warm):")
        print(f"  python -c pass (interpreter start):   {python * 1000:6.0f} ms")
        print(f"  bare stand-in nvidia-smi --query-gpu: {bare * 1000:6.0f} ms")
        print(f"  envtool preflight --quick:            {whole * 1000:6.0f} ms  "
              f"{whole / bare:4.1f}x the bare query")  # fmt: skip
        print(f"  ... --drain-reason:                   {drain * 1000:6.0f} ms  "
              f"{drain / bare:4.1f}x the bare query")  # fmt: skip
        if args.before:
            _before_after(root, cache, args.before, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
