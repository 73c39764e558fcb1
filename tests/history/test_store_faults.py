"""The history store on a medium that fails (issue 36's bad input), on a real 1 MiB tmpfs in
its own mount namespace (``unshare -m``): a disk that fills while a 1,000-host run is being
recorded keeps every earlier run and an intact store, and only says so; a store on a
read-only mount is read as it is (``envtool history``), and a verify that cannot record into
it ends with its own verdict and says why. A corrupt store given to verify is no baseline,
said among what the run did not check, never the run's failure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import require, run_main

from envtool.cli import main

BENCH = Path(__file__).resolve().parents[2] / "bench"

SCRIPT = r"""
import errno, json, os, sqlite3, subprocess, sys
from pathlib import Path
root, out = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, sys.argv[3])
from bench_history import nights  # the generator's verify documents
from envtool.history import store
from envtool.history.record import Recording, remember
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(root)],
               check=True)
facts = {}
for name in ("full", "ro"):
    (root / name).mkdir(mode=0o700)
    with store.opened(root / name / "h.sqlite") as db:
        store.record(db, nights(3, 1)[0], "verify", 1.0)
with open(root / "filler", "wb") as fh:  # the disk filled, then 32 KiB given back
    try:
        while True:
            fh.write(b"\0" * 65536)
            fh.flush()
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
os.truncate(root / "filler", max(0, os.path.getsize(root / "filler") - 32768))
facts["said"] = remember(Recording(root / "full" / "h.sqlite", None), nights(1000, 1)[0],
                         "verify")
db = sqlite3.connect(root / "full" / "h.sqlite")
facts["runs"] = db.execute("SELECT count(*) FROM run").fetchone()[0]
facts["integrity"] = db.execute("PRAGMA integrity_check").fetchone()[0]
db.close()
subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
envtool = [sys.executable, "-m", "envtool"]
ran = subprocess.run([*envtool, "history", "--history", str(root / "ro" / "h.sqlite")],
                     capture_output=True, text=True)
facts["history"] = (ran.returncode, ran.stdout, ran.stderr)
ran = subprocess.run([*envtool, "verify", "--transport", "local", "--hosts", "localhost",
                      "--no-lock", "--prefix", str(root / "none"), "--min-gpus", "0",
                      "--history", str(root / "ro" / "h.sqlite"), "-q"],
                     capture_output=True, text=True)
facts["verify"] = (ran.returncode, ran.stderr)
facts["left"] = sorted(os.listdir(root / "ro"))
(out / "facts.json").write_text(json.dumps(facts))
"""


def test_a_full_disk_and_a_read_only_mount_lose_nothing_and_fail_no_run(tmp_path: Path) -> None:
    require(os.geteuid() == 0 and shutil.which("unshare") is not None,
            "needs root and unshare (a tmpfs in a mount namespace)")  # fmt: skip
    root, out = tmp_path / "small", tmp_path / "out"
    root.mkdir()
    out.mkdir()
    ran = subprocess.run(["unshare", "-m", sys.executable, "-c", SCRIPT, str(root), str(out),
                          str(BENCH)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    facts = json.loads((out / "facts.json").read_text())
    assert facts["said"].startswith("history not recorded: "), facts
    assert "full" in facts["said"] and "\n" not in facts["said"], facts
    assert (facts["runs"], facts["integrity"]) == (1, "ok"), facts  # the first run kept whole
    code, text, err = facts["history"]
    assert code == 0 and text.startswith("history: 1 runs"), (text, err)
    code, err = facts["verify"]
    assert code == 1, err  # the verdict it has without a store: the prefix is missing
    assert "history not recorded: " in err and "its folder cannot be written" in err, err
    assert err.count("\n") == 1, err
    assert facts["left"] == ["h.sqlite"], facts  # nothing written beside it


def test_a_corrupt_store_is_no_baseline_and_fails_no_verify(tmp_path: Path) -> None:
    store = tmp_path / "state" / "h.sqlite"
    store.parent.mkdir(mode=0o700)
    store.write_bytes(b"\x00garbage" * 512)
    code, out, err = run_main(main, tmp_path, [], (
        "verify", "--transport", "local", "--hosts", "localhost", "--no-lock", "--prefix",
        str(tmp_path / "env"), "--min-gpus", "0", "--history", str(store), "--format",
        "json"))  # fmt: skip
    assert code == 1, err  # env-missing, as without --history
    unchecked = json.loads(out)["unchecked"]
    assert any(u.startswith("the fleet's history (its baselines, each card's past): history "
                            "store") and "not an SQLite database" in u for u in unchecked), (
        unchecked)  # fmt: skip
    assert "history not recorded:" in err
    assert store.read_bytes() == b"\x00garbage" * 512  # left as it was
