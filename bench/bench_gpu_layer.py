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

    python bench/bench_gpu_layer.py [--runs 7]
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


def main() -> int:
    from envtool_node.nvsmi import QUERY

    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
