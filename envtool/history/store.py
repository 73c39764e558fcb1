"""The history store: one SQLite file (the standard library's ``sqlite3``) that every
recorded verify run goes into, in one transaction: the run (when, the command, the lock's
sha256, envtool's version, who, how long, its verdict), each host's presence with its facts
digest, GPU model, all-reduce figures (the peak, and each of the ``KEPT_SIZES`` largest sizes'),
the checks the run made on it (history/scope.py), and each host's findings.

Two runs at once (two Slurm prologs, cron beside an admin) never corrupt or lose a record:
WAL journal, a busy timeout, and ``BEGIN IMMEDIATE`` so a writer waits for the other instead
of failing halfway. A store, or its folder, that another user can write is refused (as the
package cache is: what it says would become what envtool reports). A file that is not an
envtool store (a foreign SQLite database, a corrupt file) and a store from a newer envtool
(its ``user_version``) are refused with one line, and nothing in them is changed.

Path: ``--history PATH``, else ``$ENVTOOL_HISTORY``, else
``$XDG_STATE_HOME/envtool/history.sqlite`` (``~/.local/state/envtool/history.sqlite``)."""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

from envtool import __version__
from envtool.errors import InputError, ResourceError
from envtool.history import scope
from envtool.judge.baseline import card_key, model_key
from envtool.private import why_unsafe
from envtool.protocol.verify_report import HostEntry, VerifyDocument

SCHEMA_VERSION = 3  # 2: each host's checks in its run (history/scope.py), its busbw per size;
# 3: findings indexed by run and host (a host's good runs: linear in its runs, was quadratic)
APPLICATION_ID = 0x656E7631  # "env1": this file is an envtool history store
BUSY_MS = 30_000
KEPT_SIZES = 8  # per host and run: the largest sizes run, the bandwidth-bound ones

_TABLES = """
CREATE TABLE run (
  id INTEGER PRIMARY KEY, at REAL NOT NULL, command TEXT NOT NULL, lock_sha256 TEXT,
  envtool TEXT NOT NULL, user TEXT NOT NULL, seconds REAL NOT NULL, ok INTEGER NOT NULL,
  allreduce TEXT NOT NULL DEFAULT '');
CREATE TABLE host_run (
  run INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE, host TEXT NOT NULL,
  ok INTEGER NOT NULL, digest TEXT NOT NULL, gpu_model TEXT NOT NULL, gpus INTEGER NOT NULL,
  busbw REAL, checks TEXT NOT NULL DEFAULT '', sizes TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (run, host));
CREATE TABLE finding (
  run INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE, host TEXT NOT NULL,
  kind TEXT NOT NULL, severity TEXT NOT NULL, subject TEXT NOT NULL);
CREATE TABLE gpu_run (
  run INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE, host TEXT NOT NULL,
  gpu TEXT NOT NULL, pcie_width INTEGER, memory_mib INTEGER);
CREATE TABLE pair_run (
  run INTEGER NOT NULL REFERENCES run(id) ON DELETE CASCADE, a TEXT NOT NULL, b TEXT NOT NULL,
  model TEXT NOT NULL, busbw REAL NOT NULL);
CREATE INDEX finding_key ON finding (host, kind, subject, run);
CREATE INDEX finding_run ON finding (run, host);
CREATE INDEX gpu_run_host ON gpu_run (host, gpu, run);
CREATE INDEX host_run_host ON host_run (host, run);
CREATE INDEX run_at ON run (at);
"""


def default_path() -> Path:
    """``$ENVTOOL_HISTORY``, else the user's state directory's ``envtool/history.sqlite``."""
    if os.environ.get("ENVTOOL_HISTORY"):
        return Path(os.environ["ENVTOOL_HISTORY"])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "envtool" / "history.sqlite"


def _refuse_unsafe(path: Path) -> None:
    for place in (path.parent, path):
        why = why_unsafe(place)
        if why:
            raise InputError(f"history store {path}: {place} {why}: not used (fix its mode)")


def _check(db: sqlite3.Connection, path: Path, read_only: bool = False) -> None:
    try:
        app = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        what = "not an SQLite database" if "not a database" in str(exc) else "cannot read it"
        raise InputError(f"history store {path}: {what} ({exc})") from None
    if not tables and app == 0 and read_only:
        raise InputError(f"history store {path}: empty, on a folder that cannot be written")
    if not tables and app == 0:
        with db:
            db.executescript(_TABLES)
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return
    if app != APPLICATION_ID:
        raise InputError(f"history store {path}: an SQLite database, but not envtool's history")
    if version > SCHEMA_VERSION:
        raise InputError(
            f"history store {path}: written by a newer envtool (schema {version}; this one "
            f"reads {SCHEMA_VERSION}): upgrade envtool, or use another --history"
        )
    if version < SCHEMA_VERSION and read_only:
        raise InputError(
            f"history store {path}: schema {version}, on a folder that cannot be written: "
            f"this envtool reads {SCHEMA_VERSION} (open it once where it can be written)"
        )
    if version < SCHEMA_VERSION:
        _upgrade(db)


def _upgrade(db: sqlite3.Connection) -> None:
    """A store of an older schema brought to this one in one transaction (its runs kept:
    schema 1's hosts have no checks, read as every check, as that envtool judged them)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        # read again: another writer may have upgraded it while this one waited for the lock
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version == 1:
            db.execute("ALTER TABLE host_run ADD COLUMN checks TEXT NOT NULL DEFAULT ''")
            db.execute("ALTER TABLE host_run ADD COLUMN sizes TEXT NOT NULL DEFAULT ''")
        if version <= 2:
            db.execute("CREATE INDEX IF NOT EXISTS finding_run ON finding (run, host)")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


def _connect(path: Path, read_only: bool) -> sqlite3.Connection:
    """A connection; ``read_only``: opened read-only (a writer elsewhere still seen through
    its ``-shm``), else, where no ``-shm`` can be made beside it (a read-only medium, and no
    writer there), as it is (``immutable``)."""
    try:
        if not read_only:
            return sqlite3.connect(path, timeout=BUSY_MS / 1000, isolation_level=None)
        base = f"file:{urllib.parse.quote(str(path.absolute()))}?mode=ro"
        db = sqlite3.connect(base, uri=True, timeout=BUSY_MS / 1000, isolation_level=None)
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:
            db.close()
        return sqlite3.connect(base + "&immutable=1", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise InputError(f"history store {path}: cannot open it ({exc})") from None


@contextlib.contextmanager
def opened(path: Path, create: bool = True) -> Iterator[sqlite3.Connection]:
    """The store, checked (made when ``create`` and absent); closed after. Only read
    (``create`` False) from a folder that cannot be written (a read-only mount, a snapshot),
    it is read as it is, upgraded never."""
    if not create and not path.exists():
        raise InputError(f"history store {path}: does not exist (record a run first)")
    if create:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _refuse_unsafe(path)
    read_only = not os.access(path.parent, os.W_OK)  # a read-only mount, a snapshot
    if create and read_only:
        raise InputError(f"history store {path}: its folder cannot be written (a read-only "
                         "file system?): nothing recorded")  # fmt: skip
    db = _connect(path, read_only)
    try:
        db.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
        _check(db, path, read_only)
        if not read_only:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA foreign_keys = ON")
            os.chmod(path, 0o600)
        yield db
    except sqlite3.DatabaseError as exc:
        raise InputError(f"history store {path}: {exc}") from None
    finally:
        db.close()


def digest(host: HostEntry) -> str:
    """The facts a node answered, as one short hash (a change of any shows as a new one)."""
    facts = asdict(host.facts) if host.facts is not None else None
    text = json.dumps([facts, host.packages, host.stamp], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _gpu(host: HostEntry) -> tuple[str, int]:
    facts = host.facts
    if facts is None or not facts.devices:
        return "", 0
    return facts.devices[0], len(facts.devices)


def _pairs(run: int, doc: VerifyDocument) -> list[tuple[int, str, str, str, float]]:
    """Each measured pair of nodes of one model: its figure, the lower of its two ends'."""
    keys = {h.host: model_key(*_gpu(h)) for h in doc.hosts if h.facts is not None}
    out = []
    for p in doc.pairs:
        ends = [f for f in (p.busbw, p.partner_busbw) if f is not None]
        if ends and p.a in keys and keys.get(p.a) == keys.get(p.b):
            out.append((run, p.a, p.b, keys[p.a], min(ends)))
    return out


def record(
    db: sqlite3.Connection,
    doc: VerifyDocument,
    command: str,
    at: float,
    allreduce: str = "",
    made: scope.Checks | None = None,
) -> int:
    """The run's id; one transaction (another writer waits up to the busy timeout).
    ``allreduce``: the run's mode and sizes (``node -b 8 -e 32M ...``): a baseline is taken
    only from runs that measured the same way. ``made``: each host's checks (default: what
    its report shows it was read for, history/scope.py)."""
    made = scope.checks(doc) if made is None else made
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        raise ResourceError(f"history store: {exc}") from None
    try:
        row = (at, command, doc.lock_sha256 or "", __version__, _user(), doc.seconds, doc.ok,
               allreduce)  # fmt: skip
        cur = db.execute("INSERT INTO run (at, command, lock_sha256, envtool, user, seconds, ok, "
                         "allreduce) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)  # fmt: skip
        run = int(cur.lastrowid or 0)
        for host in doc.hosts:
            model, count = _gpu(host)
            busbw = host.allreduce.peak_busbw if host.allreduce is not None else None
            checks = scope.text(made.get(host.host, frozenset({"reachable"})))
            sizes = sizes_text(host.allreduce.sizes) if host.allreduce is not None else ""
            db.execute("INSERT INTO host_run VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (run, host.host, host.ok, digest(host), model, count, busbw, checks,
                        sizes))  # fmt: skip
        cards = [(run, host.host, card_key(d.index, d.uuid), d.pcie_width_current,
                  d.memory_total_mib) for host in doc.hosts if host.gpus is not None
                 for d in host.gpus.devices]  # fmt: skip
        db.executemany("INSERT INTO gpu_run VALUES (?, ?, ?, ?, ?)", cards)
        db.executemany("INSERT INTO pair_run VALUES (?, ?, ?, ?, ?)", _pairs(run, doc))
        rows = [(run, h, f.kind, f.severity, f.subject) for f in doc.findings for h in f.hosts]
        db.executemany("INSERT INTO finding VALUES (?, ?, ?, ?, ?)", rows)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return run


def sizes_text(sizes: tuple[tuple[int, float], ...]) -> str:
    """The ``KEPT_SIZES`` largest sizes as the store keeps them: ``bytes:GB/s`` (to the
    MB/s), comma-joined."""
    return ",".join(f"{b}:{round(f, 3)!r}" for b, f in sorted(sizes)[-KEPT_SIZES:])


def sizes_read(kept: str) -> tuple[tuple[int, float], ...]:
    """``sizes_text`` read back (a value that is not one is left out: the store is ours)."""
    out = []
    for part in kept.split(",") if kept else ():
        size, _, figure = part.partition(":")
        with contextlib.suppress(ValueError):
            out.append((int(size), float(figure)))
    return tuple(out)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def prune(db: sqlite3.Connection, before: float) -> int:
    """Runs older than ``before`` removed (their hosts and findings with them); how many."""
    db.execute("BEGIN IMMEDIATE")
    try:
        gone = db.execute("DELETE FROM run WHERE at < ?", (before,)).rowcount
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return int(gone)
