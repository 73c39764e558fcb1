"""``envtool fix`` of one changed package (nccl 2.16.5.1 → 2.18.3.1) on 8 prefixes against a
fresh ``envtool install`` of the whole lock into one, in one run; the switch's own time; and
what a generation costs on disk.

A local channel that describes this interpreter and its torch (tests/fixtures/runtime.py),
two locks of it (the lab's, and one with the older nccl). Eight prefixes are installed from
the older lock; the peer is one ``envtool install`` of the lock into an empty prefix. Then
the node side of a fix (``envtool fix --here``, what each node runs, the lock on its stdin):
its plan alone, then one node's fix (plan, the whole lock into a new generation, its check
with the torch import, the switch), then the other seven at once (eight nodes run theirs
each on its own machine; here they share this one's cores). The switch is timed alone (a
link renamed over a link, and a directory exchanged with a link by renameat2), 200 times
each. The disk a generation costs: its blocks, and how many of its files are hard links
into the package cache (rattler links them where cache and prefix share a filesystem).

    python bench/bench_fix.py [--nodes 8]
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

from fixtures.channel import build_channel, realistic_packages  # noqa: E402
from fixtures.runtime import LAB_ENV, runtime_packages  # noqa: E402

from envtool.fix import generations  # noqa: E402

ENVTOOL = [sys.executable, "-m", "envtool"]
VIRTUAL = 'subdirs:\n  linux-64:\n    packages:\n      __cuda: "11.8"\n      __glibc: "2.28"\n'
INSECURE = ["--allow-insecure-url"]


def _lock(work: Path, name: str, text: str) -> Path:
    folder = work / name
    folder.mkdir()
    (folder / "environment.yml").write_text(text)
    (folder / "virtual-packages.yml").write_text(VIRTUAL)
    subprocess.run([*ENVTOOL, "lock", "--cache-dir", str(work / "cache")], cwd=folder,
                   check=True, capture_output=True)  # fmt: skip
    return folder / "conda-lock.yml"


def _install(lock: Path, prefix: Path, cache: Path) -> float:
    start = time.perf_counter()
    subprocess.run([*ENVTOOL, "install", "--lockfile", str(lock), "--prefix", str(prefix),
                    "--cache-dir", str(cache), "--allow-stale", *INSECURE],
                   check=True, capture_output=True)  # fmt: skip
    return time.perf_counter() - start


def _fix_all(lock: Path, prefixes: list[Path], cache: Path, apply: bool = True) -> float:
    """Seconds for the node side of a fix of every prefix at once (``apply``: carried out)."""
    data = lock.read_bytes()
    argv = [*ENVTOOL, "fix", "--here", "--lockfile", "-", "--cache-dir", str(cache), *INSECURE]
    argv += ["--apply"] if apply else []
    start = time.perf_counter()
    procs = [
        subprocess.Popen([*argv, "--prefix", str(p)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for p in prefixes
    ]  # fmt: skip
    for proc in procs:
        out, err = proc.communicate(data, timeout=900)
        if proc.returncode != 0:
            raise SystemExit(f"fix failed: {out.decode()[-400:]} {err.decode()[-400:]}")
    return time.perf_counter() - start


def _torch_import(prefix: Path) -> float:
    start = time.perf_counter()
    subprocess.run([str(prefix / "bin" / "python"), "-c", "import torch"], check=True)
    return time.perf_counter() - start


def _switch_times(work: Path, runs: int) -> tuple[float, float]:
    """Median seconds of a link renamed over a link, and of a directory exchanged with one."""
    base = work / "switch"
    base.mkdir()
    prefix = base / "env"
    a, b = generations.path_of(prefix, 1), generations.path_of(prefix, 2)
    a.mkdir()
    b.mkdir()
    rename, exchange = [], []
    for i in range(runs):
        prefix.mkdir()
        start = time.perf_counter()
        generations.switch(prefix, a)  # a directory: exchanged
        exchange.append(time.perf_counter() - start)
        start = time.perf_counter()
        generations.switch(prefix, b if i % 2 == 0 else a)  # a link: renamed over
        rename.append(time.perf_counter() - start)
        prefix.unlink()
        os.rmdir(generations.path_of(prefix, 0))
    return statistics.median(rename), statistics.median(exchange)


def _disk(folder: Path) -> tuple[int, int, int]:
    """(KiB of its blocks, files, files that are hard links: st_nlink > 1)."""
    blocks = files = linked = 0
    for root, _, names in os.walk(folder):
        for name in names:
            st = os.lstat(os.path.join(root, name))
            blocks += st.st_blocks
            files += 1
            linked += st.st_nlink > 1
    return blocks // 2, files, linked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envtool-bench-fix-") as tmp:
        work = Path(tmp)
        channel = build_channel(work / "channel", realistic_packages() + runtime_packages())
        new = _lock(work, "new", LAB_ENV.format(channel=channel.as_uri()))
        old = _lock(work, "old", LAB_ENV.replace("nccl=2.18.3.1", "nccl=2.16.5.1")
                    .format(channel=channel.as_uri()))  # fmt: skip
        cache = work / "pkgs"
        prefixes = [work / f"node{i}" / "env" for i in range(1, args.nodes + 1)]
        for p in prefixes:
            _install(old, p, cache)
        _install(new, work / "warm", cache)  # the cache holds the new nccl for both sides
        fresh = _install(new, work / "fresh", cache)
        planned = _fix_all(new, prefixes[:1], cache, apply=False)
        torch_s = _torch_import(prefixes[0])
        one = _fix_all(new, prefixes[:1], cache)
        several = _fix_all(new, prefixes[1:], cache)
        for p in prefixes:
            assert os.readlink(p) == "env.envtool-gen-1", p
        rename, exchange = _switch_times(work, 200)
        kib, files, linked = _disk(generations.path_of(prefixes[0], 1))
        print(f"a fresh envtool install of the whole lock into one prefix: {fresh:.2f} s")
        print(f"a fix of 1 changed package on one node: {one:.2f} s, ratio {one / fresh:.1f}x "
              f"(of it: its plan alone {planned:.2f} s, the check's torch import from the new "
              f"generation {torch_s:.2f} s)")  # fmt: skip
        print(f"{len(prefixes) - 1} more prefixes at once on this machine's {os.cpu_count()} "
              f"cores (8 nodes run theirs each on its own): {several:.2f} s")  # fmt: skip
        print(
            f"the switch alone (median of 200): a link renamed over a link "
            f"{rename * 1e6:.0f} µs, a directory exchanged with a link {exchange * 1e6:.0f} µs"
        )
        print(f"a generation on disk: {kib} KiB in blocks, {files} files, {linked} of them hard "
              "links into the package cache")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
