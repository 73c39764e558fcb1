"""Locating ``probes/``, running its scripts locally, and validating what they print."""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import os
import sys
import tarfile
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from envtool import envread, proc
from envtool.errors import EnvtoolError, InputError, ProblemFound
from envtool.models import AllReduceSummary, Device, HostReport, NodeFacts

if TYPE_CHECKING:
    from envtool.nccl import NcclRun

MAX_OUTPUT = 64 * 1024 * 1024  # a probe document larger than this is not believed
PROBE_SCHEMA = "envtool.probe/1"
FACTS_SCHEMA = "envtool.gpu-facts/1"
ALLREDUCE_SCHEMA = "envtool.allreduce/1"
EXPORT_SCHEMA = "envtool.export/1"
NODE_SCHEMA = "envtool.node/1"


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
    except RecursionError:
        raise ProblemFound(f"{source}: probe printed JSON nested too deeply") from None
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        raise ProblemFound(f"{source}: not a {schema} document")
    return doc


def run_script(name: str, args: list[str], prefix: Path | None, timeout: float) -> str:
    """Run ``probes/<name>.py`` with the prefix's python; return its stdout."""
    argv = [python_for(prefix), str(probes_dir() / f"{name}.py"), *args]
    return proc.run(argv, timeout=timeout).stdout


def export_prefix(prefix: Path, name: str | None = None, no_builds: bool = False) -> dict[str, Any]:
    """``conda env export`` of a local prefix, by probes/export.py run in-process."""
    if not (prefix / "conda-meta").is_dir():
        raise InputError(f"{prefix}: not a conda environment (no conda-meta/)")
    module = load("export")
    try:
        doc: dict[str, Any] = module.export_prefix(str(prefix), name=name, no_builds=no_builds)
    except module.ExportError as exc:
        raise InputError(str(exc)) from None
    return doc


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


def allreduce_run(doc: dict[str, Any]) -> NcclRun:
    """The probe's all-reduce as an nccl-tests run (its text layout, parsed back)."""
    from envtool import nccl

    ar = doc.get("allreduce")
    if not isinstance(ar, dict) or not ar.get("rows"):
        why = ar.get("error") if isinstance(ar, dict) else None
        raise ProblemFound(f"no all-reduce rows to plot{f': {why}' if why else ''}")
    return nccl.parse(load("allreduce").render_text(ar), "envtool probe")


def probe_ok(doc: dict[str, Any]) -> bool:
    """False when the all-reduce failed or counted wrong elements."""
    ar = doc.get("allreduce")
    return ar is None or (not ar.get("error") and not ar.get("wrong_total"))


@cache
def bundle() -> bytes:
    """``probes/*.py`` as a gzipped tar, byte-for-byte reproducible (sent on ssh's stdin)."""
    buf = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w") as tar,
    ):
        for path in sorted(probes_dir().glob("*.py")):
            data = path.read_bytes()
            info = tarfile.TarInfo(path.name)
            info.size, info.mode, info.mtime = len(data), 0o600, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_bundle(target: Path) -> None:
    """Copy probes/*.py into ``target`` (a shared filesystem the nodes read, --bundle-dir)."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(probes_dir().glob("*.py")):
        tmp = target / f".{path.name}.tmp"
        tmp.write_bytes(path.read_bytes())
        tmp.replace(target / path.name)


def _opt_str(doc: dict[str, Any], key: str) -> str | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ValueError(f"'{key}' is {type(value).__name__}, expected a string")
    return str(value)[:200]


def _device(item: Any) -> Device:
    if not isinstance(item, dict) or not isinstance(item.get("index"), int):
        raise ValueError("a device entry is malformed")
    memory = item.get("total_memory")
    return Device(
        item["index"],
        _opt_str(item, "name") or "",
        _opt_str(item, "capability") or "",
        memory if isinstance(memory, int) else 0,
        _opt_str(item, "uuid") or "",
    )


def parse_facts(doc: Any) -> NodeFacts:
    """Validate gpu_facts.py's document into NodeFacts; ValueError on anything malformed."""
    if not isinstance(doc, dict) or doc.get("schema") != FACTS_SCHEMA:
        raise ValueError(
            doc.get("error", "not a gpu-facts document")
            if isinstance(doc, dict)
            else "not a gpu-facts document"
        )
    devices, env, notes = doc.get("devices") or [], doc.get("env") or {}, doc.get("notes") or []
    count = doc.get("device_count", 0)
    if not (
        isinstance(devices, list)
        and isinstance(env, dict)
        and isinstance(notes, list)
        and isinstance(count, int)
        and not isinstance(count, bool)
    ):
        raise ValueError("devices, env, notes or device_count have the wrong type")
    return NodeFacts(
        hostname=_opt_str(doc, "hostname") or "",
        python=_opt_str(doc, "python") or "",
        torch=_opt_str(doc, "torch"),
        cuda=_opt_str(doc, "cuda"),
        cuda_available=doc.get("cuda_available") is True,
        device_count=count,
        devices=tuple(_device(d) for d in devices[:64]),
        driver=_opt_str(doc, "driver"),
        cudnn=_opt_str(doc, "cudnn"),
        nccl=_opt_str(doc, "nccl"),
        glibc=_opt_str(doc, "glibc"),
        env=tuple(sorted((str(k)[:100], str(v)[:500]) for k, v in list(env.items())[:200])),
        notes=tuple(str(n)[:300] for n in notes[:20]),
    )


def parse_allreduce(doc: Any) -> AllReduceSummary:
    """The all-reduce document reduced to what the checks use."""
    if not isinstance(doc, dict):
        raise ValueError("not an all-reduce document")
    if doc.get("error") or doc.get("schema") != ALLREDUCE_SCHEMA:
        return AllReduceSummary(
            str(doc.get("backend", "?")),
            0,
            None,
            0,
            str(doc.get("error") or "not an all-reduce document")[:300],
        )
    if doc.get("member") is True:
        return AllReduceSummary(str(doc.get("backend", "?")), 0, None, 0, member=True)
    rows = doc.get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValueError("all-reduce rows are malformed")
    sizes = [r["size"] for r in rows if isinstance(r.get("size"), int)]
    floor = min(256 * 2**20, max(sizes)) if sizes else 0
    busbws = [
        float(r[k]["busbw"])
        for r in rows
        if r.get("size", 0) >= floor
        for k in ("oop", "ip")
        if isinstance(r.get(k), dict)
    ]
    wrong = doc.get("wrong_total", 0)
    return AllReduceSummary(
        str(doc.get("backend", "?")),
        int(doc.get("nranks", 0)),
        max(busbws) if busbws else None,
        wrong if isinstance(wrong, int) else 1,
    )


def _part(report: dict[str, Any], problems: list[str], key: str, parse: Any) -> Any:
    value = report.get(key)
    if value is None:
        return None
    if isinstance(value, dict) and set(value) == {"error"}:
        problems.append(f"{key}: {str(value['error'])[:300]}")
        return None
    try:
        return parse(value)
    except (ValueError, TypeError, KeyError, InputError) as exc:
        problems.append(f"{key}: malformed ({str(exc)[:200]})")
        return None


def host_report(host: str, ok: bool, stdout: str, error: str, seconds: float) -> HostReport:
    """A node's answer (untrusted) validated into a HostReport; garbage becomes a problem."""
    if not ok:
        return HostReport(host, False, error=error, seconds=seconds)
    try:
        doc = parse_document(stdout, host, NODE_SCHEMA)
    except ProblemFound as exc:  # it answered, but with garbage: a finding, not a crash
        why = str(exc).removeprefix(f"{host}: ")
        return HostReport(host, True, seconds=seconds, problems=(f"answer: {why}",))
    problems: list[str] = []
    env = _part(doc, problems, "export", lambda d: envread.from_export_json(d, host))
    facts = _part(doc, problems, "facts", parse_facts)
    allreduce = _part(doc, problems, "allreduce", parse_allreduce)
    if env is None and facts is None and not problems:
        problems.append("answer: neither an export nor GPU facts")
    return HostReport(host, True, "", env, facts, allreduce, seconds, tuple(problems))
