"""Only a run that looked for a finding clears it (history/scope.py): a night a host did not
answer, a ``preflight --quick`` that imports no torch, a Prolog's ``--job-gpus``, a doctor
run, each say nothing of what they did not check; a store of schema 1 is upgraded in place
and read as that envtool judged it; ``history diff`` and the metrics say what was not checked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fixtures import promtool

from envtool.doctor.history import document
from envtool.history import metrics, queries, scope, store, timeline
from envtool.protocol.verify_report import FactsEntry, FindingEntry, HostEntry, VerifyDocument
from envtool.report import history_text

FACTS = FactsEntry("n", "3.9.18", "2.3.0", "11.8", False, 0, (), None, None, "2.18.3", (), ())


def _host(name: str, ok: bool = True, torch: bool = True) -> HostEntry:
    return HostEntry(name, ok, None if ok else "ssh: connection refused", 1.0, (),
                     10 if ok else None, FACTS if ok and torch else None, None)  # fmt: skip


def _finding(kind: str, subject: str, *hosts: str) -> FindingEntry:
    return FindingEntry(kind, "error", subject, "a", "b", "fix it", hosts)


def _lives(path: Path) -> dict[tuple[str, str], timeline.Life]:
    with store.opened(path) as db:
        return {(life.host, life.kind): life for life in timeline.lives(*queries.observations(db))}


def test_a_night_a_host_is_down_or_only_half_read_clears_nothing(tmp_path: Path) -> None:
    """node2's nccl differs and its torch is shadowed (runtime). Night 2 it does not answer;
    night 3 only ``preflight --quick`` runs (no torch imported): the lock finding clears
    there (the records were read), the runtime one does not; night 4 verify: still there."""
    path = tmp_path / "h.sqlite"
    both = (_finding("version-differs", "nccl", "node2"),
            _finding("runtime-differs", "torch", "node2"))  # fmt: skip
    nights = [
        ("verify", VerifyDocument(None, 1.0, False, (_host("node1"), _host("node2")), both)),
        ("verify", VerifyDocument(None, 1.0, False, (_host("node1"), _host("node2", ok=False)),
                                  (_finding("unreachable", "ssh", "node2"),))),
        ("preflight --quick", VerifyDocument(None, 1.0, True, (_host("node2", torch=False),), ())),
        ("verify", VerifyDocument(None, 1.0, False, (_host("node1"), _host("node2")), both[1:])),
    ]  # fmt: skip
    with store.opened(path) as db:
        for at, (command, doc) in enumerate(nights, start=1):
            store.record(db, doc, command, float(at))
    lives = _lives(path)
    assert lives["node2", "version-differs"].cleared_at == 3.0  # the quick run read records
    runtime = lives["node2", "runtime-differs"]
    assert (runtime.cleared_at, runtime.runs, runtime.last_seen) == (None, 2, 4.0)
    assert lives["node2", "unreachable"].cleared_at == 3.0
    made = scope.checks(nights[1][1])  # node1 alone answered: no majority to differ from
    assert made["node2"] == {"reachable"} and "majority" not in made["node1"]
    assert "majority" in scope.checks(nights[0][1])["node1"]
    assert "runtime" not in scope.checks(nights[2][1])["node2"]
    assert "gpu" not in scope.checks(nights[2][1], ("gpu",))["node2"]  # --job-gpus


def test_a_doctor_run_clears_its_own_steps_only(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"

    class Step:
        def __init__(self, name: str, status: str) -> None:
            self.name, self.status, self.summary, self.fix = name, status, f"{name} said", ""

    verify = VerifyDocument(None, 1.0, False, (_host("ws1"),),
                            (_finding("version-differs", "nccl", "ws1"),))  # fmt: skip
    failing = document([Step("lockfile", "pass"), Step("packages", "fail"),
                        Step("ddp", "skip")], "ws1", "conda-lock.yml", "", 2.0)  # fmt: skip
    passing = document([Step("lockfile", "pass"), Step("packages", "pass"),
                        Step("ddp", "pass")], "ws1", "conda-lock.yml", "", 2.0)  # fmt: skip
    assert failing[1]["ws1"] == {"reachable", "doctor-lockfile", "doctor-packages"}
    with store.opened(path) as db:
        store.record(db, verify, "verify", 1.0)
        for at, (doc, made) in enumerate((failing, passing), start=2):
            store.record(db, doc, "doctor", float(at), made=made)
    lives = _lives(path)
    assert lives["ws1", "doctor-packages"].cleared_at == 3.0
    assert lives["ws1", "version-differs"].cleared_at is None  # doctor says nothing of it
    body = metrics.text(metrics.snapshot(failing[0], 2.0, failing[1]))
    assert 'envtool_check_ok{host="ws1",check="doctor-packages"} 0' in body
    assert 'check="doctor-ddp"' not in body and 'check="lock"' not in body  # not made
    assert promtool.check(body).returncode == 0


def test_a_schema_1_store_is_upgraded_and_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    with sqlite3.connect(path) as db:  # schema 1, as envtool 0.x wrote it: no checks kept
        db.executescript(store._TABLES.replace(", checks TEXT NOT NULL DEFAULT '', sizes TEXT "
                                               "NOT NULL DEFAULT ''", "").replace(
            "CREATE INDEX finding_run ON finding (run, host);", ""))  # fmt: skip
        db.execute(f"PRAGMA application_id = {store.APPLICATION_ID}")
        db.execute("PRAGMA user_version = 1")
        for run, (host, found) in enumerate([("n2", True), ("n2", False)], start=1):
            db.execute("INSERT INTO run VALUES (?, ?, 'verify', '', '0', 'u', 1, 1, '')",
                       (run, float(run)))  # fmt: skip
            db.execute("INSERT INTO host_run VALUES (?, ?, 0, 'd', '', 0, NULL)", (run, host))
            if found:
                db.execute("INSERT INTO finding VALUES (1, 'n2', 'version-differs', 'error', "
                           "'nccl')")  # fmt: skip
    db.close()
    # schema 1 kept no checks: a host that did not answer "cleared" what it had, as then
    assert _lives(path)["n2", "version-differs"].cleared_at == 2.0
    with store.opened(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
        indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert "finding_run" in indexes  # schema 3's, made by the upgrade
        store.record(db, VerifyDocument(None, 1.0, True, (_host("n2", ok=False),), ()), "v", 3.0)
        (kept,) = db.execute("SELECT checks FROM host_run WHERE run = 3").fetchone()
    assert kept == "reachable"


def test_history_diff_says_what_run_b_did_not_check(capsys: object) -> None:
    found_a = [("n2", "runtime-differs", "error", "torch"), ("n2", "version-differs",
                                                                 "error", "nccl")]  # fmt: skip
    checked_b = {"n2": frozenset({"reachable", "lock"})}
    history_text.diff(1, 2, ["n2"], checked_b, found_a, [], ({}, {}), "text")
    out = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "n2  cleared  version-differs nccl (error)" in out
    assert "n2  not checked in run B  runtime-differs torch (error)" in out
