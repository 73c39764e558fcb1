"""pip distributions in site-packages that no conda record owns (conda's PrefixData rules).

Python 3.9, standard library only.
"""

from __future__ import annotations

import json
import os
import re
from os.path import dirname, isdir, isfile, join, lexists

from .channels import ON_WIN
from .conda_meta import ExportError, Record, warn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

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


VCS = ("git", "hg", "svn", "bzr")  # PEP 610's registered VCS
_COMMIT_RE = re.compile(r"^[^\s@#]{1,200}$")  # written after '@' in a requirement line


def _url_text(value: object) -> str | None:
    """A URL fit to be shown and written into a requirement line (no blanks, bounded)."""
    if isinstance(value, str) and 0 < len(value) <= 2000 and not re.search(r"\s", value):
        return value
    return None


def direct_url(mdir: str) -> tuple[str | None, str | None, str | None]:
    """(url, sha256, revision) of where pip installed a distribution from, as its
    ``direct_url.json`` (PEP 610) records; all None for an install from an index.

    An archive (a wheel or sdist file) gives its URL and its file hash. A VCS checkout gives
    pip freeze's requirement URL ``git+URL@<commit>`` and the revision ``git:<commit>``,
    never a hash: a commit id is no file's sha256. A folder (``dir_info``, editable or
    not) gives its ``file://`` URL only."""
    try:
        with open(join(mdir, "direct_url.json"), encoding="utf-8") as fh:
            doc = json.loads(fh.read(65536))
    except (OSError, ValueError):
        return None, None, None
    if not isinstance(doc, dict):
        return None, None, None
    url, vcs_info = _url_text(doc.get("url")), doc.get("vcs_info")
    if isinstance(vcs_info, dict):
        vcs, commit = vcs_info.get("vcs"), vcs_info.get("commit_id")
        if url is None or vcs not in VCS or not _COMMIT_RE.match(str(commit)):
            return None, None, None
        return f"{vcs}+{url}@{commit}", None, f"{vcs}:{commit}"
    info = doc.get("archive_info")
    if not isinstance(info, dict):
        return url, None, None  # dir_info: a local folder
    hashes = info.get("hashes") if isinstance(info.get("hashes"), dict) else {}
    digest = hashes.get("sha256") if hashes else None
    legacy = info.get("hash")
    if digest is None and isinstance(legacy, str) and legacy.startswith("sha256="):
        digest = legacy[len("sha256=") :]
    return url, (digest if isinstance(digest, str) else None), None


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
        url, sha256, revision = direct_url(mdir)
    elif kind == "egg" and isfile(join(mdir, "installed-files.txt")):
        _check_manifest(join(mdir, "installed-files.txt"))
        package_type = "virtual_python_egg_manageable"
    else:
        package_type = "virtual_python_egg_" + ("link" if kind == "egg-link" else "unmanageable")
    if kind != "wheel":
        url, sha256, revision = None, None, None
    name, version = read_metadata(_metadata_file(full))
    if version is None:
        raise _Skip(f"{anchor}: no Version in its metadata")
    if revision is not None:  # a VCS install is pinned by its commit, as pip freeze writes it
        version = revision
    norm = name.replace(".", "-").replace("_", "-").lower() if name else ""
    return Record(
        name={"graphviz": "python-graphviz"}.get(norm, norm),
        version=version,
        build="dev_0" if kind == "egg-link" else "pypi_0",
        package_type=package_type,
        channel="<develop>" if kind == "egg-link" else "pypi",
        subdir="pypi",
        source=anchor,
        url=url,
        sha256=sha256,
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
