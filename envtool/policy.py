"""``--policy FILE``: a site's cluster policy (YAML) read into judge/cluster_policy.py's
ClusterPolicy. Bounded like every file envtool reads (yamlio), each value type-checked, an
unknown key refused with its line: exit 2 on bad input, before any node is contacted."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from envtool import yamlio
from envtool.errors import InputError
from envtool.judge.cluster_policy import ClusterPolicy, GpuExpect
from envtool.judge.kinds import Kind

MAX_POLICY = 1 << 20  # bytes
_GPU_TYPES: dict[str, type] = {"model": str, "count": int, "memory_mib": int,
                               "mig_allowed": bool, "foreign_memory_mib": int,
                               "persistence_required": bool}  # fmt: skip


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
        bad_int = kind is int and (isinstance(item, bool) or not isinstance(item, int) or item < 0)
        if not isinstance(item, kind) or bad_int or (kind is str and not str(item).strip()):
            what = {str: "a text", int: "a whole number >= 0", bool: "true or false"}[kind]
            raise InputError(f"{_where(path, value, key)}: gpus.{key} must be {what}")
        out[str(key)] = item.strip()[:100] if isinstance(item, str) else item
    return GpuExpect(**out)


def _accept(value: Any, path: Path) -> frozenset[Kind]:
    if not isinstance(value, list):
        raise InputError(f"{_where(path, value)}: 'accept' must be a list of finding kinds")
    kinds = set()
    for i, item in enumerate(value):
        try:
            kinds.add(Kind(item))
        except ValueError:
            raise InputError(f"{_where(path, value, i)}: accept: {item!r} is no finding kind "
                             "(docs/findings.md lists them)") from None  # fmt: skip
    return frozenset(kinds)


# Each top-level section and its reader (issue 28's ``limits:`` joins here).
SECTIONS: dict[str, Callable[[Any, Path], Any]] = {"gpus": _gpus, "accept": _accept}


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
