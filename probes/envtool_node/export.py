"""``conda env export`` of a conda prefix, byte for byte, without conda.

Reproduces conda 24.7's ``conda.env.env.from_environment(...).to_yaml()`` (as vendored by
conda-lock) on a stock configuration: conda records from ``conda-meta/*.json``
(conda_meta.py), pip distributions that no conda record owns from ``site-packages``
(site_packages.py), channels in conda's order (channels.py), and, only when the text is
asked for, the YAML as conda's ruamel.yaml dumper lays it out (yaml_emit.py). One change on
purpose: a distribution pip installed from a VCS is written as pip freeze writes it,
``name @ git+URL@<commit>``, not ``name==version``, so the export says which commit runs.

    python -m envtool_node.export [--prefix P] [--name N] [--no-builds] [--format yaml|json]

Python 3.9, standard library only. Exit codes: 0 ran; 2 the prefix or a file in it could not
be read (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from os.path import abspath, basename, dirname, expanduser, isdir, join, lexists

from . import stamp
from .conda_meta import (
    CONDA_TYPES,
    PIP_TYPES,
    ExportError,
    Record,
    load_conda_records,
    load_env_vars,
    shown,
)
from .schema import EXPORT
from .site_packages import VCS, add_site_packages

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["ExportError", "export_prefix", "render", "to_document"]


def default_name(prefix: str) -> str:
    """conda's env_name for a prefix: 'base', the directory name under envs/, or the path."""
    if (
        isdir(join(prefix, "conda-meta"))
        and isdir(join(prefix, "envs"))
        and (lexists(join(prefix, "condabin")) or lexists(join(prefix, "bin", "conda")))
    ):
        return "base"
    parent = dirname(prefix)
    if basename(parent) == "envs" and lexists(join(dirname(parent), "conda-meta")):
        return basename(prefix)
    return prefix


def export_prefix(
    prefix: str,
    name: str | None = None,
    no_builds: bool = False,
    ignore_channels: bool = False,
    base_channels: Sequence[str] = ("defaults",),
    with_yaml: bool = False,
) -> dict[str, Any]:
    """The export of ``prefix`` as a document (see ``to_document``); raises ExportError."""
    prefix = abspath(expanduser(prefix))
    if not isdir(prefix):
        raise ExportError(f"prefix {prefix} does not exist or is not a directory")
    if not os.access(prefix, os.R_OK | os.X_OK):
        raise ExportError(f"prefix {prefix} is not readable")
    skipped: list[dict[str, str]] = []
    records = load_conda_records(prefix, skipped)
    add_site_packages(prefix, records)
    doc = to_document(
        name if name is not None else default_name(prefix),
        prefix,
        list(records.values()),
        load_env_vars(prefix),
        no_builds,
        ignore_channels,
        base_channels,
        with_yaml,
    )
    if skipped:  # records conda ignores: named, so that none reads as an absent package
        doc["unreadable"] = skipped
    found = stamp.read(prefix)
    if found is not None:  # which lock made it (envtool install, fix): said, never trusted
        doc["stamp"] = found["lock_sha256"]
    return doc


def _record_json(rec: Record) -> dict[str, Any]:
    doc = {
        "name": rec.name,
        "version": rec.version,
        "build": rec.build,
        "channel": rec.channel,
        "subdir": rec.subdir,
        "manager": rec.manager,
    }
    doc.update((k, getattr(rec, k)) for k in ("url", "md5", "sha256") if getattr(rec, k))
    return doc


def pip_line(rec: Record) -> str:
    """conda's ``name==version``; for a VCS install pip freeze's ``name @ git+URL@<commit>``
    (conda would write the metadata's version, which does not say which commit runs)."""
    if rec.url and rec.url.partition("+")[0] in VCS and rec.version.partition(":")[0] in VCS:
        return f"{rec.name} @ {rec.url}"
    return f"{rec.name}=={rec.version}"


def to_document(
    name: str | None,
    prefix: str,
    records: list[Record],
    variables: dict[str, Any],
    no_builds: bool = False,
    ignore_channels: bool = False,
    base_channels: Sequence[str] = ("defaults",),
    with_yaml: bool = False,
) -> dict[str, Any]:
    """conda's from_environment over loaded records: the JSON document; with ``with_yaml``
    also its ``yaml`` text (the emitter is imported only then)."""
    conda = sorted((r for r in records if r.package_type in CONDA_TYPES), key=lambda r: r.name)
    pip = sorted((r for r in records if r.package_type in PIP_TYPES), key=lambda r: r.name)
    fields = (
        (lambda r: (r.name, r.version)) if no_builds else (lambda r: (r.name, r.version, r.build))
    )
    deps: list[Any] = ["=".join(fields(r)) for r in conda]
    if pip:
        deps.append({"pip": [pip_line(r) for r in pip]})
    channels = list(dict.fromkeys(base_channels))
    if not ignore_channels:
        for rec in conda:
            if rec.channel not in channels:
                channels.insert(0, rec.channel)
    env: dict[str, Any] = {"name": name}
    if channels:
        env["channels"] = channels
    if deps:
        env["dependencies"] = deps
    if variables:
        env["variables"] = variables
    if prefix:
        env["prefix"] = prefix
    doc: dict[str, Any] = {
        "schema": EXPORT,
        "name": name,
        "prefix": prefix,
        "channels": channels,
        "variables": variables,
        "packages": [_record_json(r) for r in conda + pip],
    }
    if with_yaml:
        doc["yaml"] = render(env)
    return doc


def render(env: dict[str, Any]) -> str:
    """conda's YAML text of an ``env`` mapping (name, channels, dependencies, ...)."""
    from .yaml_emit import render_yaml

    return render_yaml(env)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m envtool_node.export",
        description="conda env export of a prefix, without conda.",
    )
    parser.add_argument("--prefix", help="the prefix (default: $CONDA_PREFIX, else sys.prefix)")
    parser.add_argument("--name", help="the name: field (default: as conda names the prefix)")
    parser.add_argument("--no-builds", action="store_true", help="name=version, no build")
    parser.add_argument(
        "--ignore-channels",
        action="store_true",
        help="do not add the packages' channels to channels:",
    )
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Print the export of a prefix; 0 when it ran, 2 when the prefix could not be read."""
    args = _parser().parse_args(argv)
    prefix = args.prefix or os.environ.get("CONDA_PREFIX") or sys.prefix
    try:
        doc = export_prefix(prefix, args.name, args.no_builds, args.ignore_channels, with_yaml=True)
    except ExportError as exc:
        print(f"export.py: error: {shown(str(exc))}", file=sys.stderr)
        return 2
    if args.format == "json":
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(doc["yaml"])
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
