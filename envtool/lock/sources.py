"""Where an install may fetch a locked package from: https; a file:// URL inside a local
``--channel-mirror`` the user configured; anything else (http://, other files) only with
``--allow-insecure-url``.

A lockfile is input: it must not be able to point an install at ``file:///dev/zero``, at
another user's files, or at a server that nothing authenticates. The URL tested is the URL
used: a file URL's path is percent-decoded and its ``.``/``..`` segments resolved (as
rattler's URL parser and the kernel do) before it is tested against the mirror's root, and
the install reads that resolved path; a URL holding whitespace, a control character or a
backslash (which parsers drop or read as ``/``) is refused whatever the flags.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from posixpath import normpath
from urllib.parse import quote, unquote, urlsplit

from envtool.errors import InputError
from envtool.lock.lockfile import LockedPackage

_NOT_IN_URL = re.compile(r"[\s\x00-\x1f\x7f\\]")
_PCHAR_SAFE = "/!$&'()*+,;=:@~"  # RFC 3986 pchar: kept as they are when a path is rebuilt


def resolved_path(url: str) -> str:
    """The file a ``file:`` URL names: percent-decoded, ``.``/``..``/``//`` resolved."""
    path = normpath(unquote(urlsplit(url).path) or "/")
    return "/" + path.lstrip("/")  # normpath keeps a leading '//'


def canonical(url: str) -> str:
    """The URL an install uses for ``url``: a file URL whose path had anything to resolve is
    rebuilt from the resolved path; any other URL is used as it is (InputError if no URL)."""
    if _NOT_IN_URL.search(url):
        raise InputError(f"{url!r} holds whitespace, a control character or a backslash")
    parts = urlsplit(url)
    if parts.scheme != "file":
        return url
    if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        raise InputError(f"{url}: a file URL names a local path only (no host, query, '#')")
    path = resolved_path(url)
    if _NOT_IN_URL.search(path):
        raise InputError(f"{url}: its path decodes to a control character or a backslash")
    return url if path == unquote(parts.path) else "file://" + quote(path, safe=_PCHAR_SAFE)


def _inside(path: str, roots: Iterable[str]) -> bool:
    return any(path.startswith(root.rstrip("/") + "/") for root in roots)


def allowed(url: str, mirrors: Mapping[str, str]) -> bool:
    """Whether the policy installs ``url`` (already canonical) without --allow-insecure-url."""
    scheme = urlsplit(url).scheme
    if scheme == "https":
        return True
    roots = [resolved_path(m) for m in mirrors.values() if urlsplit(m).scheme == "file"]
    return scheme == "file" and _inside(resolved_path(url), roots)


def checked(
    packages: Iterable[LockedPackage],
    mirrors: Mapping[str, str],
    allow_insecure: bool,
    lock: Path | None = None,
) -> tuple[LockedPackage, ...]:
    """The packages with the URLs the install will use, each tested after resolving; an
    InputError (exit 2) for the first the policy refuses, naming the package and the way
    to allow it."""
    where = f"{lock}: " if lock else ""
    out = []
    for pkg in packages:
        try:
            url = canonical(pkg.url)
        except InputError as exc:
            raise InputError(f"{where}{pkg.name} {pkg.version}: {exc}") from None
        if not allow_insecure and not allowed(url, mirrors):
            raise InputError(
                f"{where}{pkg.name} {pkg.version}: {pkg.url} is neither https nor inside a "
                "file:// --channel-mirror; add --channel-mirror NAME=file:///PATH for a local "
                "channel, or --allow-insecure-url if you trust it"
            )
        out.append(pkg if url == pkg.url else replace(pkg, url=url))
    return tuple(out)
