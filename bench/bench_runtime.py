"""What the runtime part of the probe adds per node: the facts probe with and without it.

A local channel that describes this interpreter and its torch (tests/fixtures/runtime.py) is
locked and installed into a prefix; then, alternately, the prefix's python runs
``python -B -m envtool_node.facts`` (what verify and doctor run on each node: the
interpreter starts, imports torch, reads the GPU facts and now the runtime) and the same with
``--no-runtime`` (the probe as it was before: no sys.path, /proc/self/maps or library version
reads). The ratio of the medians is the added time; the runtime part's own time is also
measured inside one process.

    python bench/bench_runtime.py [--runs 15]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fixtures.channel import build_channel, realistic_packages  # noqa: E402
from fixtures.prefixes import install_prefix  # noqa: E402
from fixtures.runtime import SHORT, TORCH_BUILD, runtime_packages  # noqa: E402

INSIDE = (
    "import time, torch, envtool_node.runtime as r; t = time.perf_counter(); r.collect(); "
    "print(time.perf_counter() - t)"
)


def _timed(argv: list[str]) -> float:
    start = time.perf_counter()
    out = subprocess.run(argv, cwd=REPO, capture_output=True, timeout=300, check=True)
    seconds = time.perf_counter() - start
    json.loads(out.stdout)  # a whole document each time
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envtool-bench-runtime-") as tmp:
        work = Path(tmp)
        channel = build_channel(work / "channel", realistic_packages() + runtime_packages())
        specs = [f"python {SHORT}.*", f"pytorch * {TORCH_BUILD}*", "numpy"]
        prefix = install_prefix(channel, specs, work / "env", work / "cache")
        python = str(prefix / "bin" / "python")
        probe = [python, "-B", "-m", "envtool_node.facts"]
        _timed(probe)  # warm the page cache once
        after, before = [], []
        for _ in range(args.runs):
            after.append(_timed(probe))
            before.append(_timed([*probe, "--no-runtime"]))
        own = [
            float(subprocess.run([python, "-c", INSIDE], cwd=REPO, capture_output=True,
                                 text=True, check=True).stdout)
            for _ in range(args.runs)
        ]  # fmt: skip
    a, b, o = statistics.median(after), statistics.median(before), statistics.median(own)
    print(f"runs: {args.runs} (medians), torch build: {TORCH_BUILD}")
    print(f"facts probe without the runtime part (before): {b * 1000:8.1f} ms")
    print(f"facts probe with the runtime part (after):     {a * 1000:8.1f} ms")
    print(f"after / before:                                {a / b:8.3f}")
    print(f"the runtime part alone, in-process:            {o * 1000:8.2f} ms ({o / b:.2%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
