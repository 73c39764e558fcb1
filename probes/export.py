#!/usr/bin/env python3
"""``conda env export`` of a conda prefix, byte for byte, without conda.

Reproduces conda 24.7's ``conda.env.env.from_environment(...).to_yaml()`` (as vendored by
conda-lock) on a stock configuration: conda records from ``conda-meta/*.json``, pip
distributions that no conda record owns from ``site-packages``, channels in conda's order,
and the YAML text as conda's ruamel.yaml dumper lays it out.

Standalone: Python 3.9, standard library only.  Usable as a script (``main``) and as a
module (``export_prefix``, ``render_yaml``, ``to_document``).

Exit codes: 0 ran; 2 the prefix or a file in it could not be read (one line on stderr).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import sys
from os.path import abspath, basename, dirname, expanduser, isdir, isfile, join, lexists

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~2 ms at start-up on a node; annotations are strings anyway
    from collections.abc import Iterable, Sequence
    from typing import Any, Optional

    Chan = tuple[Optional[str], Optional[str], str]  # (scheme, location, name) of a channel

# csv, email.parser and urllib.parse are imported where used: the common case (one
# channel, few pip packages) then starts ~15 ms faster on a node.

SCHEMA = "envtool.export/1"
ON_WIN = sys.platform == "win32"
UNSET = "***unset***"  # conda's CONDA_ENV_VARS_UNSET_VAR
CONDA_TYPES = (None, "noarch_generic", "noarch_python")
PIP_TYPES = (
    "virtual_python_wheel",
    "virtual_python_egg_manageable",
    "virtual_python_egg_unmanageable",
)


class ExportError(Exception):
    """The prefix cannot be exported; the message names the file."""


class Record:
    """One installed package, conda or pip (the fields the export needs)."""

    __slots__ = (
        "build",
        "channel",
        "depends",
        "files",
        "md5",
        "name",
        "package_type",
        "sha256",
        "source",
        "subdir",
        "url",
        "version",
    )  # fmt: skip

    name: str
    version: str
    build: str
    package_type: str | None
    channel: str
    subdir: str | None
    url: str | None
    md5: str | None
    sha256: str | None
    depends: list[str]
    files: list[str]
    source: str

    def __init__(self, **fields: Any) -> None:
        for slot in self.__slots__:
            setattr(self, slot, fields.get(slot))

    @property
    def manager(self) -> str:
        return "pip" if self.package_type in PIP_TYPES else "conda"


# --------------------------------------------------------------------------- channels
# A port of conda/models/channel.py and conda/common/url.py for conda's default
# configuration (channel_alias https://conda.anaconda.org, defaults = repo.anaconda.com
# pkgs/main + pkgs/r, no custom or migrated channels).

ALIAS_LOCATION = "conda.anaconda.org"
DEFAULTS = ("pkgs/main", "pkgs/r", "pkgs/msys2") if ON_WIN else ("pkgs/main", "pkgs/r")
CUSTOM_CHANNELS = (*DEFAULTS, "pkgs/pro")  # all at repo.anaconda.com
KNOWN_SUBDIRS = (
    "noarch",
    "emscripten-wasm32",
    "wasi-wasm32",
    "freebsd-64",
    "linux-32",
    "linux-64",
    "linux-aarch64",
    "linux-armv6l",
    "linux-armv7l",
    "linux-ppc64",
    "linux-ppc64le",
    "linux-riscv64",
    "linux-s390x",
    "osx-64",
    "osx-arm64",
    "win-32",
    "win-64",
    "win-arm64",
    "zos-z",
)
_PLATFORM_RE = re.compile(r"/({})(?:/|$)".format("|".join(KNOWN_SUBDIRS)), re.IGNORECASE)
_TOKEN_RE = re.compile(r"/t/([a-zA-Z0-9-]*)")
_SCHEME_RE = re.compile(r"[a-z][a-z0-9]{0,11}://")
_PATH_RE = re.compile(r"\./|\.\.|~|/|[a-zA-Z]:[/\\]|\\\\|//")
_PKG_EXTENSIONS = (".conda", ".tar.bz2", ".json", ".jlap", ".json.zst")


def _join_url(*args: str | None) -> str:
    start = "/" if not args[0] or args[0].startswith("/") else ""
    return start + "/".join(y for y in (x.strip("/") for x in args if x) if y)


def _starts_with_tokens(test: list[str], start: list[str]) -> bool:
    return all(t == s for t, s in zip(test, start))


def _url_str(host: str | None, port: int | None, path: str | None) -> str:
    if path and not path.startswith("/"):
        path = "/" + path
    return (host.lower() if host else "") + (f":{port}" if port else "") + (path or "")


def _split_platform(url: str) -> tuple[str, str | None]:
    match = _PLATFORM_RE.search(url)
    platform = match.group(1) if match else None
    cleaned = url.replace("/" + platform, "", 1) if platform is not None else url
    return cleaned.rstrip("/"), platform


def _split_token(url: str) -> str:
    match = _TOKEN_RE.search(url)
    token = match.group(1) if match else None
    return (url.replace("/t/" + token, "", 1) if token is not None else url).rstrip("/")


def _parse(url: str) -> Any:
    from urllib.parse import urlparse as _urlparse

    return _urlparse(url if _SCHEME_RE.match(url) else "//" + url)


def _channel_configuration(
    scheme: str | None, host: str | None, port: int | None, path: str
) -> tuple[str | None, str | None, str | None]:
    """conda's _read_channel_configuration: (location, name, scheme)."""
    path = path and path.rstrip("/")
    test_url = _url_str(host, port, path)
    if not path:
        return _url_str(host, port, None).rstrip("/"), None, scheme or None
    for name in sorted(CUSTOM_CHANNELS, reverse=True, key=len):
        that = _join_url("repo.anaconda.com", name)
        if _starts_with_tokens(test_url.split("/"), that.split("/")):
            sub = test_url.replace(that, "", 1).strip("/")
            return "repo.anaconda.com", _join_url(name, sub), scheme
    if _starts_with_tokens(test_url.split("/"), [ALIAS_LOCATION]):
        name = test_url.replace(ALIAS_LOCATION, "", 1).strip("/") or None
        return ALIAS_LOCATION, name, scheme
    if host is None:
        location, name = test_url.rsplit("/", 1)
        return location or "/", name, "file"
    parts = path.strip("/").split("/")
    bump = None
    if parts and parts[0] == "conda":
        bump, path = "conda", "/".join(parts[1:])
    return _url_str(host, port, bump).rstrip("/"), path.strip("/") or None, scheme or None


def _channel_from_url(url: str) -> Chan:
    cleaned, _ = _split_platform(_split_token(url))
    if cleaned.endswith(_PKG_EXTENSIONS) and "/" in cleaned:
        cleaned = cleaned.rsplit("/", 1)[0]
    parts = _parse(cleaned)
    location, name, scheme = _channel_configuration(
        parts.scheme, parts.hostname, parts.port, parts.path
    )
    return scheme or "https", location, name or ""


def _path_to_url(path: str) -> str:
    if path.startswith("file://"):
        return path
    path = abspath(expanduser(path)).replace("\\", "/")
    if any(ord(c) >= 128 for c in path):
        keep = "!'()*-._/\\:"
        raw = bytes(path, "utf-8").decode("unicode-escape")
        path = "".join(
            c if (c < "{" and c.isalnum()) or c in keep else f"%{ord(c):02X}" for c in raw
        )
    return "file:///" + path if len(path) > 1 and path[1] == ":" else "file://" + path


def _channel_for_name(value: str) -> Chan:
    stripped, _ = _split_platform(value)
    name = stripped
    while True:
        if name in CUSTOM_CHANNELS:
            return "https", "repo.anaconda.com", stripped
        shorter = name.rsplit("/", 1)[0]
        if shorter == name:
            return "https", ALIAS_LOCATION, stripped
        name = shorter


def parse_channel(value: str | None) -> Chan:
    """conda's Channel(value) reduced to (scheme, location, name)."""
    if value in (None, "<unknown>", "None:///<unknown>", "None") or not isinstance(value, str):
        return None, None, "<unknown>"
    if _SCHEME_RE.match(value):
        if value.startswith("file:"):
            value = re.sub(r"(\\(?! ))", r"/", value).replace(":////", "://")
        return _channel_from_url(value)
    if "://" not in value and _PATH_RE.match(value):
        return _channel_from_url(_path_to_url(value))
    if value[-6:] == ".conda" or value[-8:] == ".tar.bz2":
        return _channel_from_url(value)
    stripped, _ = _split_platform(value)
    if stripped in ("defaults", "local"):
        return None, None, "\0multi:" + stripped
    return _channel_for_name(value)


@functools.cache
def canonical_name(value: str | None) -> str:
    """conda's ``Channel(value).canonical_name`` on a stock configuration."""
    scheme, location, name = parse_channel(value)
    if name.startswith("\0multi:"):
        return name[len("\0multi:") :]
    if name in DEFAULTS:
        return "defaults"
    for that in CUSTOM_CHANNELS:
        if name and _starts_with_tokens(name.split("/"), that.split("/")):
            return name
    if location == ALIAS_LOCATION:
        return name
    if scheme:
        return f"{scheme}://{_join_url(location, name)}"
    return _join_url(location, name).lstrip("/")


# --------------------------------------------------------------------------- conda-meta


def _read_json(path: str, what: str = "conda record") -> Any:
    try:
        with open(path, "rb") as fh:
            return json.loads(fh.read().decode("utf-8"))
    except OSError as exc:
        raise ExportError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ExportError(f"corrupted {what} {path}: {exc}") from None


def _text_field(value: Any) -> Any:
    """conda's StringField: numbers in a record become strings."""
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _package_type(data: dict[str, Any]) -> str | None:
    explicit = data.get("package_type")
    if explicit:
        return str(explicit)
    noarch = data.get("noarch")
    if isinstance(noarch, str) and noarch.lower() in ("python", "generic"):
        return "noarch_" + noarch.lower()
    if noarch is True or (
        isinstance(noarch, str) and noarch.lower() in ("true", "yes", "on", "y", "1")
    ):
        return "noarch_generic"
    return None


def conda_record(path: str, data: Any) -> Record | None:
    """A Record from one ``conda-meta`` JSON document; None if conda would ignore it."""
    if not isinstance(data, dict):
        raise ExportError(f"corrupted conda record {path}: not a JSON object")
    for key in ("name", "version", "build", "build_number"):
        if key not in data and not (key == "build" and "build_string" in data):
            raise ExportError(f"corrupted conda record {path}: no {key!r}")
    name, version = _text_field(data["name"]), _text_field(data["version"])
    build = _text_field(data.get("build", data.get("build_string")))
    if basename(path)[:-5].rsplit("-", 2) != [name, version, build]:
        warn(f"ignoring malformed prefix record at: {path}")
        return None
    channel = data.get("channel", data.get("schannel"))
    return Record(
        name=name,
        version=version,
        build=build,
        package_type=_package_type(data),
        channel=canonical_name(channel if channel is not None else data.get("url")),
        subdir=data.get("subdir"),
        url=data.get("url"),
        md5=data.get("md5"),
        sha256=data.get("sha256"),
        depends=list(data.get("depends") or ()),
        files=list(data.get("files") or ()),
        source=path,
    )


def load_conda_records(prefix: str) -> dict[str, Record]:
    """Every conda record of the prefix, keyed by name (a later file wins, as in conda)."""
    records: dict[str, Record] = {}
    meta = join(prefix, "conda-meta")
    if not lexists(meta):
        return records
    try:
        paths = [entry.path for entry in os.scandir(meta) if entry.path[-5:] == ".json"]
    except OSError as exc:
        raise ExportError(f"cannot read {meta}: {exc.strerror or exc}") from None
    for path in paths:
        record = conda_record(path, _read_json(path))
        if record is not None:
            records[record.name] = record
    return records


def load_env_vars(prefix: str) -> dict[str, Any]:
    """``conda env config vars`` of the prefix (conda-meta/state), unset ones dropped."""
    path = join(prefix, "conda-meta", "state")
    if not lexists(path):
        return {}
    state = _read_json(path, "state file")
    env_vars = state.get("env_vars", {}) if isinstance(state, dict) else {}
    if not isinstance(env_vars, dict):
        raise ExportError(f"corrupted {path}: env_vars is not an object")
    return {k: v for k, v in env_vars.items() if v != UNSET}


# --------------------------------------------------------------------------- site-packages

_VERSION_RE = re.compile(r"[0-9]+\.[0-9]+")
_SPEC_NAME_RE = re.compile(r"^\s*([^\s=<>!~\[\]()]+)")


def python_short_version(version: str) -> str | None:
    """conda's get_major_minor_version."""
    match = _VERSION_RE.match(version)
    if match:
        return ".".join(match.group(0).split(".")[:2])
    digits = "".join(c for c in version if c.isdigit())
    return f"{digits[0]}.{digits[1:]}" if len(digits) >= 2 else None


def site_packages_dir(python_version: str) -> str | None:
    if ON_WIN:
        return "Lib/site-packages"
    short = python_short_version(python_version)
    return f"lib/python{short}/site-packages" if short else None


def _spec_name(spec: str) -> str:
    spec = spec.split("::", 1)[-1]
    match = _SPEC_NAME_RE.match(spec)
    return match.group(1) if match else spec


def python_dependents(records: dict[str, Record], python: Record) -> list[Record]:
    """Records that depend on python, directly or not (conda's all_descendants)."""
    children: dict[str, list[Record]] = {}
    for rec in records.values():
        for dep in {_spec_name(d) for d in rec.depends}:
            children.setdefault(dep, []).append(rec)
    seen: dict[str, Record] = {}
    queue = [python.name]
    while queue:
        for child in children.get(queue.pop(), ()):
            if child.name not in seen:
                seen[child.name] = child
                queue.append(child.name)
    return list(seen.values())


def conda_anchor_files(sp_dir: str, records: Iterable[Record]) -> dict[str, Record]:
    """The metadata file (anchor) of each conda record that ships a python distribution."""
    endings = (".egg-info/PKG-INFO", ".dist-info/RECORD", ".egg-info")
    matcher = re.compile(
        r"^{}/[^/]+(?:{})$".format(re.escape(sp_dir), "|".join(re.escape(e) for e in endings))
    ).match
    anchors: dict[str, Record] = {}
    for rec in records:
        found = [f for f in rec.files if isinstance(f, str) and matcher(f)]
        if found:
            anchors[sorted(found, key=len)[0]] = rec
    return anchors


def site_anchor_files(sp_path: str, sp_dir: str) -> list[str]:
    """Anchor files of every distribution present in site-packages (conda's rule)."""
    anchors = []
    for entry in os.scandir(sp_path):
        fname = entry.name
        if fname.endswith(".dist-info"):
            anchors.append(f"{sp_dir}/{fname}/RECORD")
        elif fname.endswith(".egg-info"):
            full = join(sp_path, fname)
            anchors.append(f"{sp_dir}/{fname}" if isfile(full) else f"{sp_dir}/{fname}/PKG-INFO")
        elif fname.endswith(".egg") and isdir(join(sp_path, fname)):
            anchors.append(f"{sp_dir}/{fname}/EGG-INFO/PKG-INFO")
        elif fname.endswith(".egg-link"):
            anchors.append(f"{sp_dir}/{fname}")
    return sorted(anchors)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except UnicodeDecodeError as exc:
        raise ExportError(f"{path} is not UTF-8 ({exc.reason} at byte {exc.start})") from None


_HEADER_RE = re.compile(r"[\041-\071\073-\176]*:")


def _simple_headers(text: str) -> list[tuple[str, str]] | None:
    """The header block as email.parser (compat32) reads it, or None if it is not simple."""
    headers = []
    for line in text.split("\n"):
        if not line:
            break
        if line[0] in " \t" or line.startswith("From "):
            return None  # folded or unix-from lines: let email.parser decide
        match = _HEADER_RE.match(line)
        if match is None:
            break
        if match.end() > 1:
            headers.append((line[: match.end() - 1], line[match.end() :].lstrip(" \t")))
    return headers


def read_metadata(path: str | None) -> tuple[str | None, str | None]:
    """(Name, Version) from a METADATA / PKG-INFO file (the last header of each wins)."""
    name = version = None
    if path is None or not isfile(path):
        return None, None
    text = _read_text(path)
    headers = _simple_headers(text)
    if headers is None:
        from email.parser import HeaderParser

        headers = list(HeaderParser().parsestr(text, headersonly=True).items())
    for key, value in headers:
        if key == "Name":
            name = value
        elif key == "Version":
            version = value
    return name, version


def _metadata_file(anchor_full: str) -> str | None:
    if isdir(anchor_full):
        for fname in ("METADATA", "PKG-INFO"):
            if isfile(join(anchor_full, fname)):
                return join(anchor_full, fname)
        return None
    return anchor_full if isfile(anchor_full) else None


def _check_manifest(path: str) -> None:
    """Read a RECORD / installed-files.txt the way conda does; conda fails on the same faults."""
    import csv
    import io

    try:
        text = _read_text(path)
    except OSError as exc:
        raise _Skip(f"{path}: {exc.strerror or exc}") from None
    for number, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
        if not row:
            raise ExportError(f"{path}: line {number} is empty (conda fails here too)")
        if len(row) == 3 and row[1] and not row[1].startswith("sha256="):
            raise ExportError(f"{path}: hash {row[1]!r} is not sha256= (conda fails here too)")
        if len(row) == 3 and row[2]:
            try:
                int(row[2])
            except ValueError:
                raise ExportError(
                    f"{path}: size {row[2]!r} is not an integer (conda fails here too)"
                ) from None


class _Skip(Exception):
    """conda skips this distribution (an OSError or a validation error in conda)."""


def _dist_location(prefix: str, anchor: str) -> tuple[str, str, str]:
    """(anchor_full_path, metadata_dir, kind) for an anchor, as conda's PythonDistribution."""
    if ".dist-info" in anchor and not anchor.endswith(".egg-link"):
        full, kind = join(prefix, dirname(anchor)), "wheel"
    elif anchor.endswith(".egg-info"):
        full, kind = join(prefix, anchor), "egg"
    else:
        full, kind = join(prefix, dirname(anchor)), "egg"
    if isfile(full):
        return full, dirname(full), kind
    if isdir(full):
        return full, full, kind
    raise _Skip(f"path not found: {full}")


def _egg_link_target(prefix: str, anchor: str) -> str:
    link = join(prefix, anchor)
    with open(link, encoding="utf-8", errors="surrogateescape") as fh:
        lines = fh.readlines()
    target = lines[0].strip() if lines else ""
    eggs = (
        [e.name for e in os.scandir(target) if e.name[-9:] == ".egg-info"]
        if target and lexists(target)
        else []
    )
    if len(eggs) != 1:
        raise _Skip(f"{link}: expected exactly one .egg-info in {target!r}, found {len(eggs)}")
    full = join(target, eggs[0])
    return join(full, "PKG-INFO") if isdir(full) else full


def pip_record(prefix: str, anchor: str, python_version: str) -> Record:
    """conda's read_python_record: a pip Record for one anchor, or _Skip."""
    if anchor.endswith(".egg-link"):
        full = _egg_link_target(prefix, anchor)
        mdir, kind = (dirname(full) if isfile(full) else full), "egg-link"
        if not (isfile(full) or isdir(full)):
            raise _Skip(f"path not found: {full}")
    else:
        full, mdir, kind = _dist_location(prefix, anchor)
    if kind == "wheel":
        if not isfile(join(mdir, "METADATA")):
            raise _Skip(f"{join(mdir, 'METADATA')}: no such file")
        _check_manifest(join(mdir, "RECORD"))
        package_type = "virtual_python_wheel"
    elif kind == "egg" and isfile(join(mdir, "installed-files.txt")):
        _check_manifest(join(mdir, "installed-files.txt"))
        package_type = "virtual_python_egg_manageable"
    else:
        package_type = "virtual_python_egg_" + ("link" if kind == "egg-link" else "unmanageable")
    name, version = read_metadata(_metadata_file(full))
    if version is None:
        raise _Skip(f"{anchor}: no Version in its metadata")
    norm = name.replace(".", "-").replace("_", "-").lower() if name else ""
    return Record(
        name={"graphviz": "python-graphviz"}.get(norm, norm),
        version=version,
        build="dev_0" if kind == "egg-link" else "pypi_0",
        package_type=package_type,
        channel="<develop>" if kind == "egg-link" else "pypi",
        subdir="pypi",
        source=anchor,
    )


def add_site_packages(prefix: str, records: dict[str, Record]) -> None:
    """conda's PrefixData._load_site_packages: add pip records, drop clobbered conda ones."""
    python = records.get("python")
    sp_dir = site_packages_dir(python.version) if python else None
    if python is None or sp_dir is None or not isdir(join(prefix, sp_dir)):
        return
    conda_anchors = conda_anchor_files(sp_dir, python_dependents(records, python))
    try:
        present = site_anchor_files(join(prefix, sp_dir), sp_dir)
    except OSError as exc:
        raise ExportError(f"cannot read {join(prefix, sp_dir)}: {exc.strerror or exc}") from None
    for anchor in sorted(set(conda_anchors) - set(present)):
        records.pop(conda_anchors[anchor].name, None)
    for anchor in present:
        if anchor in conda_anchors:
            continue
        try:
            rec = pip_record(prefix, anchor, python.version)
        except (_Skip, OSError) as exc:
            warn(f"python record ignored for anchor path {anchor!r}: {exc}")
            continue
        records[rec.name] = rec


# --------------------------------------------------------------------------- the export


def warn(message: str) -> None:
    print(f"export.py: warning: {message}", file=sys.stderr)


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
) -> dict[str, Any]:
    """The export of ``prefix`` as a document (see ``to_document``); raises ExportError."""
    prefix = abspath(expanduser(prefix))
    if not isdir(prefix):
        raise ExportError(f"prefix {prefix} does not exist or is not a directory")
    if not os.access(prefix, os.R_OK | os.X_OK):
        raise ExportError(f"prefix {prefix} is not readable")
    records = load_conda_records(prefix)
    add_site_packages(prefix, records)
    return to_document(
        name if name is not None else default_name(prefix),
        prefix,
        list(records.values()),
        load_env_vars(prefix),
        no_builds,
        ignore_channels,
        base_channels,
    )


def _record_json(rec: Record) -> dict[str, Any]:
    doc = {
        "name": rec.name,
        "version": rec.version,
        "build": rec.build,
        "channel": rec.channel,
        "subdir": rec.subdir,
        "manager": rec.manager,
    }
    if rec.manager == "conda":
        doc.update((k, getattr(rec, k)) for k in ("url", "md5", "sha256") if getattr(rec, k))
    return doc


def to_document(
    name: str | None,
    prefix: str,
    records: list[Record],
    variables: dict[str, Any],
    no_builds: bool = False,
    ignore_channels: bool = False,
    base_channels: Sequence[str] = ("defaults",),
) -> dict[str, Any]:
    """conda's from_environment over loaded records: the JSON document, ``yaml`` included."""
    conda = sorted((r for r in records if r.package_type in CONDA_TYPES), key=lambda r: r.name)
    pip = sorted((r for r in records if r.package_type in PIP_TYPES), key=lambda r: r.name)
    fields = (
        (lambda r: (r.name, r.version)) if no_builds else (lambda r: (r.name, r.version, r.build))
    )
    deps: list[Any] = ["=".join(fields(r)) for r in conda]
    if pip:
        deps.append({"pip": [f"{r.name}=={r.version}" for r in pip]})
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
    return {
        "schema": SCHEMA,
        "name": name,
        "prefix": prefix,
        "channels": channels,
        "variables": variables,
        "packages": [_record_json(r) for r in conda + pip],
        "yaml": render_yaml(env),
    }


# --------------------------------------------------------------------------- YAML
# A port of the parts of ruamel.yaml's emitter (0.18/0.19) that conda's
# yaml_safe_dump uses: block mappings and sequences, indent(mapping=2, sequence=4,
# offset=2), width 80, allow_unicode, YAML 1.2 implicit resolvers.

_IMPLICIT = (
    ("tTfF", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")),
    (
        "-+0123456789.",
        re.compile(
            r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)"
            r"|[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
    ),
    (
        "-+0123456789",
        re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?[0-9_]+|[-+]?0x[0-9a-fA-F_]+)$"),
    ),
    ("<", re.compile(r"^(?:<<)$")),
    ("~nN", re.compile(r"^(?:~|null|Null|NULL|)$")),
    (
        "0123456789",
        re.compile(
            r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"
            r"|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?"
            r"(?:[Tt]|[ \t]+)[0-9][0-9]?"
            r":[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?"
            r"(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$"
        ),
    ),
    ("=", re.compile(r"^(?:=)$")),
    ("!&*", re.compile(r"^(?:!|&|\*)$")),
)
_ESCAPES = {
    "\0": "0",
    "\x07": "a",
    "\x08": "b",
    "\x09": "t",
    "\x0a": "n",
    "\x0b": "v",
    "\x0c": "f",
    "\x0d": "r",
    "\x1b": "e",
    '"': '"',
    "\\": "\\",
    "\x85": "N",
    "\xa0": "_",
    "\u2028": "L",
    "\u2029": "P",
}
_BREAKS = "\n\x85\u2028\u2029"
_WS = "\0 \t\r\n\x85\u2028\u2029"


def _resolves_to_other(value: str) -> bool:
    """True when a plain ``value`` would load as something other than a string."""
    first = value[0] if value else ""
    return any(first in chars and rx.match(value) for chars, rx in _IMPLICIT)


def _scalar_text(value: Any) -> tuple[str, str]:
    """(text, tag) for a Python scalar, as ruamel's SafeRepresenter makes them."""
    if value is None:
        return "null", "null"
    if isinstance(value, bool):
        return ("true" if value else "false"), "bool"
    if isinstance(value, int):
        return str(value), "int"
    if isinstance(value, float):
        if value != value:
            return ".nan", "float"
        if value in (float("inf"), float("-inf")):
            return (".inf" if value > 0 else "-.inf"), "float"
        return repr(value).lower(), "float"
    return str(value), "str"


_SAFE_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=+/-]*\Z")  # no indicator, space, break


def _analyze(s: str) -> dict[str, bool]:
    if _SAFE_PLAIN.match(s):
        return {"empty": False, "multiline": False, "block_plain": True, "single": True}
    if not s:
        return {"empty": True, "multiline": False, "block_plain": True, "single": True}
    block_ind = s.startswith("---") or s.startswith("...")
    line_breaks = special = False
    leading_space = leading_break = trailing_space = trailing_break = False
    break_space = space_break = previous_space = previous_break = False
    preceded_ws, followed_ws = True, len(s) == 1 or s[1] in _WS
    for index, ch in enumerate(s):
        if index == 0:
            if ch in "#,[]{}&*!|>'\"%@`":
                block_ind = True
            if ch in "?:" and followed_ws:
                block_ind = True
            if ch == "-" and followed_ws:
                block_ind = True
        elif (ch == ":" and followed_ws) or (ch == "#" and preceded_ws):
            block_ind = True
        if ch in _BREAKS:
            line_breaks = True
        if not (ch == "\n" or "\x20" <= ch <= "\x7e") and not (
            (
                ch == "\x85"
                or "\xa0" <= ch <= "\ud7ff"
                or "\ue000" <= ch <= "\ufffd"
                or "\U00010000" <= ch <= "\U0010ffff"
            )
            and ch != "\ufeff"
        ):
            special = True
        if ch == " ":
            leading_space = leading_space or index == 0
            trailing_space = trailing_space or index == len(s) - 1
            break_space = break_space or previous_break
            previous_space, previous_break = True, False
        elif ch in _BREAKS:
            leading_break = leading_break or index == 0
            trailing_break = trailing_break or index == len(s) - 1
            space_break = space_break or previous_space
            previous_space, previous_break = False, True
        else:
            previous_space = previous_break = False
        preceded_ws = ch in _WS
        followed_ws = index + 2 >= len(s) or s[index + 2] in _WS
    plain = not (leading_space or leading_break or trailing_space or trailing_break)
    single = True
    if break_space:
        plain = single = False
    if special or space_break:
        plain = single = False
    if line_breaks or block_ind:
        plain = False
    return {"empty": False, "multiline": line_breaks, "block_plain": plain, "single": single}


class _Emitter:
    """ruamel.yaml's block emitter state for the shapes conda dumps."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.column = 0
        self.whitespace = True
        self.indention = True
        self.no_newline: bool | None = None
        self.indent: int | None = None
        self.indents: list[tuple[int | None, bool | None]] = []
        self.width, self.map_indent, self.seq_indent, self.dash_offset = 80, 2, 4, 2

    def write(self, data: str) -> None:
        self.column += len(data)
        self.out.append(data)

    def increase_indent(
        self, flow: bool = False, sequence: bool | None = None, indentless: bool = False
    ) -> None:
        self.indents.append((self.indent, sequence))
        if self.indent is None:
            self.indent = None if flow else 0
        elif not indentless:
            last_seq = len(self.indents) >= 2 and bool(self.indents[-2][1])
            self.indent += self.seq_indent if last_seq else self.map_indent

    def pop_indent(self) -> None:
        self.indent = self.indents.pop()[0]

    def indicator(
        self, text: str, need_ws: bool, whitespace: bool = False, indention: bool = False
    ) -> None:
        self.write(text if (self.whitespace or not need_ws) else " " + text)
        self.whitespace = whitespace
        self.indention = self.indention and indention

    def line_break(self, data: str = "\n") -> None:
        self.whitespace = self.indention = True
        self.column = 0
        self.out.append(data)

    def write_indent(self) -> None:
        indent = self.indent or 0
        if (
            not self.indention
            or self.column > indent
            or (self.column == indent and not self.whitespace)
        ):
            if self.no_newline:
                self.no_newline = False
            else:
                self.line_break()
        if self.column < indent:
            self.whitespace = True
            self.out.append(" " * (indent - self.column))
            self.column = indent

    # ---- nodes

    def node(
        self, value: Any, sequence: bool = False, mapping: bool = False, simple_key: bool = False
    ) -> None:
        if isinstance(value, dict) and value:
            self.block_mapping(value, mapping)
        elif isinstance(value, (list, tuple)) and value:
            self.block_sequence(value, mapping)
        elif isinstance(value, (dict, list, tuple)):
            self.increase_indent(flow=True)
            self.indicator("{}" if isinstance(value, dict) else "[]", True, whitespace=False)
            self.pop_indent()
        else:
            self.increase_indent(flow=True)
            self.scalar(value, sequence, simple_key)
            self.pop_indent()

    def block_sequence(self, items: Sequence[Any], mapping: bool) -> None:
        self.increase_indent(sequence=True, indentless=mapping and not self.indention)
        if len(self.indents) >= 2 and self.indents[-2][1] and self.indents[-1][1]:
            self.indention, self.no_newline = True, False
        for item in items:
            nonl = self.no_newline if self.column == 0 else False
            self.write_indent()
            self.indicator(" " * self.dash_offset + "-", True, indention=True)
            if nonl or self.dash_offset + 2 > self.seq_indent:
                self.no_newline = True
            self.node(item, sequence=True)
        self.pop_indent()
        self.no_newline = False

    def block_mapping(self, mapping_value: dict[Any, Any], in_mapping: bool) -> None:
        self.increase_indent(sequence=False)
        for key, value in mapping_value.items():
            self.write_indent()
            if self._simple_key(key):
                self.node(key, mapping=True, simple_key=True)
                self.indicator(":", False)
            else:
                self.indicator("?", True, indention=True)
                self.node(key, mapping=True)
                self.write_indent()
                self.indicator(":", True, indention=True)
            self.node(value, mapping=True)
        self.pop_indent()

    @staticmethod
    def _simple_key(key: Any) -> bool:
        if isinstance(key, (dict, list, tuple)):
            return not key
        text, tag = _scalar_text(key)
        # ruamel counts the tag ("!!str") into the 128 characters of a simple key
        return len(text) + 2 + len(tag) < 128 and not _analyze(text)["multiline"]

    # ---- scalars

    def scalar(self, value: Any, sequence: bool, simple_key: bool) -> None:
        text, tag = _scalar_text(value)
        analysis = _analyze(text)
        implicit = not (tag == "str" and _resolves_to_other(text))
        style = "'"
        if (
            implicit
            and not (simple_key and (analysis["empty"] or analysis["multiline"]))
            and analysis["block_plain"]
        ):
            style = ""
        elif (
            "'" in text
            or "\n" in text
            or not analysis["single"]
            or (simple_key and analysis["multiline"])
        ):
            style = '"'
        if sequence:
            self.write_indent()
        split = not simple_key
        if style == "":
            self.plain(text, split)
        elif style == "'":
            self.single_quoted(text, split)
        else:
            self.double_quoted(text, split)

    def plain(self, text: str, split: bool) -> None:
        if not text:
            return
        if not self.whitespace:
            self.write(" ")
        self.whitespace = self.indention = False
        if " " not in text and not any(b in text for b in _BREAKS):  # one word: the fast path
            if (
                len(text) + self.column > self.width
                and self.indent is not None
                and self.column > self.indent
            ):
                self.write_indent()
            self.write(text)
            return
        spaces = breaks = False
        start = end = 0
        while end <= len(text):
            ch = text[end] if end < len(text) else None
            if spaces:
                if ch != " ":
                    if start + 1 == end and self.column >= self.width and split:
                        self.write_indent()
                        self.whitespace = self.indention = False
                    else:
                        self.write(text[start:end])
                    start = end
            elif breaks:  # plain scalars never contain breaks here
                start = end
            elif ch is None or ch in " " + _BREAKS:
                data = text[start:end]
                if (
                    len(data) + self.column > self.width
                    and self.indent is not None
                    and self.column > self.indent
                ):
                    self.write_indent()
                self.write(data)
                start = end
            if ch is not None:
                spaces, breaks = ch == " ", ch in _BREAKS
            end += 1

    def single_quoted(self, text: str, split: bool) -> None:
        self.indicator("'", True)
        spaces = breaks = False
        start = end = 0
        while end <= len(text):
            ch = text[end] if end < len(text) else None
            if spaces:
                if ch is None or ch != " ":
                    if (
                        start + 1 == end
                        and self.column > self.width
                        and split
                        and start != 0
                        and end != len(text)
                    ):
                        self.write_indent()
                    else:
                        self.write(text[start:end])
                    start = end
            elif breaks:
                if ch is None or ch not in _BREAKS:
                    if text[start] == "\n":
                        self.line_break()
                    for br in text[start:end]:
                        self.line_break("\n" if br == "\n" else br)
                    self.write_indent()
                    start = end
            elif (ch is None or ch in " " + _BREAKS or ch == "'") and start < end:
                self.write(text[start:end])
                start = end
            if ch == "'":
                self.write("''")
                start = end + 1
            if ch is not None:
                spaces, breaks = ch == " ", ch in _BREAKS
            end += 1
        self.indicator("'", False)

    def double_quoted(self, text: str, split: bool) -> None:
        self.indicator('"', True)
        start = end = 0
        while end <= len(text):
            ch = text[end] if end < len(text) else None
            if (
                ch is None
                or ch in '"\\\x85\u2028\u2029\ufeff'
                or not (
                    "\x20" <= ch <= "\x7e"
                    or "\xa0" <= ch <= "\ud7ff"
                    or "\ue000" <= ch <= "\ufffd"
                    or "\U00010000" <= ch <= "\U0010ffff"
                )
            ):
                if start < end:
                    self.write(text[start:end])
                    start = end
                if ch is not None:
                    if ch in _ESCAPES:
                        data = "\\" + _ESCAPES[ch]
                    elif ch <= "\xff":
                        data = "\\x%02X" % ord(ch)
                    elif ch <= "\uffff":
                        data = "\\u%04X" % ord(ch)
                    else:
                        data = "\\U%08X" % ord(ch)
                    self.write(data)
                    start = end + 1
            if (
                0 < end < len(text) - 1
                and (ch == " " or start >= end)
                and self.column + (end - start) > self.width
                and split
            ):
                need_backslash = _needs_backslash(text, start, end)
                data = text[start:end] + ("\\" if need_backslash else "")
                if start < end:
                    start = end
                self.write(data)
                self.write_indent()
                self.whitespace = self.indention = False
                if text[start] == " ":
                    if not need_backslash:
                        start += 1
                    self.write("\\" if need_backslash else "")
            end += 1
        self.indicator('"', False)


def _needs_backslash(text: str, start: int, end: int) -> bool:
    try:
        space_pos = text.index(" ", end)
        newline = text.find("\n", end, space_pos)
        space_pos = newline if newline >= 0 else space_pos
        if text[space_pos] == "\n" and text[space_pos + 1] != " ":
            return True
        if (
            '"' not in text[end:space_pos]
            and "'" not in text[end:space_pos]
            and text[space_pos + 1] not in " \n"
            and text[end - 1 : end + 1] != "  "
            and start != end
        ):
            return False
    except (ValueError, IndexError):
        pass
    return True


def render_yaml(env: dict[str, Any]) -> str:
    """``yaml_safe_dump(env)`` as conda 24.7 writes it (ruamel.yaml, safe, pure)."""
    emitter = _Emitter()
    emitter.node(env)
    emitter.indent = None
    emitter.write_indent()
    return "".join(emitter.out)


# --------------------------------------------------------------------------- CLI


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="export.py", description="conda env export of a prefix, without conda."
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
        doc = export_prefix(prefix, args.name, args.no_builds, args.ignore_channels)
    except ExportError as exc:
        print(f"export.py: error: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        sys.stdout.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(doc["yaml"])
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
