"""The lines of a ``- pip:`` block, in every form ``conda env export`` and ``pip freeze`` write.

Each line becomes a pip ``Package``. It is matched by its PEP 503 name, taken from the PEP 508
name before `` @ ``, from ``#egg=``, from a wheel's file name, or (a bare VCS URL, an
editable folder) from the last part of the path. Its version is what pins it: the release
(``name==v``, ``name===v``, a wheel's or an sdist's file name), a VCS revision
``git:<rev>`` (what follows ``@`` in the URL; a prefix reports the commit pip recorded in
``direct_url.json`` the same way), or ``""``: unpinned (a VCS URL without ``@rev``, a local
folder), which never equals a pinned version.
"""

from __future__ import annotations

import re
from posixpath import basename, normpath
from urllib.parse import parse_qs, unquote, urlsplit

from envtool.models import Package, normalize
from envtool_node.site_packages import VCS  # what a node reads from direct_url.json

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_NAME_RE = re.compile(rf"^{_NAME}$")
_EXTRAS = r"(?:\s*\[[A-Za-z0-9._,\s-]*\])?"
_PINNED = re.compile(rf"^({_NAME}){_EXTRAS}\s*(===|==)\s*(\S+)$")
_DIRECT = re.compile(rf"^({_NAME}){_EXTRAS}\s*@\s*(\S+)$")
_EDITABLE = re.compile(r"^(?:-e|--editable)(?:\s+|\s*=\s*)(\S+)$")
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!+._-]*$")  # PEP 440, local part included
_REV = re.compile(r"^[^\s@#?]+$")
_SDIST = (".tar.gz", ".tar.bz2", ".tar.xz", ".tgz", ".zip")
_URL_SCHEMES = ("http", "https", "file", "ftp")
_BREAKS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")  # what splitlines splits at
_VCS_SCHEMES = ("http", "https", "ssh", "git", "file")


class BadEntry(ValueError):
    """A line that is none of the forms pip writes; the message says why."""


def parse(line: str) -> Package:
    """One ``- pip:`` line as a pip Package (raises BadEntry)."""
    text = line.strip()
    if not text:
        raise BadEntry("an empty pip entry")
    if _BREAKS.search(text):  # pip reads what follows a line break as another requirement
        raise BadEntry("a pip entry is one line: it holds a line break or control character")
    if text.startswith("-") and not _EDITABLE.match(text):
        raise BadEntry("a pip option is not a pip entry (only '-e' is)")
    editable = _EDITABLE.match(text)
    if editable:
        return _from_url(editable.group(1), "", editable=True)
    pinned = _PINNED.match(text)
    if pinned:
        name, op, version = pinned.groups()
        if op == "==" and not _VERSION.match(version):
            raise BadEntry(f"{version!r} is not a pinned version")
        return Package(name, version, manager="pip")
    direct = _DIRECT.match(text)
    if direct:
        name, url = direct.groups()
        if ":" not in url:
            raise BadEntry(f"'{name} @' needs a URL (scheme://...)")
        return _from_url(url, name)
    if _scheme(text)[0] or text.endswith(".whl"):
        return _from_url(text, "")
    raise BadEntry("expected 'name==version', 'name @ URL', a VCS URL or '-e ...'")


def vcs_revision(url: str) -> str | None:
    """``git:<rev>`` of a pip VCS URL (``git+https://...@rev``), ``""`` when it names no
    revision, None when it is no VCS URL (a lock's pip URL, a node's ``url``)."""
    try:
        vcs, rest = _scheme(url.partition("#")[0])
        rev = _split_rev(rest)[1] if vcs in VCS else None
    except BadEntry:
        return None
    return None if rev is None else f"{vcs}:{rev}" if rev else ""


def lock_version(url: str, version: str, revision: str) -> str:
    """What a pip entry of a lock is compared by: ``git:<commit>`` for a VCS entry (whose
    commit conda-lock keeps in ``hash.sha256``, envtool in ``revision``), else its version."""
    vcs = url.partition("+")[0]
    return f"{vcs}:{revision}" if revision and vcs in VCS else version


def _scheme(url: str) -> tuple[str, str]:
    """(vcs, the URL without ``vcs+``) of a VCS URL; (scheme, url) of another; ("", url)."""
    head, sep, _ = url.partition("://")
    if not sep and re.match(r"git\+[^:/@]+@[^:/]+:", url):  # git+git@host:org/repo (scp-like)
        return "git", "ssh://" + url[len("git+") :]
    if not sep:
        head, sep, _ = url.partition(":")
        if not sep or head not in _URL_SCHEMES:  # a path (C:\\ is no scheme either)
            return "", url
    vcs, plus, transport = head.partition("+")
    if plus:
        if vcs not in VCS or transport not in _VCS_SCHEMES:
            raise BadEntry(f"{head}:// is not a VCS URL pip reads")
        return vcs, url[len(vcs) + 1 :]
    return (head if re.fullmatch(r"[A-Za-z][A-Za-z0-9.+-]*", head) else ""), url


def _split_rev(url: str) -> tuple[str, str]:
    """(the URL without its ``@rev``, the rev or "") as pip splits a VCS URL: the ``@`` is
    searched in the path only, so ``ssh://git@host/...`` keeps its user."""
    parts = urlsplit(url)
    if "@" not in parts.path:
        return url, ""
    path, rev = parts.path.rsplit("@", 1)
    if not _REV.match(rev):
        raise BadEntry(f"'@{rev}' is not a revision")
    return parts._replace(path=path).geturl(), rev


def _fragment(url: str) -> tuple[str, dict[str, str]]:
    base, _, frag = url.partition("#")
    fields = {k: v[-1] for k, v in parse_qs(frag, keep_blank_values=True).items()}
    return base, fields


def _from_url(url: str, name: str, editable: bool = False) -> Package:
    base, frag = _fragment(url)
    name = name or frag.get("egg", "")
    vcs, rest = _scheme(base)
    if vcs in VCS:
        stripped, rev = _split_rev(rest)
        repo = basename(urlsplit(stripped).path.rstrip("/"))
        name = _checked_name(name or repo.removesuffix(".git"))
        return Package(name, f"{vcs}:{rev}" if rev else "", manager="pip", url=base)
    if not vcs and not editable and not base.endswith(".whl"):
        raise BadEntry("not a URL")
    path = unquote(urlsplit(base).path) if vcs else base
    if path.endswith(".whl"):
        wheel_name, version = _wheel(basename(path))
        if name and normalize(name) != normalize(wheel_name):
            raise BadEntry(f"'{name}' does not match the wheel's name {wheel_name!r}")
        name = name or wheel_name
    else:
        name = _checked_name(name or (basename(normpath(path)) if editable else ""))
        version = _sdist_version(basename(path), name)
    sha256 = frag.get("sha256", "").lower()
    if sha256 and not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise BadEntry("'#sha256=' needs the 64 hex digits of the file's hash")
    return Package(name, version, manager="pip", url=base, sha256=sha256)


def _checked_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise BadEntry("cannot tell the distribution's name: write 'name @ URL' or add '#egg=name'")
    return name


def _wheel(filename: str) -> tuple[str, str]:
    """(name, version) from ``name-version[-build]-python-abi-platform.whl`` (PEP 427)."""
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6) or not _NAME_RE.match(parts[0]) or not _VERSION.match(parts[1]):
        raise BadEntry(f"{filename} is not a wheel file name (name-version-...-platform.whl)")
    return parts[0], parts[1]


def _sdist_version(filename: str, name: str) -> str:
    """The version in ``name-version.tar.gz``; "" for anything else (a folder, a commit's
    archive), which leaves the entry unpinned."""
    for ext in _SDIST:
        if filename.endswith(ext):
            stem = filename[: -len(ext)]
            for i, ch in enumerate(stem):
                if ch == "-" and normalize(stem[:i]) == normalize(name):
                    version = stem[i + 1 :]
                    return version if _VERSION.match(version) else ""
    return ""
