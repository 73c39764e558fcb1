"""A disk that fills during ``envtool fix --apply``: the prefix on a 4 MiB tmpfs (its own
mount namespace, ``unshare -m``), installed from the older lock, the rest of the tmpfs then
filled but for 16 KiB; the new generation cannot be written (ENOSPC). The fix says so in one
line, exits 1, and leaves the prefix exactly as it was and no generation behind."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import require

SCRIPT = r"""
set -e
mount -t tmpfs -o size=4m tmpfs "$ROOT"
"$PY" -m envtool install --lockfile "$OLD" --prefix "$ROOT/env" --allow-insecure-url \
    --allow-stale --cache-dir "$CACHE" >/dev/null
free=$(df --output=avail -B1 "$ROOT" | tail -1)
fallocate -l $((free - 16384)) "$ROOT/filler" || dd if=/dev/zero of="$ROOT/filler" bs=4096 \
    count=$(( (free - 16384) / 4096 )) 2>/dev/null
set +e
"$PY" -m envtool fix --transport local --hosts localhost --prefix "$ROOT/env" \
    --lockfile "$NEW" --allow-insecure-url --cache-dir "$CACHE" --apply --yes >"$OUT/out" \
    2>"$OUT/err"
echo $? >"$OUT/code"
ls -A "$ROOT" >"$OUT/ls"
readlink "$ROOT/env" >"$OUT/link" || true
cat "$ROOT"/env/conda-meta/nccl-*.json >"$OUT/nccl"
"""


def test_a_full_disk_leaves_the_prefix_as_it_was(locks: dict[str, Path], tmp_path: Path) -> None:
    require(os.geteuid() == 0 and shutil.which("unshare") is not None,
            "needs root and unshare (a tmpfs in a mount namespace)")  # fmt: skip
    root, out = tmp_path / "small", tmp_path / "out"
    root.mkdir()
    out.mkdir()
    env = {**os.environ, "ROOT": str(root), "OUT": str(out), "PY": sys.executable,
           "OLD": str(locks["old"]), "NEW": str(locks["new"]),
           "CACHE": str(tmp_path / "cache")}  # fmt: skip
    ran = subprocess.run(["unshare", "-m", "sh", "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    said = " ".join(((out / "out").read_text() + (out / "err").read_text()).split())
    assert (out / "code").read_text().strip() == "1", said
    assert "No space left on device" in said, said  # the root cause, kept by the clipping
    assert (out / "ls").read_text().split() == ["env", "filler"], said  # no generation left
    assert (out / "link").read_text() == ""  # still the directory, not a link
    assert json.loads((out / "nccl").read_text())["version"] == "2.16.5.1"
