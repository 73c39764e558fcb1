"""Read an environment from whatever a user points at: a lock, an export, a prefix, a probe JSON.

A prefix is exported in-process by the node package's own code (envtool_node.export), the
very code a node runs during verify.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from envtool import pip_entries, yamlio
from envtool.errors import InputError, shown, where
from envtool.judge import specs
from envtool.lock import explicit, lockfile, names, pixi
from envtool.models import Environment, Package, Requirement
from envtool.protocol.documents import read_export, read_export_text
from envtool.protocol.fields import Malformed
from envtool.yamlio import line_of
from envtool_node.channels import canonical_name


def from_lock(lock: lockfile.Lockfile, source: str, platform: str) -> Environment:
    """The entries of one platform of a conda-lock file (or of a pixi.lock's environment)."""
    entries = lock.for_platform(platform)
    if not entries:
        have = ", ".join(lock.metadata.platforms) or "none"
        of = f" in {lock.origin}" if lock.origin else ""
        raise InputError(f"{source}: no packages for {platform}{of} (has: {have})")
    packages = tuple(
        Package(
            p.name,
            pip_entries.lock_version(p.url, p.version, p.revision),  # a VCS pin: git:<commit>
            p.build,
            canonical_name(p.channel_url) if p.manager == "conda" else "",
            p.manager,
            p.url,
            p.md5 or "",
            p.sha256 or "",
            tuple(f"{name} {spec}".strip() for name, spec in p.dependencies),
        )
        for p in entries
    )
    return Environment(source, "lock", packages)


def _export_entry(path: Path, deps: Any, index: int) -> Package:
    item = deps[index]
    if not isinstance(item, str) or not item.strip():
        raise InputError(f"{path}:{line_of(deps, index)}: expected 'name=version[=build]'")
    parts = item.strip().split("=")
    if len(parts) not in (2, 3) or not all(parts):
        raise InputError(
            f"{path}:{line_of(deps, index)}: expected 'name=version[=build]', got {item!r}"
        )
    return Package(parts[0], parts[1], parts[2] if len(parts) == 3 else "")


def _pip_entries(path: Path, block: Any) -> list[Package]:
    """The ``- pip:`` block: each line in any form pip freeze writes (pip_entries.py)."""
    pip = block.get("pip") if isinstance(block, dict) else None
    if not isinstance(pip, list):
        raise InputError(f"{path}:{line_of(block)}: expected '- pip: [name==version, ...]'")
    out = []
    for i, item in enumerate(pip):
        try:
            if not isinstance(item, str):
                raise pip_entries.BadEntry("a pip entry must be a string")
            out.append(pip_entries.parse(item))
        except pip_entries.BadEntry as exc:
            got = shown(item) if isinstance(item, str) else repr(item)[:200]
            raise InputError(f"{where(path, line_of(pip, i))}: {exc}, got {got}") from None
    return out


# what conda env export writes for a package: name=version[=build], nothing a spec adds
_PINNED = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*=[A-Za-z0-9_.+!-]+(?:=[A-Za-z0-9_.+]+)?")
_SPEC_FORMS = "a name, name=version, name>=version, channel::name"


def _is_spec_list(deps: list[Any]) -> bool:
    """An entry conda env export never writes (a bare name, a range, a channel): the file is
    a spec list (``--from-history``, hand-edited), read as ``conda env create`` reads it."""
    return any(isinstance(d, str) and d.strip() and not _PINNED.fullmatch(d.strip()) for d in deps)


def _requirement(path: Path, items: Any, index: int, manager: str) -> Requirement:
    item, line = items[index], line_of(items, index)
    if not isinstance(item, str) or not item.strip():
        raise InputError(f"{where(path, line)}: expected a package spec ({_SPEC_FORMS})")
    try:
        name = (specs.parse_pip if manager == "pip" else specs.parse)(item.strip())
    except ValueError as exc:
        raise InputError(
            f"{where(path, line)}: expected 'name=version[=build]' or a spec ({_SPEC_FORMS}): "
            f"{exc}, got {shown(item)}"
        ) from None
    if problem := names.why_bad_name(name):
        raise InputError(f"{where(path, line)}: {problem}")
    return Requirement(item.strip(), name, manager, line)


def _spec_list(doc: Any, path: Path, deps: list[Any]) -> Environment:
    """Each entry a spec; a ``- pip:`` block's lines pip specs (a bare name or a pin)."""
    found: list[Requirement] = []
    for i, item in enumerate(deps):
        if not isinstance(item, dict):
            found.append(_requirement(path, deps, i, "conda"))
            continue
        pip = item.get("pip")
        if not isinstance(pip, list):
            raise InputError(f"{path}:{line_of(item)}: expected '- pip: [name, ...]'")
        found += [_requirement(path, pip, j, "pip") for j in range(len(pip))]
    name, prefix = str(doc.get("name") or ""), str(doc.get("prefix") or "")
    return Environment(str(path), "specs", (), name, prefix, specs=tuple(found))


def from_export_yaml(doc: Any, path: Path) -> Environment:
    """A ``conda env export`` document (with or without builds, with a ``pip:`` block), or a
    spec list (``--from-history``, bare names): its specs, not packages."""
    deps = doc.get("dependencies")
    if not isinstance(deps, list):
        raise InputError(f"{path}:{line_of(doc)}: an export needs a 'dependencies' list")
    if _is_spec_list(deps):
        return _spec_list(doc, path, deps)
    packages: list[Package] = []
    for i, item in enumerate(deps):
        if isinstance(item, dict):
            packages.extend(_pip_entries(path, item))
        else:
            packages.append(_export_entry(path, deps, i))
    return Environment(
        str(path),
        "export",
        tuple(packages),
        str(doc.get("name") or ""),
        str(doc.get("prefix") or ""),
    )


def export_prefix(
    prefix: Path, name: str | None = None, no_builds: bool = False, with_yaml: bool = False
) -> dict[str, Any]:
    """``conda env export`` of a local prefix as the node package's document (in-process)."""
    from envtool_node.export import ExportError
    from envtool_node.export import export_prefix as export

    if not (prefix / "conda-meta").is_dir():
        raise InputError(f"{prefix}: not a conda environment (no conda-meta/)")
    try:
        return export(str(prefix), name=name, no_builds=no_builds, with_yaml=with_yaml)
    except ExportError as exc:
        raise InputError(str(exc)) from None


def from_prefix(prefix: Path) -> Environment:
    """A local prefix's packages, as a node would report them."""
    return from_export_json(export_prefix(prefix), str(prefix))


def from_export_json(doc: Any, source: str) -> Environment:
    """An envtool.export/1 document (from a file, or a prefix exported here)."""
    try:
        return read_export(doc, source)
    except Malformed as exc:
        raise InputError(str(exc)) from None


def _collect_env(text: str) -> bool:
    """``python -m torch.utils.collect_env`` output (its first lines say so)."""
    head = text[:4000]
    return "PyTorch version:" in head and (
        "Collecting environment information" in head or "Is debug build:" in head
    )


def _nvidia_smi(text: str) -> bool:
    """An nvidia-smi capture (its own banner or command lines in the first lines)."""
    head = text[:4000]
    return "NVIDIA-SMI" in head or "$ nvidia-smi" in head or "NVIDIA System Management" in head


# what the logs of a distributed job print (NCCL's own lines, torch.distributed's errors, a
# Python traceback, a CUDA error), and no environment file holds
_JOB_LOG = re.compile(
    r"NCCL (WARN|INFO)|NCCL error|nccl[A-Z][a-z]+Error|DistBackendError|ProcessGroupNCCL|"
    r"Traceback \(most recent call last\)|^\s*[A-Za-z.]*(Runtime|Assertion)Error: |CUDA error: |"
    r"ProcessFailure\(|Watchdog caught|^frame #[0-9]+: |^\[rank[0-9]+\]|UserWarning: ",
    re.MULTILINE,
)


def _job_log(text: str) -> bool:
    """The log of a (failed) training job: NCCL's or torch's lines in its first 64 KiB."""
    return _JOB_LOG.search(text[:65536]) is not None


def load(target: str, platform: str = "linux-64", environment: str = pixi.DEFAULT) -> Environment:
    """A lockfile (of a pixi.lock, its ``environment``; other inputs hold one), an export
    YAML, a spec list, a probe JSON, or a prefix directory (exported live)."""
    path = Path(target)
    if path.is_dir():
        return from_prefix(path)
    text = yamlio.read_text(path, "environment")
    if pixi.format_of(text) is not None:
        return from_lock(lockfile.parse(text, path, environment), str(path), platform)
    return _load_text(path, text, platform)


def _load_text(path: Path, text: str, platform: str) -> Environment:
    if text.lstrip().startswith("{"):
        try:
            return read_export_text(text, str(path))
        except Malformed as exc:
            if '"repodata_version"' in text or '"packages.conda"' in text:
                raise InputError(
                    f"{path}: a conda channel's repodata.json (every package the channel "
                    "offers), not an environment: lock from it (envtool lock) and use the lock"
                ) from None
            raise InputError(str(exc)) from None
    if _collect_env(text):
        raise InputError(
            f"{path}: PyTorch's collect_env report: its [pip3] list also shows conda's own "
            "packages, so it cannot say which manager installed what; use a conda env export, "
            "the prefix, or envtool probe on that host"
        )
    if _nvidia_smi(text):
        raise InputError(
            f"{path}: an nvidia-smi capture (the GPUs' state), not an environment: use a lock, "
            "an export, a prefix or envtool probe's JSON"
        )
    if explicit.is_explicit(text):
        return Environment(str(path), "lock", explicit.parse(text, path, platform))
    if _job_log(text):
        raise InputError(
            f"{path}: a job's log (NCCL or torch.distributed output), not an environment: use "
            "a lock, an export, a prefix or envtool probe's JSON of the node it ran on"
        )
    doc = yamlio.loads(text, path)
    if isinstance(doc, dict) and "package" in doc and "version" in doc:
        return from_lock(lockfile.parse(text, path), str(path), platform)
    if isinstance(doc, dict) and "dependencies" in doc:
        return from_export_yaml(doc, path)
    raise InputError(
        f"{path}: not a conda-lock file, a pixi.lock, a conda env export or spec list, an "
        "@EXPLICIT file, a probe JSON or a prefix directory"
    )
