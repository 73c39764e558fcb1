"""Installed conda packages: ``conda-meta/*.json`` records as conda's PrefixData reads them.

``Record`` is one installed package, conda or pip, with the fields the export needs; the
pip side is read in site_packages.py. Python 3.9, standard library only.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from os.path import basename, join, lexists

from .channels import canonical_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

UNSET = "***unset***"  # conda's CONDA_ENV_VARS_UNSET_VAR
CONDA_TYPES = (None, "noarch_generic", "noarch_python")
PIP_TYPES = (
    "virtual_python_wheel",
    "virtual_python_egg_manageable",
    "virtual_python_egg_unmanageable",
)


class ExportError(Exception):
    """The prefix cannot be exported; the message names the file."""


MAX_SKIPPED = 1000  # unreadable records listed in a document (the rest are not)
MAX_RECORD = 64 * 2**20  # bytes in one conda-meta JSON file (the largest real ones: a few MB)


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return "\\x%02x" % code
    return "\\u%04x" % code if code < 0x10000 else "\\U%08x" % code


def shown(text: str) -> str:
    """``text`` with each unprintable character as its escape (envtool/report/text.py's rule):
    a file name's ESC or BEL never reaches the terminal that reads this stderr."""
    return (
        text if text.isprintable() else "".join(c if c.isprintable() else _escape(c) for c in text)
    )


def warn(message: str) -> None:
    """A file conda would ignore (it says so on stderr too), made visible."""
    print(f"export.py: warning: {shown(message)}", file=sys.stderr)


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
        """pip for distributions found in site-packages, conda otherwise."""
        return "pip" if self.package_type in PIP_TYPES else "conda"


def _read_json(path: str, what: str = "conda record") -> Any:
    """A JSON file of at most MAX_RECORD bytes: a device (``/dev/zero``), a pipe or a huge
    file is refused, never read whole (O_NONBLOCK: opening a FIFO does not wait)."""
    try:
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as fh:
            info = os.fstat(fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise ExportError(f"cannot read {what} {path}: not a regular file")
            if info.st_size > MAX_RECORD:  # refused by its size, before a byte is read
                raise ExportError(f"{what} {path} is larger than {MAX_RECORD} bytes")
            data = fh.read(MAX_RECORD + 1)
        if len(data) > MAX_RECORD:
            raise ExportError(f"{what} {path} is larger than {MAX_RECORD} bytes")
        return json.loads(data.decode("utf-8"))
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


def conda_record(
    path: str, data: Any, skipped: list[dict[str, str]] | None = None
) -> Record | None:
    """A Record from one ``conda-meta`` JSON document; None if conda would ignore it (then
    added to ``skipped`` with its name and why: the report names the file, not an absence)."""
    if not isinstance(data, dict):
        raise ExportError(f"corrupted conda record {path}: not a JSON object")
    for key in ("name", "version", "build", "build_number"):
        if key not in data and not (key == "build" and "build_string" in data):
            raise ExportError(f"corrupted conda record {path}: no {key!r}")
    name, version = _text_field(data["name"]), _text_field(data["version"])
    build = _text_field(data.get("build", data.get("build_string")))
    if basename(path)[:-5].rsplit("-", 2) != [name, version, build]:
        warn(f"ignoring malformed prefix record at: {path}")
        if skipped is not None and len(skipped) < MAX_SKIPPED:
            why = "conda ignores it: its file name is not %s-%s-%s.json" % (name, version, build)
            if "-" in str(version):
                why += " (%r is no conda version: a version holds no '-')" % (version,)
            skipped.append({"path": path, "name": str(name), "why": why})
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


def load_conda_records(
    prefix: str, skipped: list[dict[str, str]] | None = None
) -> dict[str, Record]:
    """Every conda record of the prefix, keyed by name (a later file wins, as in conda); the
    records conda would ignore go to ``skipped``."""
    records: dict[str, Record] = {}
    meta = join(prefix, "conda-meta")
    if not lexists(meta):
        return records
    try:
        paths = [entry.path for entry in os.scandir(meta) if entry.path[-5:] == ".json"]
    except OSError as exc:
        raise ExportError(f"cannot read {meta}: {exc.strerror or exc}") from None
    for path in paths:
        record = conda_record(path, _read_json(path), skipped)
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
