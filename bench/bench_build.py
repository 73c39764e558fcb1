"""``envtool build``: cold vs cached build time, and multi-stage vs single-stage image size.

One run, on a private dockerd (Debian's docker.io) with a debootstrap base image
(bookworm minbase + python3) as both builder and runtime base, and the tests' local channel
served over HTTP on loopback. "Single-stage" is the builder stage itself (`--target builder`):
the same lock installed, plus the builder's venv, wheels and Python tooling.

    python bench/bench_build.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from conftest import serve  # noqa: E402
from fixtures import dockerd  # noqa: E402
from fixtures.channel import build_channel, realistic_packages  # noqa: E402

from envtool import image  # noqa: E402

BIN = Path(sys.executable).parent
CACHE = Path(os.environ.get("ENVTOOL_TEST_CACHE", Path.home() / ".cache" / "envtool-tests"))


def _size(tag: str) -> int:
    out = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", tag],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


def main() -> int:
    with tempfile.TemporaryDirectory(
        prefix="envtool-bench-build-", ignore_cleanup_errors=True
    ) as tmp:
        work = Path(tmp)
        engine = dockerd.start_engine(work / "docker")
        os.environ["DOCKER_HOST"] = engine.host
        try:
            base = dockerd.base_image(engine, CACHE)
            channel = build_channel(work / "channel", realistic_packages("/usr/bin/python3"))
            with serve(channel) as url:
                (work / "environment.yml").write_text(
                    f"name: ddp\nchannels: [{url}]\ndependencies: [python=3.9, "
                    "'pytorch=*=cuda118*', cudatoolkit=11.8, nccl, numpy, pip]\n"
                )
                (work / "virtual-packages.yml").write_text(
                    "subdirs:\n  linux-64:\n    packages:\n"
                    '      __cuda: "11.8"\n      __glibc: "2.28"\n'
                )
                subprocess.run(
                    [str(BIN / "envtool"), "lock", "--cache-dir", str(work / "c")],
                    cwd=work,
                    check=True,
                    capture_output=True,
                )
                lock = work / "conda-lock.yml"

                def build(tag: str, no_cache: bool, target: str | None = None) -> float:
                    opts = image.BuildOptions(
                        lock, tag, base, base, "host", no_cache, target=target,
                        install_args=("--allow-insecure-url",),
                    )  # fmt: skip
                    return image.build(opts, lambda _: None).seconds

                cold = build("bench/ddp:multi", False)  # a fresh engine: nothing cached yet
                warm = build("bench/ddp:multi", False)
                build("bench/ddp:single", False, target="builder")
                multi, single = _size("bench/ddp:multi"), _size("bench/ddp:single")
        finally:
            engine.stop()
    print("lock: 9 packages from the tests' channel; base: debootstrap bookworm + python3")
    print(
        f"build  cold (fresh engine) {cold:6.1f} s   unchanged lock (cache) {warm:6.1f} s   "
        f"ratio {cold / warm:5.1f}x"
    )
    print(
        f"size   multi-stage {multi / 1e6:7.1f} MB   single-stage {single / 1e6:7.1f} MB   "
        f"ratio {single / multi:5.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
