"""Where an install may fetch a locked package from: https; a file:// URL inside a local
``--channel-mirror`` the user configured; anything else (http://, other files) only with
``--allow-insecure-url``.

A lockfile is input: it must not be able to point an install at ``file:///dev/zero``, at
another user's files, or at a server that nothing authenticates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlparse

from envtool.errors import InputError
from envtool.lock.lockfile import LockedPackage


def _inside(url: str, folders: Iterable[str]) -> bool:
    return any(url.startswith(folder.rstrip("/") + "/") for folder in folders)


def check(
    packages: Iterable[LockedPackage], mirrors: Mapping[str, str], allow_insecure: bool
) -> None:
    """InputError (exit 2) for the first URL the policy refuses, naming the package and how
    to allow it; the lock's own URLs are what is installed (and recorded)."""
    local = [m for m in mirrors.values() if urlparse(m).scheme == "file"]
    for pkg in packages:
        scheme = urlparse(pkg.url).scheme
        allowed = scheme == "https" or (scheme == "file" and _inside(pkg.url, local))
        if not allowed and not allow_insecure:
            raise InputError(
                f"{pkg.name} {pkg.version}: {pkg.url} is neither https nor inside a file:// "
                "--channel-mirror; add --channel-mirror NAME=file:///PATH for a local channel, "
                "or --allow-insecure-url if you trust it"
            )
