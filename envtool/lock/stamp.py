"""The stamp an install leaves in its prefix, ``conda-meta/envtool-lock`` (JSON; not a
``*.json``, which conda and rattler read as package records): which lock
it was made from (the sha256 of the lock file's bytes), for which platform, by which envtool,
when. verify, doctor and ``preflight --quick`` say "installed from this lock" or "from
another lock" by it; it never stands in for what is really there (records, hashes and what
loads are still compared). Its reader is the node package's (envtool_node.stamp): a node
reads it with the standard library alone."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

from envtool.errors import InstallError
from envtool.yamlio import write_atomic
from envtool_node.stamp import SCHEMA, STAMP

__all__ = ["SCHEMA", "STAMP", "lock_hash", "write"]


def lock_hash(lock_path: Path) -> str:
    """sha256 of the lock file's bytes: the same file, the same hash."""
    digest = hashlib.sha256()
    with lock_path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write(prefix: Path, lock_path: Path, platform: str) -> Path:
    """Stamp ``prefix`` (temp file and rename: a reader sees the old stamp or the new)."""
    from envtool import __version__

    body = {
        "schema": SCHEMA,
        "lock_sha256": lock_hash(lock_path),
        "lock": lock_path.name,  # its name only: where it lay on the controller is not said
        "platform": platform,
        "envtool": __version__,
        "installed": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    path = prefix / STAMP
    try:
        write_atomic(path, json.dumps(body, indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        raise InstallError(f"{prefix}: cannot write {path.name}: {exc.strerror}") from None
    return path
