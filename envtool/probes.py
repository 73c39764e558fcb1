"""Locating ``probes/``, running its scripts locally, and validating what they print."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from envtool import proc
from envtool.errors import EnvtoolError, InputError, ProblemFound

MAX_OUTPUT = 64 * 1024 * 1024  # a probe document larger than this is not believed
PROBE_SCHEMA = "envtool.probe/1"
FACTS_SCHEMA = "envtool.gpu-facts/1"
ALLREDUCE_SCHEMA = "envtool.allreduce/1"
EXPORT_SCHEMA = "envtool.export/1"


def probes_dir() -> Path:
    """``$ENVTOOL_PROBES_DIR``, else the ``probes/`` folder beside the envtool package."""
    override = os.environ.get("ENVTOOL_PROBES_DIR")
    candidates = [Path(override)] if override else []
    here = Path(__file__).resolve().parent
    candidates += [here.parent / "probes", here / "_probes"]
    for candidate in candidates:
        if (candidate / "gpu_facts.py").is_file():
            return candidate
    raise EnvtoolError("cannot find the probes/ folder (set ENVTOOL_PROBES_DIR)")


@cache
def load(name: str) -> ModuleType:
    """Import ``probes/<name>.py`` in-process: the very code the nodes run."""
    path = probes_dir() / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"envtool_probe_{name}", path)
    if spec is None or spec.loader is None:
        raise EnvtoolError(f"cannot load probe {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def python_for(prefix: Path | None) -> str:
    """The interpreter of a prefix (``--prefix``), else ``$CONDA_PREFIX``'s, else this one."""
    root = prefix or (Path(os.environ["CONDA_PREFIX"]) if os.environ.get("CONDA_PREFIX") else None)
    if root is None:
        return sys.executable
    for candidate in (root / "bin" / "python", root / "python.exe"):
        if candidate.exists():
            return str(candidate)
    raise InputError(f"{root}: no python in this prefix (bin/python)")


def parse_document(text: str, source: str, schema: str) -> dict[str, Any]:
    """One JSON object from a probe's stdout, checked for its schema; else a clear error."""
    if len(text) > MAX_OUTPUT:
        raise ProblemFound(f"{source}: probe output too large ({len(text)} bytes)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        head = text.strip()[:60].replace("\n", " ")
        raise ProblemFound(f"{source}: probe printed no valid JSON ({exc.msg}): {head!r}") from None
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        raise ProblemFound(f"{source}: not a {schema} document")
    return doc


def run_script(name: str, args: list[str], prefix: Path | None, timeout: float) -> str:
    """Run ``probes/<name>.py`` with the prefix's python; return its stdout."""
    argv = [python_for(prefix), str(probes_dir() / f"{name}.py"), *args]
    return proc.run(argv, timeout=timeout).stdout


def default_prefix(prefix: Path | None) -> Path:
    """``--prefix``, else ``$CONDA_PREFIX``, else this interpreter's prefix."""
    if prefix is not None:
        return prefix
    if os.environ.get("CONDA_PREFIX"):
        return Path(os.environ["CONDA_PREFIX"])
    return Path(sys.prefix)


def probe_local(
    prefix: Path | None, allreduce_args: list[str] | None, timeout: float
) -> dict[str, Any]:
    """GPU facts (and the all-reduce test) of this machine, as one probe document."""
    facts = parse_document(
        run_script("gpu_facts", [], prefix, timeout=120.0), "gpu_facts.py", FACTS_SCHEMA
    )
    doc: dict[str, Any] = {"schema": PROBE_SCHEMA, "facts": facts, "allreduce": None}
    if allreduce_args is not None:
        try:
            out = run_script(
                "allreduce", [*allreduce_args, "--format", "json"], prefix, timeout=timeout + 30.0
            )
        except proc.ProcessError as exc:  # the probe exits 1 with a JSON error document
            out = exc.result.stdout if exc.result else ""
            if not out.strip():
                raise
        doc["allreduce"] = parse_document(out, "allreduce.py", ALLREDUCE_SCHEMA)
    return doc


def probe_ok(doc: dict[str, Any]) -> bool:
    """False when the all-reduce failed or counted wrong elements."""
    ar = doc.get("allreduce")
    return ar is None or (not ar.get("error") and not ar.get("wrong_total"))
