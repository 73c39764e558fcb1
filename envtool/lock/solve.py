"""Solver backends behind one interface; the default solves in-process with py-rattler."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from envtool import private
from envtool.errors import InputError, SolveError
from envtool.lock import secrets
from envtool.lock.lockfile import LockedPackage
from envtool.lock.spec import EnvSpec, VirtualPackage
from envtool_node.channels import base_url

_MAX_EXPLANATION_LINES = 8


@dataclass(frozen=True)
class SolveRequest:
    """Everything a backend needs to solve the conda part of an environment."""

    env: EnvSpec
    platforms: tuple[str, ...]
    virtual: Mapping[str, tuple[VirtualPackage, ...]]
    mirrors: Mapping[str, str]
    cache_dir: Path


class Solver(Protocol):
    """A backend: conda entries for every requested platform."""

    def solve(self, request: SolveRequest) -> list[LockedPackage]: ...


def source_channel(channel: str, mirrors: Mapping[str, str]) -> str:
    """Where to read ``channel``'s repodata from: its mirror if one is given."""
    mirror = mirrors.get(channel) or mirrors.get(base_url(channel))
    return (mirror or channel).rstrip("/")


def default_cache_dir() -> Path:
    """``$ENVTOOL_CACHE_DIR``, else ``$XDG_CACHE_HOME/envtool``, else ``~/.cache/envtool``."""
    if os.environ.get("ENVTOOL_CACHE_DIR"):
        return Path(os.environ["ENVTOOL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "envtool"


def split_dependency(dep: str) -> tuple[str, str]:
    """``"python >=3.9,<3.10"`` → ``("python", ">=3.9,<3.10")``, as conda-lock records it."""
    name, _, rest = dep.strip().partition(" ")
    return name, rest.strip()


def shorten(message: str) -> str:
    """A solver explanation cut to a few lines, joined into one."""
    lines = [ln.rstrip() for ln in message.strip().splitlines() if ln.strip()]
    if len(lines) > _MAX_EXPLANATION_LINES:
        lines = [*lines[:_MAX_EXPLANATION_LINES], "…"]
    return " ".join(ln.strip() for ln in lines)


class RattlerSolver:
    """Solve in-process with py-rattler (resolvo), the same engine pixi uses."""

    def solve(self, request: SolveRequest) -> list[LockedPackage]:
        """Solve every platform; the lock records canonical channel URLs, never mirrors."""
        specs = _match_specs(request.env)
        return asyncio.run(self._solve_all(request, specs))

    async def _solve_all(self, request: SolveRequest, specs: list[Any]) -> list[LockedPackage]:
        from rattler import Channel, Gateway

        private.private_folder(request.cache_dir / "repodata")  # a private channel's repodata
        accesses = [
            secrets.access(source_channel(c, request.mirrors)) for c in request.env.channels
        ]
        gateway = Gateway(cache_dir=request.cache_dir / "repodata", client=_client(accesses))
        channels = [Channel(a.bare) for a in accesses]  # no credentials in what it caches
        bases = _lock_bases(request, accesses)
        out: list[LockedPackage] = []
        for platform in request.platforms:
            records = await self._solve_one(request, gateway, channels, specs, platform)
            out.extend(_to_locked(r, platform, bases) for r in records)
        return out

    async def _solve_one(
        self,
        request: SolveRequest,
        gateway: Any,
        channels: list[Any],
        specs: list[Any],
        platform: str,
    ) -> list[Any]:
        from rattler import BuildString, GenericVirtualPackage, PackageName, Version, solve
        from rattler.exceptions import GatewayError, SolverError
        from rattler.platform import Subdir

        virtual = [
            GenericVirtualPackage(PackageName(v.name), Version(v.version), BuildString(v.build))
            for v in request.virtual.get(platform, ())
        ]
        try:
            records: list[Any] = await solve(
                sources=channels,
                specs=specs,
                gateway=gateway,
                platforms=[Subdir(platform), Subdir("noarch")],
                virtual_packages=virtual,
            )
        except SolverError as exc:
            raise SolveError(
                f"{request.env.path}: cannot solve for {platform}: {shorten(str(exc))}"
            ) from None
        except GatewayError as exc:
            raise InputError(
                f"{request.env.path}: cannot read a channel: {secrets.mask(shorten(str(exc)))}"
            ) from None
        return records


def _match_specs(env: EnvSpec) -> list[Any]:
    from rattler import MatchSpec
    from rattler.exceptions import InvalidMatchSpecError

    specs = []
    for dep in env.conda:
        try:
            specs.append(MatchSpec(dep.spec))
        except InvalidMatchSpecError as exc:
            raise InputError(f"{env.where(dep.line)}: bad spec {dep.spec!r}: {exc}") from None
    return specs


def canonical_url(url: str, channels: tuple[str, ...], mirrors: Mapping[str, str]) -> str:
    """A package URL read from a mirror, rewritten to the channel's canonical URL."""
    for channel in channels:
        mirror = source_channel(channel, mirrors)
        if mirror != channel.rstrip("/") and url.startswith(mirror + "/"):
            return base_url(channel) + url[len(mirror) :]
    return url


def _client(accesses: list[secrets.Access]) -> Any:
    """rattler's client for channels behind credentials (None: its default): each request
    gets its channel's Authorization header and its token path in memory, as rattler's
    authentication middleware adds them, so no URL rattler caches holds a secret."""
    from rattler.networking import AddHeadersMiddleware, Client, MirrorMiddleware

    tokens = {f"{a.bare}/": [f"{a.target}/"] for a in accesses if a.target != a.bare}
    if not tokens and not any(a.authorization for a in accesses):
        return None
    return Client(
        [
            AddHeadersMiddleware(lambda host, path: secrets.authorization(accesses, host, path)),
            MirrorMiddleware(tokens),
        ]
    )


def _lock_bases(request: SolveRequest, accesses: list[secrets.Access]) -> dict[str, str]:
    """Each source's bare URL (the solver's records start with it) → what the lock records in
    its place: the channel as written (a ``${VAR}`` template), or its canonical URL for a
    mirror; the longest first."""
    bases = {}
    for channel, one in zip(request.env.channels, accesses, strict=True):
        mirrored = source_channel(channel, request.mirrors) != channel.rstrip("/")
        bases[one.bare] = base_url(channel) if mirrored else channel.rstrip("/")
    return dict(sorted(bases.items(), key=lambda kv: -len(kv[0])))


def _to_locked(record: Any, platform: str, bases: Mapping[str, str]) -> LockedPackage:
    url = str(record.url)
    for bare, base in bases.items():
        if url.startswith(bare + "/"):
            url = base + url[len(bare) :]
            break
    if not record.md5:
        raise InputError(f"{url}: the channel's record has no md5, which conda-lock v1 requires")
    return LockedPackage(
        name=record.name.normalized,
        version=str(record.version),
        manager="conda",
        platform=platform,
        url=url,
        md5=record.md5.hex(),
        sha256=record.sha256.hex() if record.sha256 else None,
        dependencies=tuple(split_dependency(d) for d in record.depends),
    )
