"""Read an environment from whatever a user points at: a lock, an export, a prefix, a probe JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envtool import lockfile, yamlio
from envtool.errors import InputError
from envtool.models import Environment, Package, channel_name
from envtool.yamlio import line_of


def from_lock(lock: lockfile.Lockfile, source: str, platform: str) -> Environment:
    """The entries of one platform of a conda-lock file."""
    entries = lock.for_platform(platform)
    if not entries:
        have = ", ".join(lock.metadata.platforms) or "none"
        raise InputError(f"{source}: no packages for {platform} (has: {have})")
    packages = tuple(
        Package(
            p.name,
            p.version,
            p.build,
            channel_name(p.channel_url) if p.manager == "conda" else "",
            p.manager,
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
    pip = block.get("pip") if isinstance(block, dict) else None
    if not isinstance(pip, list):
        raise InputError(f"{path}:{line_of(block)}: expected '- pip: [name==version, ...]'")
    out = []
    for i, item in enumerate(pip):
        name, sep, version = str(item).partition("==")
        if not sep or not name.strip() or not version.strip():
            raise InputError(f"{path}:{line_of(pip, i)}: expected 'name==version', got {item!r}")
        out.append(Package(name.strip(), version.strip(), manager="pip"))
    return out


def from_export_yaml(doc: Any, path: Path) -> Environment:
    """A ``conda env export`` document (with or without builds, with a ``pip:`` block)."""
    deps = doc.get("dependencies")
    if not isinstance(deps, list):
        raise InputError(f"{path}:{line_of(doc)}: an export needs a 'dependencies' list")
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


def from_export_json(doc: Any, source: str) -> Environment:
    """The JSON document of ``probes/export.py`` (schema envtool.export/1)."""
    items = doc.get("packages") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise InputError(f"{source}: not an envtool export document (no 'packages' list)")
    packages = []
    for i, item in enumerate(items):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("version"), str)
        ):
            raise InputError(f"{source}: package #{i + 1} needs string 'name' and 'version'")
        manager = "pip" if item.get("manager") == "pip" else "conda"
        channel = str(item.get("channel") or "")
        packages.append(
            Package(
                item["name"],
                item["version"],
                str(item.get("build") or ""),
                channel_name(channel) if channel else "",
                manager,
            )
        )
    return Environment(
        source, "probe", tuple(packages), str(doc.get("name") or ""), str(doc.get("prefix") or "")
    )


def _from_json_file(path: Path, text: str) -> Environment:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None
    if isinstance(doc, dict) and isinstance(doc.get("export"), dict):
        doc = doc["export"]  # a probe document that carries an export
    return from_export_json(doc, str(path))


def load(target: str, platform: str = "linux-64") -> Environment:
    """A lockfile, an export YAML, a probe JSON, or a prefix directory (exported live)."""
    path = Path(target)
    if path.is_dir():
        from envtool import probes

        return from_export_json(probes.export_prefix(path), str(path))
    text = yamlio.read_text(path, "environment")
    if text.lstrip().startswith("{"):
        return _from_json_file(path, text)
    doc = yamlio.loads(text, path)
    if isinstance(doc, dict) and "package" in doc and "version" in doc:
        return from_lock(lockfile.parse(text, path), str(path), platform)
    if isinstance(doc, dict) and "dependencies" in doc:
        return from_export_yaml(doc, path)
    raise InputError(
        f"{path}: not a conda-lock file, a conda env export, a probe JSON or a prefix directory"
    )
