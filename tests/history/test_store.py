"""The history store on the real SQLite (the standard library's): runs recorded and read back
as each finding's life, concurrent writers, and every store it must refuse (foreign, corrupt,
newer, writable by others) refused in one line with nothing in it changed."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envtool.errors import InputError
from envtool.history import queries, store, timeline
from envtool.history.record import Recording, remember
from envtool.protocol.verify_report import FindingEntry, HostEntry, VerifyDocument


def _host(name: str, ok: bool = True) -> HostEntry:
    return HostEntry(name, ok, None if ok else "unreachable", 1.0, (), 10, None, None)


def _doc(hosts: list[str], findings: dict[str, list[str]]) -> VerifyDocument:
    """``findings``: kind → the hosts that have it (subject ``nccl``, severity error)."""
    entries = tuple(FindingEntry(k, "error", "nccl", "2.18.3.1", "2.16.5.1", "install it",
                                 tuple(h)) for k, h in findings.items())  # fmt: skip
    return VerifyDocument("conda-lock.yml", 2.0, not entries, tuple(map(_host, hosts)), entries,
                          lock_sha256="c" * 64)  # fmt: skip


def test_a_findings_life_first_seen_cleared_and_back(tmp_path: Path) -> None:
    """node2's nccl drifts (runs 1, 2), is fixed (3), comes back (4). node3 has it in run 1,
    is unreachable in run 2 (absent: says nothing) and has it still in run 3."""
    path = tmp_path / "h.sqlite"
    nights = [
        (["node1", "node2", "node3"], {"version-differs": ["node2", "node3"]}),
        (["node1", "node2"], {"version-differs": ["node2"]}),
        (["node1", "node2", "node3"], {"version-differs": ["node3"]}),
        (["node1", "node2", "node3"], {"version-differs": ["node2", "node3"]}),
    ]
    with store.opened(path) as db:
        for at, (hosts, found) in enumerate(nights, start=1):
            store.record(db, _doc(hosts, found), "verify", float(at * 86400))
        lives = {life.host: life for life in timeline.lives(*queries.observations(db))}
        good = queries.last_good(db)
    assert good == {"node1": 4, "node2": 3}  # node3 had its error every night it answered
    assert set(lives) == {"node2", "node3"}
    two, three = lives["node2"], lives["node3"]
    assert (two.first_seen, two.last_seen, two.cleared_at, two.came_back, two.runs) == (
        86400.0, 4 * 86400.0, None, 1, 3)  # fmt: skip
    assert (three.first_seen, three.cleared_at, three.came_back, three.runs) == (
        86400.0, None, 0, 3)  # fmt: skip
    with store.opened(path) as db:
        assert store.prune(db, 2.5 * 86400) == 2
        assert [r.at for r in queries.runs(db)] == [3 * 86400.0, 4 * 86400.0]
        (count,) = db.execute("SELECT count(*) FROM finding").fetchone()
        assert count == 3  # the pruned runs' findings went with them


def test_two_writers_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with store.opened(path):
        pass
    code = textwrap.dedent(f"""
        import sys
        sys.path[:0] = {sys.path!r}
        from pathlib import Path
        from envtool.history import store
        from envtool.protocol.verify_report import VerifyDocument, HostEntry
        doc = VerifyDocument(None, 1.0, True,
                             tuple(HostEntry(f"n{{i}}", True, None, 1.0, (), 1, None, None)
                                   for i in range(50)), ())
        for i in range(40):
            with store.opened(Path({str(path)!r})) as db:
                store.record(db, doc, "prolog", float(i))
    """)
    writers = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
               for _ in range(3)]  # fmt: skip
    for w in writers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err.decode()
    with store.opened(path) as db:
        assert queries.span(db).count == len(list(queries.runs(db))) == 120
        (hosts,) = db.execute("SELECT count(*) FROM host_run").fetchone()
        assert hosts == 120 * 50
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _foreign(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (x TEXT)")
    db.commit()
    db.close()


def _newer(path: Path) -> None:
    with store.opened(path):
        pass
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (_foreign, "an SQLite database, but not envtool's history"),
        (lambda p: p.write_bytes(b"\x00garbage" * 512), "not an SQLite database"),
        (_newer, "written by a newer envtool (schema 99"),
    ],
    ids=["foreign", "corrupt", "newer"],
)
def test_a_store_that_is_not_ours_is_refused_and_left_as_it_was(
    tmp_path: Path, make: object, said: str
) -> None:
    path = tmp_path / "h.sqlite"
    make(path)  # type: ignore[operator]
    before = path.read_bytes()
    with pytest.raises(InputError, match="history store") as caught, store.opened(path):
        pass
    assert said in str(caught.value) and "\n" not in str(caught.value)
    assert path.read_bytes() == before


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_store_others_can_write_is_refused(tmp_path: Path, where: str) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    path = folder / "h.sqlite"
    with store.opened(path):
        pass
    os.chmod(path if where == "file" else folder, 0o777 if where == "folder" else 0o666)
    with pytest.raises(InputError, match="writable by group or others"), store.opened(path):
        pass


def test_a_run_whose_recording_fails_says_so_and_stands(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder\n")
    said = remember(Recording(blocked / "h.sqlite", blocked / "m.prom"), _doc(["n1"], {}),
                    "verify")  # fmt: skip
    assert said.startswith("history not recorded: ") and "metrics not written: " in said
