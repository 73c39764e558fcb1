"""A newcomer's first ``make verify`` on a machine without the environment (issue 23).

A fresh ``git clone`` of HEAD into a temp dir, then ``make verify`` there (venv, envtool,
its test extras and torch from this machine's wheel cache, the lock check, verify): wall time
and the report's findings. Then, in that clone, verify alone against its floor (``envtool
--version``: the interpreter, click and envtool's imports), each the median of ``--runs``:
what probing one host that has no environment costs beyond starting envtool at all.

    python bench/bench_first_run.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    start = time.monotonic()
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return time.monotonic() - start, out.stdout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    env = {k: v for k, v in os.environ.items() if k not in ("CONDA_PREFIX", "VIRTUAL_ENV")}
    env["COLUMNS"] = "100"
    with tempfile.TemporaryDirectory(prefix="envtool-first-run-") as tmp:
        clone = Path(tmp) / "envtool"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        wall, text = _timed(["make", "verify"], clone, env)
        print(f"make verify on a fresh clone: {wall:.1f} s")
        print("its report:\n" + "\n".join("  " + line for line in text.splitlines()))
        envtool = str(clone / ".venv" / "bin" / "envtool")
        verify = [envtool, "verify", "--hosts", "hosts.txt", "--transport", "local"]
        _, doc = _timed([*verify, "--format", "json"], clone, env)
        kinds = [f["kind"] for f in json.loads(doc)["findings"]]
        print(f"findings: {len(kinds)} {kinds}")
        floor = statistics.median(
            _timed([envtool, "--version"], clone, env)[0] for _ in range(runs)
        )
        alone = statistics.median(_timed(verify, clone, env)[0] for _ in range(runs))
        print(
            f"verify alone {alone:.2f} s vs envtool --version {floor:.2f} s: {alone / floor:.2f}x"
        )


if __name__ == "__main__":
    main()
