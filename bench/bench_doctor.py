"""``envtool doctor`` (all seven steps) vs its DDP step alone, a bare ``torchrun``, in one run.

A local channel that describes this interpreter and its torch (tests/fixtures/runtime.py),
locked and installed into a prefix; then, alternately, the whole
``envtool doctor --prefix P --min-gpus 0`` and the bare
``torchrun --standalone --nproc-per-node=2 -m envtool_node.ddp_smoke --worker`` that its
``ddp`` step launches. The ratio is what the six other steps and envtool itself add to the DDP run a
user would otherwise launch by hand.

    python bench/bench_doctor.py [--runs 5]
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
from fixtures.runtime import SHORT, TORCH_SPEC, runtime_packages  # noqa: E402

BIN = Path(sys.executable).parent
ENV = f"name: ddp\nchannels: [{{}}]\ndependencies: [python={SHORT}, {TORCH_SPEC}, nccl, pip]\n"
VIRTUAL = 'subdirs:\n  linux-64:\n    packages:\n      __cuda: "11.8"\n      __glibc: "2.28"\n'


def _timed(argv: list[str], cwd: Path, expect: int) -> float:
    start = time.perf_counter()
    out = subprocess.run(argv, cwd=cwd, capture_output=True, timeout=600, check=False)
    seconds = time.perf_counter() - start
    if out.returncode != expect:
        raise SystemExit(f"{argv[:3]} exited {out.returncode}: {out.stderr.decode()[-800:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envtool-bench-doctor-") as tmp:
        work = Path(tmp)
        channel = build_channel(work / "channel", realistic_packages() + runtime_packages())
        (work / "environment.yml").write_text(ENV.format(channel.as_uri()))
        (work / "virtual-packages.yml").write_text(VIRTUAL)
        envtool = str(BIN / "envtool")
        subprocess.run([envtool, "lock"], cwd=work, check=True, capture_output=True)
        prefix = work / "env"
        subprocess.run(
            [envtool, "install", "--allow-insecure-url", "--prefix", str(prefix)],
            cwd=work,
            check=True,
            capture_output=True,
        )
        doctor = [envtool, "doctor", "--prefix", str(prefix), "--min-gpus", "0"]
        bare = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "envtool_node.ddp_smoke",
            "--worker",
            "--backend",
            "gloo",
        ]
        whole, step = [], []
        for _ in range(args.runs):
            whole.append(_timed(doctor, work, 0))
            step.append(_timed(bare, work, 0))
    w, s = statistics.median(whole), statistics.median(step)
    print(f"runs: {args.runs} (medians)")
    print(f"envtool doctor, 7 steps: {w:.2f} s")
    print(f"bare torchrun DDP step:  {s:.2f} s")
    print(f"doctor / bare DDP step:  {w / s:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
