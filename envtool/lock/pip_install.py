"""The pip part of ``envtool install``: the lock's pip entries into a prefix, checked.

Each requirement line is built from the entry's parsed parts only (a PEP 508 name, a URL
of RFC 3986 characters, a sha256), so no field of the lock adds a line, a marker or an
option to pip's requirements file; pip's own report of what it installed is compared with
the lock, and the summary counts that report, not the lock.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

from envtool import private, proc
from envtool.errors import InputError, InstallError
from envtool.lock.lockfile import LockedPackage
from envtool.models import normalize

PIP_TIMEOUT = 1800.0
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")  # PEP 508
# RFC 3986's characters less '#' (pip reads a fragment as #egg=/#sha256=), less '{' '}' (pip
# expands ${VAR} in a requirements file) and whitespace (which ends the URL for pip)
_URL = re.compile(r"[A-Za-z0-9\-._~:/?\[\]@!$&'()*+,;=%]+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SCHEMES = ("https", "http", "file")
_MAX_REPORT = 64 << 20


def requirement(lock: Path, pkg: LockedPackage) -> str:
    """``name @ URL --hash=sha256:HEX`` from the entry's checked parts (InputError if one
    is not what a pip requirement may hold)."""
    scheme = urlsplit(pkg.url).scheme if _URL.fullmatch(pkg.url) else ""
    if not _NAME.fullmatch(pkg.name):
        why = f"{pkg.name!r} is not a pip distribution name"
    elif scheme not in _SCHEMES:
        why = f"{pkg.url!r} is not an https, http or file URL pip may read as it is"
    elif not (pkg.sha256 and _SHA256.fullmatch(pkg.sha256)):
        why = "it has no sha256, the hash pip checks (md5 is not one of pip's --hash kinds)"
    else:
        return f"{pkg.name} @ {pkg.url} --hash=sha256:{pkg.sha256}"
    raise InputError(f"{lock}: pip entry {pkg.name} {pkg.version}: {why}")


def _argv(python: Path, prefix: Path, req: Path, report: Path) -> list[str]:
    return [
        str(python),
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--require-hashes",
        "--no-input",
        "--disable-pip-version-check",
        "--no-warn-script-location",
        "--prefix",
        str(prefix),
        "--report",
        str(report),
        "-r",
        str(req),
    ]


def _installed(report: Path) -> list[tuple[str, str, str]]:
    """(normalized name, version, sha256) of each distribution pip's report says it
    installed (pip >= 22.2 writes the report)."""
    try:
        with report.open("rb") as fh:
            doc = json.loads(fh.read(_MAX_REPORT))
        items = doc["install"]
        out = []
        for item in items:
            meta, info = item["metadata"], item.get("download_info") or {}
            hashes = (info.get("archive_info") or {}).get("hashes") or {}
            out.append(
                (normalize(str(meta["name"])), str(meta["version"]), hashes.get("sha256", ""))
            )
        return out
    except (OSError, ValueError, KeyError, TypeError):
        raise InstallError(
            f"{report.name}: pip wrote no report of what it installed "
            "(pip >= 22.2 is needed in the prefix)"
        ) from None


def compare(packages: list[LockedPackage], installed: list[tuple[str, str, str]]) -> None:
    """InstallError for the first distribution pip installed that the lock does not list
    with that version and hash."""
    locked = {normalize(p.name): p for p in packages}
    for name, version, sha256 in installed:
        pkg = locked.get(name)
        if pkg is None:
            raise InstallError(f"pip installed {name} {version}, which the lock does not list")
        if version != pkg.version or (sha256 and sha256 != pkg.sha256):
            raise InstallError(
                f"pip installed {name} {version} from {pkg.url}, where the lock says "
                f"{pkg.name} {pkg.version} (sha256 {pkg.sha256})"
            )


def install(packages: list[LockedPackage], lines: list[str], python: Path, prefix: Path) -> int:
    """Install the requirement ``lines`` with the prefix's pip; how many pip installed."""
    with private.tempdir("envtool-req-") as tmp:
        req, report = tmp / "requirements.txt", tmp / "report.json"
        req.write_text("".join(line + "\n" for line in lines))
        try:
            proc.run(_argv(python, prefix, req, report), timeout=PIP_TIMEOUT)
        except proc.ProcessError as exc:
            raise InstallError(f"{prefix}: pip install failed: {exc}") from None
        installed = _installed(report)
    compare(packages, installed)
    return len(installed)
