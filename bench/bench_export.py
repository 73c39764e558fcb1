"""Export speed: ``envtool_node.export`` vs conda's own ``conda env export``, in one run.

Builds a synthetic channel (python, pip and N-2 packages: a third arch python packages with a
``.dist-info``, a third noarch python, a third plain libraries), installs all of it with
py-rattler, adds a few pip-installed distributions, then times, as subprocesses with this
same interpreter:

- ``python envtool_node.export --prefix P --name P``
- ``python -c "from_environment(P, P).to_yaml()"`` (conda 24.7 vendored by conda-lock)

and prints the median of each, the ratio, and whether the two outputs are byte-identical.

    python bench/bench_export.py [--packages 600] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fixtures.channel import build_channel  # noqa: E402
from fixtures.prefixes import add_dist_info, synthetic_packages  # noqa: E402

ORACLE = (
    "import sys\n"
    "from conda_lock._vendor.conda.env.env import from_environment\n"
    "sys.stdout.write(from_environment(sys.argv[1], sys.argv[1]).to_yaml())\n"
)


async def _install(channel: Path, names: list[str], prefix: Path, cache: Path) -> int:
    from rattler import Channel, Gateway, MatchSpec, install, solve

    records = await solve(
        sources=[Channel(channel.as_uri())],
        specs=[MatchSpec(n) for n in names],
        gateway=Gateway(cache_dir=cache / "gateway"),
        platforms=["linux-64", "noarch"],
    )
    await install(records, target_prefix=prefix, cache_dir=cache / "pkgs", show_progress=False)
    return len(records)


def _time(argv: list[str], runs: int) -> tuple[float, str]:
    times, out = [], ""
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - start)
        out = proc.stdout
    return statistics.median(times), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", type=int, default=600)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pkgs = synthetic_packages(args.packages)
        t0 = time.perf_counter()
        channel = build_channel(root / "channel", pkgs)
        prefix = root / "env"
        count = asyncio.run(_install(channel, [p.name for p in pkgs], prefix, root / "cache"))
        for i in range(5):
            add_dist_info(prefix, f"pip-only-{i}", f"0.{i}")
        print(
            f"prefix: {count} conda packages + 5 pip (set up in {time.perf_counter() - t0:.1f} s)"
        )
        probe_s, probe_out = _time(
            [
                sys.executable,
                "-m",
                "envtool_node.export",
                "--prefix",
                str(prefix),
                "--name",
                str(prefix),
            ],
            args.runs,
        )
        oracle_s, oracle_out = _time([sys.executable, "-c", ORACLE, str(prefix)], args.runs)
    print(f"envtool_node.export : {probe_s * 1000:8.1f} ms (median of {args.runs})")
    print(f"conda env export : {oracle_s * 1000:8.1f} ms (median of {args.runs})")
    print(f"ratio            : {oracle_s / probe_s:8.1f}x faster")
    print(f"byte-identical   : {probe_out == oracle_out}")
    return 0 if probe_out == oracle_out else 1


if __name__ == "__main__":
    sys.exit(main())
