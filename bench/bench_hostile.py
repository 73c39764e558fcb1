"""Hostile input, measured (issue #15): envtool's peak memory while nodes print without end,
the YAML alias bomb, and 5,000 unreachable hosts under ``ulimit -n 1024``.

Peak RSS is envtool's own (``os.wait4`` of its process), wall time is the whole process.

    python bench/bench_hostile.py [--runs 3] [--hosts 5000]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from fixtures import sshnodes  # noqa: E402
from fixtures.faulty import _fake_python  # noqa: E402

ENVTOOL = str(Path(sys.executable).parent / "envtool")
GIB = 1 << 30


def _run(argv: list[str], cwd: Path, files: int | None = None) -> tuple[float, float, int, str]:
    """(seconds, peak RSS in MiB, exit code, stdout) of one envtool process."""

    def limit() -> None:
        if files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            preexec_fn=limit)  # fmt: skip
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    return seconds, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), out.decode()


def _printers(work: Path, count: int) -> sshnodes.Cluster:
    """``count`` sshd nodes whose python prints 1 GiB (and would go on)."""
    envs = []
    for i in range(count):
        prefix = work / f"flood{i}"
        _fake_python(prefix, f"head -c {GIB} /dev/zero | tr '\\\\0' a; exec sleep 600")
        envs.append({"CONDA_PREFIX": str(prefix)})
    return sshnodes.start_cluster(work / "ssh", envs)


def _bomb(path: Path) -> Path:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    path.write_text("\n".join(lines) + "\n")
    return path


def _unreachable_config(work: Path) -> Path:
    """An ssh_config sending every host to a closed port on loopback (refused at once)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again when the block ends
    config = work / "unreachable_config"
    config.write_text(f"Host *\n  HostName 127.0.0.1\n  Port {port}\n  BatchMode yes\n")
    return config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hosts", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envtool-bench-hostile-") as tmp:
        work = Path(tmp)
        cluster = _printers(work, 3)
        try:
            for n in (1, 3):
                argv = [ENVTOOL, "verify", "--hosts", f"node[1-{n}]" if n > 1 else "node1",
                        "-F", str(cluster.ssh_config), "--no-lock", "--format", "json"]  # fmt: skip
                runs = [_run(argv, work) for _ in range(args.runs)]
                print(f"{n} node(s) printing 1 GiB each, default --max-output 16M: "
                      f"peak RSS {max(r[1] for r in runs):.0f} MiB, "
                      f"wall {statistics.median(r[0] for r in runs):.2f} s (median of "
                      f"{args.runs}), exit {runs[0][2]}")  # fmt: skip
        finally:
            cluster.stop()
        bomb = _bomb(work / "bomb.yml")
        argv = [ENVTOOL, "lock", "-f", str(bomb), "--lockfile", str(work / "bomb.lock")]
        runs = [_run(argv, work) for _ in range(max(5, args.runs))]
        print(f"alias bomb ({bomb.stat().st_size} bytes): wall "
              f"{statistics.median(r[0] for r in runs):.2f} s, peak RSS "
              f"{max(r[1] for r in runs):.0f} MiB, exit {runs[0][2]}")  # fmt: skip
        config = _unreachable_config(work)
        for fanout in ("64", "1000"):
            argv = [ENVTOOL, "verify", "--hosts", f"h[1-{args.hosts}]", "-F", str(config),
                    "--no-lock", "--fanout", fanout, "--connect-timeout", "5"]  # fmt: skip
            seconds, rss, code, out = _run(argv, work, files=1024)
            print(f"{args.hosts} unreachable hosts, --fanout {fanout}, ulimit -n 1024: "
                  f"{seconds:.1f} s, peak RSS {rss:.0f} MiB, exit {code}, "
                  f"{len(out.splitlines())} lines of report")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
