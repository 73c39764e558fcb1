"""``envtool fix``'s plan for one prefix: what to add, replace and remove so that it holds
exactly the lock (pip's distributions too: a pip copy shadowing the lock's conda package, a
pip distribution the lock does not hold), as pip-tools' ``diff()`` is to its ``sync()``.
Pure: environments in, a plan out; the generation that carries it out is fix/apply.py. Also
which verify findings an install fixes, and which it does not (said beside the plan)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from envtool.judge.packages import same_artifact
from envtool.models import Environment, Package
from envtool.protocol.verify_report import FindingEntry, VerifyDocument


@dataclass(frozen=True)
class Change:
    """One package the prefix must change: ``before`` None is an add, ``after`` None a remove."""

    before: Package | None
    after: Package | None

    @property
    def action(self) -> str:
        """``add``, ``replace`` or ``remove``."""
        if self.before is None:
            return "add"
        return "remove" if self.after is None else "replace"

    @property
    def manager(self) -> str:
        """conda or pip."""
        named = self.after or self.before
        assert named is not None
        return named.manager

    @property
    def name(self) -> str:
        """The package's name (the lock's, where it has one)."""
        named = self.after or self.before
        assert named is not None
        return named.name


@dataclass(frozen=True)
class Plan:
    """What one prefix needs; empty when it is the lock already."""

    changes: tuple[Change, ...] = ()

    @property
    def empty(self) -> bool:
        """Whether the prefix holds exactly the lock."""
        return not self.changes

    def count(self, action: str) -> int:
        """How many changes of one action (add, replace, remove)."""
        return sum(1 for c in self.changes if c.action == action)


def _index(packages: Iterable[Package]) -> dict[tuple[str, str], Package]:
    return {(p.manager, p.key): p for p in packages}


def _differs(locked: Package, have: Package) -> bool:
    if (locked.name, locked.version, locked.build) != (have.name, have.version, have.build):
        return True
    return same_artifact(locked, have) is False  # another file of the same name (a rebuild)


def plan(lock: Environment, prefix: Environment) -> Plan:
    """The changes that make ``prefix`` the lock, ordered: removes, replaces, adds, by name."""
    want, have = _index(lock.packages), _index(prefix.packages)
    changes = [Change(have[k], None) for k in sorted(have) if k not in want]
    changes += [Change(have[k], want[k]) for k in sorted(want)
                if k in have and _differs(want[k], have[k])]  # fmt: skip
    changes += [Change(None, want[k]) for k in sorted(want) if k not in have]
    order = {"remove": 0, "replace": 1, "add": 2}
    return Plan(tuple(sorted(changes, key=lambda c: (order[c.action], c.name))))


def fixed_by_install(kind: str) -> bool:
    """Whether an install of the lock into a new generation fixes a verify finding of this
    kind (the lock's and a prefix's own consistency kinds: a record, a version, a build, a
    pip copy over conda's): the rest (a driver, a busy GPU, PYTHONPATH, /dev/shm, an
    interface) is not envtool's to fix."""
    from envtool.judge.rules_packages import CONSISTENCY_RULES, LOCK_RULES

    return kind in {k.value for k in (*LOCK_RULES, *CONSISTENCY_RULES)}


def not_fixed(doc: VerifyDocument, host: str) -> tuple[FindingEntry, ...]:
    """The verify report's errors and warnings on ``host`` that an install does not fix."""
    return tuple(f for f in doc.findings if host in f.hosts and f.severity != "info"
                 and not fixed_by_install(f.kind))  # fmt: skip


def still_drifted(doc: VerifyDocument) -> tuple[str, ...]:
    """The hosts whose report still shows an error an install fixes (after a fix: none)."""
    return tuple(sorted({h for f in doc.findings if f.severity == "error"
                         and fixed_by_install(f.kind) for h in f.hosts}))  # fmt: skip
