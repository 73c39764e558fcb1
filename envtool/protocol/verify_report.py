"""``envtool.verify/1``: the JSON report of ``envtool verify``, written and read back here.

``dumps`` writes what report/verify.py assembled (findings already worded); ``loads`` reads
such a report back, strictly (``--baseline`` takes its all-reduce figures from one). A test
writes a report, reads it back and compares: the two directions cannot drift apart.
docs/report-schema.md documents these fields; a test checks the page against them.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from envtool.errors import InputError
from envtool.protocol import report_parts, schemas
from envtool.protocol.fields import Malformed, long_number_line
from envtool.protocol.verify_types import (
    AllReduceEntry,
    FactsEntry,
    FindingEntry,
    HostEntry,
    LibraryEntry,
    PairEntry,
    RuntimeEntry,
    VerifyDocument,
)

__all__ = ["AllReduceEntry", "FactsEntry", "FindingEntry", "HostEntry", "LibraryEntry",
           "PairEntry", "RuntimeEntry", "VerifyDocument", "dumps", "loads", "read"]  # fmt: skip


def _plain(value: Any) -> Any:
    """A dataclass tree as JSON values (tuples of pairs named ``env`` become objects)."""
    if hasattr(value, "__dataclass_fields__"):
        out = {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
        if isinstance(value, FactsEntry):
            out["env"] = dict(value.env)
        return {**out, **report_parts.extra(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def finding_dict(entry: FindingEntry) -> dict[str, Any]:
    """A finding as JSON."""
    out: dict[str, Any] = _plain(entry)
    return out


def dumps(doc: VerifyDocument) -> str:
    """The report's JSON text (keys sorted, two-space indent, a final newline)."""
    body = {"schema": schemas.VERIFY, **_plain(doc)}
    return json.dumps(body, indent=2, sort_keys=True, allow_nan=False) + "\n"


class _Bad(ValueError):
    pass


def _get(doc: Any, key: str, kinds: tuple[type, ...], optional: bool = False) -> Any:
    if not isinstance(doc, dict):
        raise _Bad(f"expected an object around '{key}'")
    value = doc.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise _Bad(f"'{key}' has the wrong type")
    if isinstance(value, float) and not math.isfinite(value):
        raise _Bad(f"'{key}' is not a finite number")
    return value


def _strings(doc: Any, key: str) -> tuple[str, ...]:
    items = _get(doc, key, (list,))
    if not all(isinstance(i, str) for i in items):
        raise _Bad(f"'{key}' must list strings")
    return tuple(items)


def _runtime(doc: Any) -> RuntimeEntry | None:
    if doc is None:
        return None
    libraries = tuple(
        LibraryEntry(_get(d, "kind", (str,)), _get(d, "path", (str,)),
                     _get(d, "version", (str,), optional=True))
        for d in _get(doc, "libraries", (list,))
    )  # fmt: skip
    return RuntimeEntry(
        _get(doc, "executable", (str,)),
        _get(doc, "sys_prefix", (str,)),
        _get(doc, "user_site", (str,), optional=True),
        _get(doc, "torch_file", (str,), optional=True),
        libraries,
        _strings(doc, "net_plugins"),
    )


def _facts(doc: Any) -> FactsEntry | None:
    if doc is None:
        return None
    env = _get(doc, "env", (dict,))
    text = {
        k: _get(doc, k, (str,), optional=True) for k in ("torch", "cuda", "driver", "cudnn", "nccl")
    }
    return FactsEntry(
        _get(doc, "hostname", (str,)),
        _get(doc, "python", (str,)),
        text["torch"],
        text["cuda"],
        _get(doc, "cuda_available", (bool,)),
        _get(doc, "device_count", (int,)),
        _strings(doc, "devices"),
        text["driver"],
        text["cudnn"],
        text["nccl"],
        tuple(sorted((str(k), str(v)) for k, v in env.items())),
        _strings(doc, "notes"),
        _runtime(_get(doc, "runtime", (dict,), optional=True)),
    )


def _allreduce(doc: Any) -> AllReduceEntry | None:
    if doc is None:
        return None
    return AllReduceEntry(
        _get(doc, "backend", (str,)),
        _get(doc, "nranks", (int,)),
        _float(_get(doc, "peak_busbw", (int, float), optional=True)),
        _get(doc, "wrong_total", (int,)),
        _get(doc, "error", (str,), optional=True),
        _get(doc, "member", (bool,), optional=True) or False,
        _sizes(_get(doc, "sizes", (list,), optional=True) or []),
    )


MAX_SIZES = 64  # sizes in one sweep (8 B to 16 GiB by 2 is 32)


def _sizes(items: list[Any]) -> tuple[tuple[int, float], ...]:
    """``[[bytes, busbw], ...]``: integers of bytes, finite figures, at most MAX_SIZES."""
    good = len(items) <= MAX_SIZES and all(
        isinstance(i, list) and len(i) == 2 and type(i[0]) is int and 0 < i[0] < 1 << 62
        and type(i[1]) in (int, float) and math.isfinite(i[1]) and i[1] >= 0 for i in items
    )  # fmt: skip
    if not good:
        raise _Bad(f"'sizes' must list at most {MAX_SIZES} [bytes, busbw] pairs")
    return tuple((int(b), float(f)) for b, f in items)


def _float(value: int | float | None) -> float | None:
    return None if value is None else float(value)


def _hex64(doc: Any, key: str) -> str | None:
    """A sha256 in hex, or None (absent or null: an older report)."""
    value = _get(doc, key, (str,), optional=True)
    if value is None:
        return None
    if not (len(value) == 64 and all(c in "0123456789abcdef" for c in value)):
        raise _Bad(f"{key!r} is not a sha256")
    return str(value)


def _host(doc: Any) -> HostEntry:
    return HostEntry(
        _get(doc, "host", (str,)),
        _get(doc, "ok", (bool,)),
        _get(doc, "error", (str,), optional=True),
        float(_get(doc, "seconds", (int, float))),
        _strings(doc, "problems"),
        _get(doc, "packages", (int,), optional=True),
        _facts(_get(doc, "facts", (dict,), optional=True)),
        _allreduce(_get(doc, "allreduce", (dict,), optional=True)),
        report_parts.read(doc, "gpus"),
        report_parts.read(doc, "network"),
        report_parts.read(doc, "limits"),
        report_parts.read(doc, "rendezvous"),
        report_parts.read_offset(doc),
        _hex64(doc, "stamp"),
    )


def _finding(doc: Any) -> FindingEntry:
    text = {k: _get(doc, k, (str,)) for k in ("kind", "severity", "subject", "expected", "actual")}
    return FindingEntry(
        text["kind"],
        text["severity"],
        text["subject"],
        text["expected"],
        text["actual"],
        _get(doc, "hint", (str,)),
        _strings(doc, "hosts"),
        _get(doc, "follows", (int,), optional=True) or 0,
    )


def _pair(doc: Any) -> PairEntry:
    return PairEntry(
        _get(doc, "a", (str,)),
        _get(doc, "b", (str,)),
        _get(doc, "round", (int,)),
        _float(_get(doc, "busbw", (int, float), optional=True)),
        _get(doc, "error", (str,), optional=True),
        float(_get(doc, "seconds", (int, float))),
        _get(doc, "by", (str,), optional=True),
        _float(_get(doc, "partner_busbw", (int, float), optional=True)),
    )


def loads(text: str, source: str) -> VerifyDocument:
    """Read a report back; InputError naming ``source`` when it is not a verify/1 report."""
    line = long_number_line(text)
    if line:  # JSON reads it as an int; float() would raise OverflowError
        raise InputError(f"{source}:{line}: a number too long for a float: not an envtool "
                         "verify JSON report")  # fmt: skip
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError, or an integer too long to read
        raise InputError(f"{source}: not an envtool verify JSON report") from None
    if not isinstance(doc, dict) or doc.get("schema") != schemas.VERIFY:
        raise InputError(f"{source}: not an envtool verify JSON report (schema {schemas.VERIFY})")
    try:
        return VerifyDocument(
            _get(doc, "lockfile", (str,), optional=True),
            float(_get(doc, "seconds", (int, float))),
            _get(doc, "ok", (bool,)),
            tuple(_host(h) for h in _get(doc, "hosts", (list,))),
            tuple(_finding(f) for f in _get(doc, "findings", (list,))),
            tuple(_pair(p) for p in _get(doc, "pairs", (list,), optional=True) or ()),
            _get(doc, "rounds", (int,), optional=True) or 0,
            _strings(doc, "unchecked") if "unchecked" in doc else (),
            _strings(doc, "docker_run") if "docker_run" in doc else (),
            _hex64(doc, "lock_sha256"),
        )
    except (_Bad, Malformed) as exc:
        raise InputError(f"{source}: not an envtool verify JSON report: {exc}") from None


def read(path: Path) -> VerifyDocument:
    """A report file."""
    from envtool import yamlio

    return loads(yamlio.read_text(path, "verify report"), str(path))
