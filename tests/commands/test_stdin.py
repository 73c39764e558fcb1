"""``-`` reads standard input wherever envtool reads a file (the lock, an export, an
nccl-tests log, a baseline), as ``--hosts -`` always did; a file named ``-`` is given with a
folder that pathlib keeps (``$PWD/-``: it reads ``./-`` as ``-``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import REPO

ENVTOOL = str(Path(sys.executable).parent / "envtool")
LOCK = (REPO / "conda-lock.yml").read_text()


def _envtool(*args: str, stdin: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ENVTOOL, *args], input=stdin, capture_output=True, text=True,
                          cwd=cwd, timeout=60)  # fmt: skip


def test_check_and_diff_read_a_lock_on_stdin() -> None:
    run = _envtool("check", "-", stdin=LOCK)
    assert run.returncode == 0 and run.stdout.startswith("consistent: - (68 packages)")
    run = _envtool("diff", "-", "conda-lock.yml", stdin=LOCK)
    assert run.returncode == 0 and run.stdout.startswith("identical: - (68 packages)")


def test_an_nccl_tests_log_on_stdin(tmp_path: Path) -> None:
    log = (
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 1 iters: 1\n"
        "#\n#                                                              out-of-place"
        "                       in-place          \n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)       \n"
        "           8             2     float     sum      -1     9.00    0.00    0.00      0"
        "     8.00    0.00    0.00      0\n"
        "          16             4     float     sum      -1     9.00    0.00    0.00      0"
        "     8.00    0.00    0.00      0\n"
        "# Avg bus bandwidth    : 0.001\n"
    )
    run = _envtool("nccl-tests", "-", "--format", "json", stdin=log, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert '"size": 16' in run.stdout


def test_a_bad_lock_on_stdin_is_named_as_stdin() -> None:
    run = _envtool("check", "-", stdin="version: 1\npackage: 5\n")
    assert run.returncode == 2
    assert (
        run.stderr
        == "envtool: error: -: incomplete lockfile: 'metadata' and 'package' are required\n"
    )


def test_a_file_named_dash_is_read_by_its_full_path(tmp_path: Path) -> None:
    (tmp_path / "-").write_text(LOCK)
    run = _envtool("check", str(tmp_path / "-"), stdin="", cwd=tmp_path)
    assert run.returncode == 0 and "(68 packages)" in run.stdout
