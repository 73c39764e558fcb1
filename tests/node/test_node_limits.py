"""envtool_node/limits.py and the node document's limits part and clock entry, run for real:
a private 64 MiB tmpfs on /dev/shm (its own mount namespace) and a lowered open-files limit
(prlimit) are what the node reports, and envtool's reader reads them back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from conftest import require

from envtool.protocol.documents import read_node
from envtool.protocol.limit_types import UNLIMITED
from envtool_node import limits

MiB = 1024 * 1024


def test_shm_size_is_the_file_systems_size_and_a_missing_path_is_its_error(
    tmp_path: Path,
) -> None:
    st = os.statvfs("/dev/shm")
    assert limits.shm_size("/dev/shm") == (st.f_blocks * st.f_frsize, None)
    size, error = limits.shm_size(str(tmp_path / "no-shm"))
    assert size is None and error is not None and "No such file" in error


def test_collect_reads_this_process(tmp_path: Path) -> None:
    import resource

    doc = limits.collect(str(tmp_path / "absent"))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert doc["nofile"] == [soft, UNLIMITED if hard == resource.RLIM_INFINITY else hard]
    assert doc["shm_bytes"] is None and "absent" in doc["shm_error"]
    assert doc["kernel"] == os.uname().release
    assert doc["glibc"] == os.confstr("CS_GNU_LIBC_VERSION").split()[1]  # type: ignore[union-attr]


def _node_document(prefix: str) -> str:
    """``python -m envtool_node`` in its own mount namespace with a 64 MiB /dev/shm, under an
    open-files limit of 256:512 and a locked-memory limit of 64 KiB:128 KiB."""
    require(
        os.geteuid() == 0 and all(shutil.which(t) for t in ("unshare", "prlimit", "mount")),
        "needs root, unshare, prlimit and mount",
    )
    probes = Path(limits.__file__).resolve().parents[1]
    inner = (
        "mount -t tmpfs -o size=64m tmpfs /dev/shm && exec prlimit --nofile=256:512 "
        f"--memlock=65536:131072 {sys.executable} -B -m envtool_node --no-torch "
        f"--no-export --prefix {prefix}"
    )
    env = {**os.environ, "PYTHONPATH": str(probes)}
    out = subprocess.run(
        ["unshare", "--mount", "sh", "-c", inner], capture_output=True, text=True, timeout=120,
        env=env, check=True,
    )  # fmt: skip
    return out.stdout


def test_the_node_reports_its_own_limits_and_clock(tmp_path: Path) -> None:
    before = time.time()
    text = _node_document(sys.prefix)
    after = time.time()
    doc = json.loads(text)
    assert doc["limits"]["shm_bytes"] == 64 * MiB
    assert doc["limits"]["nofile"] == [256, 512]
    assert doc["limits"]["memlock"] == [65536, 131072]
    assert before <= doc["clock"]["time"] <= after
    assert 0 < doc["clock"]["elapsed"] < after - before
    read = read_node(text, "node")
    assert read.limits is not None and read.limits.shm_bytes == 64 * MiB
    assert read.limits.nofile == (256, 512) and read.limits.memlock == (65536, 131072)
    assert read.clock is not None and read.clock.time == doc["clock"]["time"]
    assert read.problems == ()


def test_the_clock_entry_counts_a_slow_interpreter_start(tmp_path: Path) -> None:
    """The process's age comes from /proc/self/stat: a python whose start took 0.8 s (a
    sitecustomize that sleeps, as a cold network filesystem would) reports at least that,
    where the seconds since main() began would say almost nothing; the controller's bound on
    that node's clock offset stays as tight as the others'."""
    (tmp_path / "sitecustomize.py").write_text("import time\ntime.sleep(0.8)\n")
    probes = Path(limits.__file__).resolve().parents[1]
    code = "from envtool_node import limits; print(limits.process_age(0.001))"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{probes}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=30)  # fmt: skip
    assert 0.8 <= float(out.stdout) < 10.0
    assert limits.process_age(1e9) == 1e9  # never less than the time main() has run
