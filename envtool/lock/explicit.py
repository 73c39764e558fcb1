"""conda's explicit files (``@EXPLICIT``, one package URL a line) read as packages.

What ``conda list --explicit [--md5]`` and ``conda-lock render -k explicit`` write: comments
(``# platform: linux-64``), the ``@EXPLICIT`` marker, then one conda archive URL per line,
optionally with an ``#<md5>``, ``#<sha256>`` or ``#sha256:<sha256>`` fragment (the forms
conda's own parser takes). conda-lock adds its pip dependencies as ``# pip NAME @ URL``
comment lines, which conda ignores and conda-lock and micromamba install; they are read as
the lines of a ``- pip:`` block are (envtool.pip_entries: the version from a wheel's or an
sdist's file name, ``git:<commit>`` for a VCS URL, which never carries a sha256: a checkout
has no file digest).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote

from envtool.errors import InputError, shown
from envtool.lock import names
from envtool.models import Package
from envtool_node.channels import canonical_name

MARKER = "@EXPLICIT"
BACKSLASH = "\\"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_ARCHIVE = re.compile(
    r"^(?P<base>.+)/(?P<stem>[^/#]+)(?P<ext>\.tar\.bz2|\.conda)(?:#(?P<frag>.*))?$"
)
_MD5 = re.compile(r"^[0-9a-f]{32}$")
_SHA256 = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$")
_PIP_HASH = re.compile(r"^--hash=sha256:([0-9a-f]{64})$")
_PLATFORM = re.compile(r"^#\s*platform:\s*(\S+)\s*$")


def marker_line(text: str) -> int:
    """The line of the ``@EXPLICIT`` marker (a line that is that and nothing else), else 0."""
    return next((n for n, ln in enumerate(text.splitlines(), 1) if ln.strip() == MARKER), 0)


def is_explicit(text: str) -> bool:
    """Whether ``text`` is an explicit file rather than YAML (which cannot hold that line)."""
    return marker_line(text) > 0


def _fail(path: Path, line: int, message: str) -> InputError:
    return InputError(f"{path}:{line}: {message}")


def _hashes(path: Path, line: int, fragment: str | None) -> tuple[str, str]:
    """md5 and sha256 from a conda URL's fragment."""
    if fragment is None:
        return "", ""
    if _MD5.match(fragment):
        return fragment, ""
    if match := _SHA256.match(fragment):
        return "", match.group(1)
    raise _fail(path, line, f"'#{fragment}' is not an md5 or sha256 (#<md5>, #sha256:<hex>)")


def _conda(path: Path, line: int, url: str, platform: str) -> Package:
    match = _ARCHIVE.match(url)
    if not _SCHEME.match(url) or not match:
        raise _fail(
            path, line, f"expected a package URL (.../NAME-VERSION-BUILD.conda), not {shown(url)}"
        )
    parts = unquote(match["stem"]).rsplit("-", 2)
    if len(parts) != 3:
        raise _fail(path, line, f"{match['stem']!r} is not NAME-VERSION-BUILD")
    name, version, build = parts
    for problem in (
        names.why_bad_name(name),
        names.why_bad_version(version),
        names.why_bad_build(build),
    ):
        if problem:
            raise _fail(path, line, problem)
    channel_url, _, subdir = match["base"].rpartition("/")
    if subdir not in (platform, "noarch"):
        raise _fail(path, line, f"a {subdir} package in a {platform} environment")
    md5, sha256 = _hashes(path, line, match["frag"])
    return Package(
        name, version, build, canonical_name(channel_url), "conda", url.split("#")[0], md5, sha256
    )


def _pip(path: Path, line: int, requirement: str) -> Package:
    """``NAME @ URL[#sha256=HEX]`` (conda-lock 4) or ``NAME @ URL --hash=sha256:HEX`` (1),
    read as a ``- pip:`` line is (pip_entries: a VCS URL is pinned by ``git:<rev>``)."""
    from envtool import pip_entries  # only files with pip lines need it (and envtool_node's)

    words = requirement.split()
    if len(words) < 3 or words[1] != "@":
        raise _fail(path, line, f"expected '# pip NAME @ URL', not {shown(requirement)}")
    options = [_PIP_HASH.match(word) for word in words[3:]]
    if not all(options):
        raise _fail(
            path, line, f"expected '--hash=sha256:HEX' after the URL, not {shown(requirement)}"
        )
    try:
        pkg = pip_entries.parse(" ".join(words[:3]))
    except pip_entries.BadEntry as exc:
        raise _fail(path, line, f"{exc}, got {shown(requirement)}") from None
    digests = {pkg.sha256} - {""} | {m.group(1) for m in options if m}
    if len(digests) > 1 or (digests and pip_entries.vcs_revision(pkg.url) is not None):
        raise _fail(path, line, f"{pkg.name}: hashes that cannot all be its file's sha256")
    return replace(pkg, sha256=next(iter(digests), ""))


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(line number, stripped text); a ``# pip`` line ending in ``\\`` goes on on the next one.

    A continued line's parts are joined once, at its end: adding each part to the text so
    far copied that text again for every line (6.4 MB of short parts: minutes)."""
    out: list[tuple[int, str]] = []
    parts: list[str] = []  # the last line's parts while it is a ``# pip`` line

    def join() -> None:
        if len(parts) > 1:
            out[-1] = (out[-1][0], " ".join(parts))

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if parts and parts[-1].endswith(BACKSLASH) and line.startswith("# pip "):
            parts[-1] = parts[-1].removesuffix(BACKSLASH)
            parts.append(line[6:].strip())
        elif line:
            join()
            out.append((number, line))
            parts = [line] if line.startswith("# pip ") else []
    join()
    return out


def parse(text: str, path: Path, platform: str) -> tuple[Package, ...]:
    """The packages of an explicit file for ``platform``; a bad line is an InputError naming it."""
    if not is_explicit(text):
        raise InputError(f"{path}: not an explicit file (no '{MARKER}' line)")
    packages: list[Package] = []
    seen: dict[tuple[str, str, str], int] = {}
    for number, line in _logical_lines(text):
        if line == MARKER:
            continue
        if declared := _PLATFORM.match(line):
            if declared.group(1) != platform:
                raise _fail(
                    path, number, f"an explicit file for {declared.group(1)}, not {platform}"
                )
            continue
        if line.startswith("# pip "):
            pkg = _pip(path, number, line[len("# pip ") :])
        elif line.startswith("#"):
            continue
        else:
            pkg = _conda(path, number, line, platform)
        key = names.same_package_key(pkg.name, pkg.manager, platform)
        if key in seen:
            raise _fail(path, number, f"{pkg.name} ({pkg.manager}) twice (first: line {seen[key]})")
        seen[key] = number
        packages.append(pkg)
    if not packages:
        raise InputError(f"{path}: an explicit file without packages")
    return tuple(packages)
