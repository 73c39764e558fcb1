"""A lock's packages for one platform, remembered by the lock's content: what a Slurm prolog
(``preflight --quick``) reads on every node before every job. Parsing a real conda-lock.yml
takes 0.3-0.6 s (YAML), a JSON copy of its result a few milliseconds.

The copy lives in envtool's cache folder (``$ENVTOOL_CACHE_DIR``, else
``$XDG_CACHE_HOME/envtool``, else ``~/.cache/envtool``) under the SHA-256 of the lock's bytes,
the platform and this format's name; any copy that does not read back exactly is ignored and
the lock is parsed again. Nothing but this module reads or writes it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envtool import yamlio
from envtool.errors import InputError
from envtool.models import Environment, Package
from envtool.private import why_unsafe

if TYPE_CHECKING:
    from envtool.lock.lockfile import Lockfile

# how a lock becomes an Environment (environments.from_lock; lock/ comes after it)
Convert = Callable[["Lockfile", str, str], Environment]

FORMAT = "envtool.lock-cache/1"
FIELDS = ("name", "version", "build", "channel", "manager", "url", "md5", "sha256")


@dataclass(frozen=True)
class LockedEnv:
    """What the quick mode needs of a lock: its packages for the platform, and the files it
    was solved from (where the environment's name is)."""

    env: Environment
    sources: tuple[str, ...]


def cache_dir() -> Path:
    """Where envtool keeps what it may forget (the lock solver's rule, lock/solve.py)."""
    if os.environ.get("ENVTOOL_CACHE_DIR"):
        return Path(os.environ["ENVTOOL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "envtool"


def _encode(locked: LockedEnv) -> str:
    rows = [[*(getattr(p, f) for f in FIELDS), list(p.depends)] for p in locked.env.packages]
    return json.dumps({"format": FORMAT, "source": locked.env.source,
                       "sources": list(locked.sources), "packages": rows})  # fmt: skip


def _strings(value: Any, size: int) -> list[str]:
    if (
        not isinstance(value, list)
        or len(value) != size
        or not all(isinstance(v, str) for v in value)
    ):
        raise ValueError("not a row of strings")
    return value


def _decode(text: str) -> LockedEnv:
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError("not a lock cache")
    packages = []
    for row in doc["packages"]:
        if not isinstance(row, list) or len(row) != len(FIELDS) + 1:
            raise ValueError("a malformed row")
        fields = _strings(row[: len(FIELDS)], len(FIELDS))
        depends = _strings(row[-1], len(row[-1]) if isinstance(row[-1], list) else -1)
        name, version, build, channel, manager, url, md5, sha256 = fields
        packages.append(Package(name, version, build, channel, manager, url, md5, sha256,
                                tuple(depends)))  # fmt: skip
    sources = _strings(doc["sources"], len(doc["sources"]))
    return LockedEnv(Environment(str(doc["source"]), "lock", tuple(packages)), tuple(sources))


def _trusted(copy: Path) -> bool:
    """The cached copy and every folder up to the cache's root are this user's (or root's)
    and nobody else may write them (private.why_unsafe)."""
    return copy.is_file() and not any(
        why_unsafe(p) for p in (copy, copy.parent, cache_dir()) if p.exists()
    )


def read(path: Path, platform: str, convert: Convert) -> LockedEnv:
    """The lock's packages for ``platform``: from the cache when this very lock was read
    before, else parsed (InputError as ``lockfile.read`` raises it), converted and
    remembered."""
    text = yamlio.read_text(path, "lockfile")
    key = hashlib.sha256(f"{FORMAT}\0{platform}\0{path}\0".encode() + text.encode()).hexdigest()
    copy = cache_dir() / "locks" / f"{key}.json"
    if _trusted(copy):  # a copy another user could write would fake the lock: parse instead
        try:
            return _decode(yamlio.read_text(copy, "lock cache"))
        except (InputError, ValueError, KeyError, TypeError):
            pass
    from envtool.lock import lockfile  # the YAML parse and its model: only on a miss

    data = lockfile.parse(text, path)
    locked = LockedEnv(convert(data, str(path), platform), data.metadata.sources)
    try:
        copy.parent.mkdir(parents=True, exist_ok=True)
        yamlio.write_atomic(copy, _encode(locked))
    except OSError:
        pass  # a cache that cannot be written only costs the next run the parse
    return locked
