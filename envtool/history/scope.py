"""What a recorded run checked on each host (pure), so that only a run that looked for a
finding can say it cleared: a host that did not answer was checked for nothing but being
reachable (its drift is not fixed by a night it was down); ``preflight --quick`` imports no
torch and runs no all-reduce (verify's runtime and all-reduce findings outlive it); a host
whose GPU layer, network or limits failed to read was not checked for them; a lone host has
no majority; ``--job-gpus`` judges a part of the GPUs only; a doctor run checks its own steps
(``doctor-<step>``) and says nothing of verify's findings, nor they of its.

A check's name is verify's (judge/kinds.py ``Check``: ``lock``, ``gpu``, ...) or a doctor
step's kind. The store keeps each host's checks with its run; a store written before it kept
them (an empty text) is read as every check, as that envtool did."""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping

from envtool.judge.kinds import Check, Kind
from envtool.judge.rules import check_of
from envtool.protocol.verify_report import HostEntry, VerifyDocument

DOCTOR = "doctor-"  # a doctor step's finding kind: doctor-<step> (envtool/doctor/steps.py)
Checks = Mapping[str, frozenset[str]]  # host → the checks the run made on it


@functools.cache
def check_key(kind: str) -> str:
    """The check a finding belongs to: its kind's (judge/rules.py); a doctor step's kind is
    its own check; an unknown kind (a newer envtool's) is its own check too."""
    if kind.startswith(DOCTOR):
        return kind
    try:
        return check_of(Kind(kind)).value
    except ValueError:
        return kind


def _parts(host: HostEntry, with_pairs: bool) -> set[str]:
    """The checks a host that answered was read for."""
    have = {Check.REACHABLE, Check.CONSISTENCY}
    have |= {Check.LOCK} if host.packages is not None else set()
    have |= {Check.RUNTIME} if host.facts is not None else set()
    have |= {Check.GPU} if host.gpus is not None or host.facts is not None else set()
    have |= {Check.NETWORK} if host.network is not None else set()
    have |= {Check.LIMITS} if host.limits is not None else set()
    have |= {Check.ALLREDUCE} if host.allreduce is not None or with_pairs else set()
    return {c.value for c in have}


def checks(doc: VerifyDocument, partial: Collection[str] = ()) -> dict[str, frozenset[str]]:
    """Per host of a verify, preflight or ``preflight --quick`` report, the checks it made;
    ``partial``: checks the run judged only in part (``--job-gpus``: ``gpu``), left out."""
    answered = [h for h in doc.hosts if h.ok]
    paired = {end for p in doc.pairs if p.busbw is not None for end in (p.a, p.b)}
    out = {}
    for host in doc.hosts:
        made = _parts(host, host.host in paired) if host.ok else {Check.REACHABLE.value}
        if host.ok and len(answered) > 1:
            made.add(Check.MAJORITY.value)
        out[host.host] = frozenset(made - set(partial))
    return out


def text(made: frozenset[str]) -> str:
    """As the store keeps them: sorted, comma-joined (never empty: ``reachable`` at least)."""
    return ",".join(sorted(made))


@functools.cache
def read(kept: str) -> frozenset[str] | None:
    """The store's text back; None for a run recorded before checks were kept (every one)."""
    return frozenset(kept.split(",")) if kept else None


def looked(made: frozenset[str] | None, kind: str) -> bool:
    """Whether a run that made ``made`` looked for a finding of ``kind``."""
    return made is None or check_key(kind) in made
