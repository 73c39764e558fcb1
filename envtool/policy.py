"""``--policy FILE``: a site's cluster policy (YAML) read into judge/cluster_policy.py's
ClusterPolicy. Bounded like every file envtool reads (yamlio), each value type-checked, an
unknown key refused with its line: exit 2 on bad input, before any node is contacted."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import fields, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from envtool import yamlio
from envtool.errors import InputError
from envtool.judge.cluster_policy import NOT_ACCEPTABLE, ClusterPolicy, GpuExpect
from envtool.judge.kinds import Kind
from envtool.judge.limits import LimitsPolicy

MAX_POLICY = 1 << 20  # bytes
_GPU_TYPES: dict[str, type] = {"model": str, "count": int, "memory_mib": int,
                               "mig_allowed": bool, "foreign_memory_mib": int,
                               "persistence_required": bool}  # fmt: skip


MAX_NUMBER = 2**63 - 1  # a count, MiB or byte threshold past it is no threshold (and 9...9t
# would be no float: it overflowed)


def _whole(item: Any, least: int = 0) -> bool:
    """A whole number from ``least`` to MAX_NUMBER (a bool is no number)."""
    return isinstance(item, int) and not isinstance(item, bool) and least <= item <= MAX_NUMBER


def _where(path: Path, container: object, key: object = None) -> str:
    return f"{path}:{yamlio.line_of(container, key)}"


def _gpus(value: Any, path: Path) -> GpuExpect:
    if not isinstance(value, dict):
        raise InputError(f"{_where(path, value)}: 'gpus' must be a mapping")
    out: dict[str, Any] = {}
    for key, item in value.items():
        kind = _GPU_TYPES.get(str(key))
        if kind is None:
            known = ", ".join(_GPU_TYPES)
            raise InputError(f"{_where(path, value, key)}: unknown key gpus.{key} (known: {known})")
        bad_int = kind is int and not _whole(item)
        if not isinstance(item, kind) or bad_int or (kind is str and not str(item).strip()):
            what = {str: "a text", int: "a whole number from 0 to 2^63-1",
                    bool: "true or false"}[kind]  # fmt: skip
            raise InputError(f"{_where(path, value, key)}: gpus.{key} must be {what}")
        out[str(key)] = item.strip()[:100] if isinstance(item, str) else item
    return GpuExpect(**out)


def _accept(value: Any, path: Path) -> frozenset[Kind]:
    if not isinstance(value, list):
        raise InputError(f"{_where(path, value)}: 'accept' must be a list of finding kinds")
    kinds = set()
    for i, item in enumerate(value):
        try:
            kind = Kind(item)
        except ValueError:
            raise InputError(f"{_where(path, value, i)}: accept: {item!r} is no finding kind "
                             "(docs/findings.md lists them)") from None  # fmt: skip
        if kind in NOT_ACCEPTABLE:
            raise InputError(f"{_where(path, value, i)}: accept: {kind.value} cannot be accepted: "
                             f"{NOT_ACCEPTABLE[kind]}")  # fmt: skip
        kinds.add(kind)
    return frozenset(kinds)


_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
_SIZE = re.compile(r"(\d{1,20}(?:\.\d{1,20})?)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)


def size_bytes(value: Any) -> int | None:
    """``1GiB``, ``512M``, ``8g`` (binary units, as docker's ``--shm-size``) or a whole number
    of bytes, at most MAX_NUMBER; None when it is neither."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if _whole(value) else None
    match = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        return None
    size = int(Fraction(match.group(1)) * _UNITS[match.group(2).lower()])  # exact: no inf
    return size if size <= MAX_NUMBER else None


def _seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e9


def _limits(value: Any, path: Path) -> LimitsPolicy:
    """The ``limits:`` section: shm_min (a size), nofile_min (a count), clock_skew_s (seconds)."""
    if not isinstance(value, dict):
        raise InputError(f"{_where(path, value)}: 'limits' must be a mapping")
    out: dict[str, Any] = {}
    for key, item in value.items():
        where = _where(path, value, key)
        if key == "shm_min" and (size := size_bytes(item)) is not None:
            out["shm_min_bytes"] = size
        elif key == "nofile_min" and _whole(item, -MAX_NUMBER):
            out["nofile_min"] = max(0, item)
        elif key == "clock_skew_s" and _seconds(item):
            out["clock_skew_s"] = float(item)
        elif key in ("shm_min", "nofile_min", "clock_skew_s"):
            what = {"shm_min": "a size (1GiB, 512M, or bytes) up to 8 EiB",
                    "nofile_min": "a whole number up to 2^63-1",
                    "clock_skew_s": "seconds above 0"}[key]  # fmt: skip
            raise InputError(f"{where}: limits.{key} must be {what}")
        else:
            raise InputError(f"{where}: unknown key limits.{key} (known: shm_min, nofile_min, "
                             "clock_skew_s)")  # fmt: skip
    return LimitsPolicy(**out)


def _gbps(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e6


def _baselines(value: Any, path: Path) -> tuple[tuple[str, float | None, float | None], ...]:
    """The ``baselines:`` section: per GPU model and count, ``busbw`` (a pinned baseline) and
    ``floor``, in GB/s."""
    if not isinstance(value, dict):
        shape = "GPU model and count ('NVIDIA H100 80GB HBM3 x8', 'no GPU') to busbw:, floor:"
        raise InputError(f"{_where(path, value)}: 'baselines' must be a mapping of {shape}")
    out = []
    for model, item in value.items():
        where = _where(path, value, model)
        if not isinstance(model, str) or not model.strip() or not isinstance(item, dict):
            raise InputError(f"{where}: baselines.{model}: a model's name and busbw:, floor:")
        pinned: dict[str, float] = {}
        for key, figure in item.items():
            if key not in ("busbw", "floor"):
                raise InputError(f"{_where(path, item, key)}: unknown key baselines.{model}."
                                 f"{key} (known: busbw, floor)")  # fmt: skip
            if not _gbps(figure):
                raise InputError(f"{_where(path, item, key)}: baselines.{model}.{key} must be "
                                 "GB/s above 0")  # fmt: skip
            pinned[key] = float(figure)
        out.append((model.strip()[:200], pinned.get("busbw"), pinned.get("floor")))
    return tuple(out)


# Each top-level section and its reader.
SECTIONS: dict[str, Callable[[Any, Path], Any]] = {"gpus": _gpus, "limits": _limits,
                                                   "accept": _accept,
                                                   "baselines": _baselines}  # fmt: skip


def read(path: Path) -> ClusterPolicy:
    """The policy file at ``path``; InputError naming the file and line for anything wrong."""
    doc = yamlio.loads(yamlio.read_text(path, "policy file", MAX_POLICY), path)
    if doc is None:
        return ClusterPolicy(source=str(path))
    if not isinstance(doc, dict):
        raise InputError(f"{path}: a policy file is a mapping (gpus:, accept:)")
    names = {f.name for f in fields(ClusterPolicy)}
    policy = ClusterPolicy(source=str(path))
    for key, value in doc.items():
        reader = SECTIONS.get(str(key))
        if reader is None or str(key) not in names:
            known = ", ".join(SECTIONS)
            raise InputError(f"{_where(path, doc, key)}: unknown key {key!r} (known: {known})")
        policy = replace(policy, **{str(key): reader(value, path)})
    return policy
