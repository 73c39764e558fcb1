"""Packages from a channel behind credentials, for ``envtool build``: fetched on this machine,
where the ``${VAR}`` templates of the lock are filled in memory only, so no secret reaches the
Docker engine, a build argument, a layer or the image.

The lock envtool puts into the build context names each such archive by its copy in the
context (``file:///src/channels/<id>/<subdir>/<file>``, the hashes unchanged, checked again by
the builder's install); after the install the builder writes the channel's template back into
each ``conda-meta`` record (``bases.json``: the copy's base → the template), so the image's
records read as an install from the channel would write them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from envtool.errors import InputError, InstallError
from envtool.lock import lockfile, secrets, sources
from envtool.lock.lockfile import LockedPackage, Lockfile

FOLDER = "channels"  # in the build context
IN_BUILDER = "/src/channels"  # where the Dockerfile copies it
BASES = "bases.json"
MIRROR = f"envtool-build=file://{IN_BUILDER}"
_LIMIT = 8 << 30  # one archive; a server that sends more is not sending a conda package


def _folder(template: str) -> str:
    """A fixed-width name per templated channel base (no name is a prefix of another)."""
    return hashlib.sha256(template.encode()).hexdigest()[:16]


def behind_credentials(data: Lockfile, platform: str) -> tuple[LockedPackage, ...]:
    """The platform's packages whose URL needs an environment variable; InputError for a pip
    entry (pip would need the secret inside the builder)."""
    found = tuple(p for p in data.for_platform(platform) if secrets.used_vars(p.url))
    for pkg in found:
        if pkg.manager != "conda":
            raise InputError(
                f"pip entry {pkg.name} {pkg.version}: its URL needs "
                f"{', '.join(secrets.used_vars(pkg.url))}: envtool build fetches only conda "
                "packages behind credentials (a secret never goes into the builder)"
            )
    return found


def localized(data: Lockfile, packages: Iterable[LockedPackage]) -> tuple[Lockfile, dict[str, str]]:
    """``data`` with each of ``packages`` named by its copy in the builder, and the bases the
    builder writes back (the copy's base → the channel's template)."""
    moved: dict[LockedPackage, LockedPackage] = {}
    bases: dict[str, str] = {}
    for pkg in packages:
        base = f"file://{IN_BUILDER}/{_folder(pkg.channel_url)}"
        bases[base] = pkg.channel_url
        moved[pkg] = replace(pkg, url=f"{base}/{pkg.subdir}/{pkg.filename}")
    return replace(data, packages=tuple(moved.get(p, p) for p in data.packages)), bases


def _request(url: str) -> urllib.request.Request:
    """A GET for ``url`` with its user and password as a Basic header, never sent on a
    redirect (urllib would pass an ordinary header to wherever it is sent)."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parts.port:
        netloc += f":{parts.port}"
    request = urllib.request.Request(urlunsplit(parts._replace(netloc=netloc)))
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        request.add_unredirected_header(
            "Authorization", "Basic " + base64.b64encode(pair).decode("ascii")
        )
    return request


def _download(pkg: LockedPackage, url: str, target: Path) -> None:
    """Fetch ``url`` into ``target``, checking the lock's sha256 and md5 as it is written."""
    digests = {"sha256": hashlib.sha256(), "md5": hashlib.md5()}
    size = 0
    try:
        with urllib.request.urlopen(_request(url), timeout=60) as response, target.open("xb") as fh:
            for chunk in iter(lambda: response.read(1 << 20), b""):
                size += len(chunk)
                if size > _LIMIT:
                    raise InstallError(f"{secrets.mask(url)}: more than {_LIMIT >> 30} GiB")
                for digest in digests.values():
                    digest.update(chunk)
                fh.write(chunk)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise InstallError(
            f"cannot fetch {secrets.mask(url)}: {secrets.mask(str(reason))}"
        ) from None
    for kind, want in (("sha256", pkg.sha256), ("md5", pkg.md5)):
        got = digests[kind].hexdigest()
        if want and got != want:
            raise InstallError(
                f"{pkg.filename}: {kind} mismatch: the lock says {want}, the archive has {got}"
            )


def fetch(packages: Iterable[LockedPackage], into: Path, allow_insecure: bool) -> None:
    """Each package's archive into ``into``/<id>/<subdir>/<file>, fetched with the secrets
    filled in memory, under the policy ``envtool install`` applies (https unless
    ``allow_insecure``)."""
    for pkg in packages:
        url = secrets.expand(pkg.url)
        try:
            sources.checked([replace(pkg, url=url)], {}, allow_insecure)
        except InputError as exc:  # it quotes the URL, whose secrets are filled in by now
            raise InputError(secrets.mask(str(exc))) from None
        target = into / _folder(pkg.channel_url) / pkg.subdir / pkg.filename
        target.parent.mkdir(parents=True, exist_ok=True)
        _download(pkg, url, target)


def prepare(lock_path: Path, platform: str, context: Path, allow_insecure: bool) -> tuple[str, ...]:
    """Write the context's ``conda-lock.yml`` and ``channels/`` (the archives behind
    credentials, ``bases.json``); the install arguments the builder needs for them."""
    folder = context / FOLDER
    folder.mkdir()
    data = lockfile.read(lock_path)
    hidden = behind_credentials(data, platform)
    if not hidden:  # the lock as it is: the same bytes keep Docker's layer cache
        (folder / BASES).write_text("{}\n")
        (context / "conda-lock.yml").write_bytes(lock_path.read_bytes())
        return ()
    fetch(hidden, folder, allow_insecure)
    local, bases = localized(data, hidden)
    (folder / BASES).write_text(json.dumps(bases, indent=2, sort_keys=True) + "\n")
    (context / "conda-lock.yml").write_text(lockfile.dumps(local))
    return ("--channel-mirror", MIRROR)
