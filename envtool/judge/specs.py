"""A spec list against an environment, pure: which package meets each spec and which one
violates it (``envtool diff`` of a ``conda env export --from-history`` file and a lock).

A conda spec is read and matched by py-rattler's MatchSpec, as ``conda env create`` reads it:
``python=3.9`` asks for 3.9.*, ``pytorch::pytorch>=2`` also for the channel, ``numpy`` for any
numpy. A pip spec is a bare name or what ``pip freeze`` writes (a pin). A package the list
does not name is fine; a build or channel the other side does not state is not judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from envtool import pip_entries
from envtool.judge import critical
from envtool.judge.findings import Finding, Kind
from envtool.judge.rules import severity
from envtool.models import Environment, Package, Requirement, dist_key, normalize

ABSENT, VERSION, BUILD, CHANNEL, MANAGER = "absent", "version", "build", "channel", "manager"
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_BUILD = re.compile(r"[A-Za-z0-9_.+*]+")  # a build string or its glob: no '=', no space
_BARE_PIP = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


@dataclass(frozen=True)
class Outcome:
    """One spec and the package of the other side it names (None: none), ``why`` it is not
    met ("" when it is)."""

    requirement: Requirement
    package: Package | None
    why: str = ""

    @property
    def met(self) -> bool:
        """The package meets the spec."""
        return not self.why


def _match_spec(text: str) -> Any:
    from rattler import MatchSpec

    if _BREAKS.search(text):
        raise ValueError("a spec is one line without control characters")
    try:
        return MatchSpec(text)
    except Exception as exc:  # rattler's InvalidMatchSpecError, a ValueError or another
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"not a package spec ({first[:120]})") from None


def parse(text: str) -> str:
    """The name a conda spec asks for (ValueError: why ``text`` is not a spec)."""
    spec = _match_spec(text)
    if spec.build is not None and not _BUILD.fullmatch(str(spec.build)):
        raise ValueError(f"not a package spec (build {str(spec.build)[:60]!r})")
    name: str = spec.name.normalized
    return name


def parse_pip(text: str) -> str:
    """The name a pip spec asks for: a bare name or a ``- pip:`` line (ValueError: why not)."""
    if _BARE_PIP.fullmatch(text):
        return text
    try:
        return pip_entries.parse(text).name
    except pip_entries.BadEntry as exc:
        raise ValueError(f"{exc} (a pip spec is a bare name or a pin)") from None


def _channel_ok(spec: Any, pkg: Package) -> bool:
    if spec.channel is None or not pkg.channel:
        return True
    name, base = spec.channel.name, str(spec.channel.base_url).rstrip("/")
    if name == "defaults":  # conda's defaults are several channels: pkgs/main, pkgs/r, ...
        return pkg.channel.startswith("pkgs/") or "repo.anaconda.com" in pkg.channel
    return pkg.channel in (name, base) or pkg.channel.rstrip("/") == base


def _conda_why(spec: Any, pkg: Package) -> str:
    from rattler import BuildString, PackageRecord, Version, VersionSpec

    try:
        version = Version(pkg.version)
        if spec.version and not VersionSpec(spec.version).matches(version):
            return VERSION
        if spec.build and pkg.build:  # the whole spec: build glob, build number
            number = re.search(r"_(\d+)$", pkg.build)
            record = PackageRecord(
                pkg.name, pkg.version, BuildString(pkg.build),
                int(number.group(1)) if number else 0, spec.subdir or "noarch",
            )  # fmt: skip
            if not spec.matches(record):
                return BUILD
    except Exception:  # a version or build rattler cannot read meets no range
        return VERSION
    return "" if _channel_ok(spec, pkg) else CHANNEL


def _conda(req: Requirement, env: Environment) -> Outcome:
    name = req.name.lower()
    conda = [p for p in env.packages if p.manager == "conda" and p.name.lower() == name]
    if not conda:
        other = [p for p in env.packages if p.key == dist_key(req.name, "conda")]
        return Outcome(req, other[0], MANAGER) if other else Outcome(req, None, ABSENT)
    spec = _match_spec(req.text)
    outcomes = [Outcome(req, p, _conda_why(spec, p)) for p in conda]
    return next((o for o in outcomes if o.met), outcomes[0])


def _pip(req: Requirement, env: Environment) -> Outcome:
    key = normalize(req.name)
    pip = [p for p in env.packages if p.manager == "pip" and p.key == key]
    if not pip:
        other = [p for p in env.packages if p.key == key]
        return Outcome(req, other[0], MANAGER) if other else Outcome(req, None, ABSENT)
    pinned = "" if _BARE_PIP.fullmatch(req.text) else pip_entries.parse(req.text).version
    outcomes = [Outcome(req, p, VERSION if pinned and p.version != pinned else "") for p in pip]
    return next((o for o in outcomes if o.met), outcomes[0])


def outcomes(specs: Environment, env: Environment) -> list[Outcome]:
    """Each spec of ``specs`` and the package of ``env`` that meets or violates it."""
    return [(_pip if r.manager == "pip" else _conda)(r, env) for r in specs.specs]


def _actual(o: Outcome) -> str:
    p = o.package
    if p is None:
        return "absent"
    if o.why == MANAGER:
        return f"{p.manager} {p.label()}"
    return f"{p.label()} from {p.channel}" if p.channel else p.label()


def _findings(specs: Environment, env: Environment, where: str) -> list[Finding]:
    return [
        Finding(
            Kind.SPEC_UNMET,
            severity(Kind.SPEC_UNMET, ordinary=not critical.package(o.requirement.name)),
            o.requirement.name,
            o.requirement.text + (" (pip)" if o.requirement.manager == "pip" else ""),
            _actual(o),
            cause=o.why,
            where=where,
        )
        for o in outcomes(specs, env)
        if not o.met
    ]


def differences(a: Environment, b: Environment) -> list[Finding]:
    """The specs of A that B's packages violate, or of B that A's do (a spec list is one
    side); a package no spec names is no difference."""
    if a.specs:
        return _findings(a, b, "B")
    return _findings(b, a, "A")
