"""Which nccl-tests collective a run measured: from the binary's name, else from its rows. Pure.

From NVIDIA/nccl-tests (commit a0b82b2, v2.19.6):

- ``src/Makefile`` builds ``BIN_FILES_LIST`` as ``<name>_perf`` plus ``NAME_SUFFIX`` (``_mpi``
  for MPI builds); ``main`` in ``src/common.cu`` keeps argv[0]'s base name, which
  ``writeDeviceReport`` (``src/util.cu``) prints as ``# Collective test starting: NAME``, and
  ``writeResultFooter`` as ``# Collective test concluded: NAME`` (commit dafb704, from v2.16.7).
- a row is ``size count type redop root`` (``TimeTest`` in ``src/common.cu``): size is
  ``max(sendBytes, recvBytes)``, count the per-rank element count, so size is count x word for
  all_reduce, broadcast, reduce and sendrecv and count x word x nranks for the others
  (each ``*GetCollByteCount``); redop is the op's name where the test loops over ops
  (all_reduce, reduce_scatter, reduce, sendrecv), ``none`` elsewhere, ``""`` for hypercube;
  root is -1 but for broadcast, reduce, gather and scatter (0 by default);
- busbw is algbw x 2(n-1)/n for all_reduce, x (n-1)/n for reduce_scatter, all_gather,
  alltoall(v), gather and scatter, x 1 for broadcast, reduce, sendrecv and hypercube
  (each ``*GetBw``);
- sendrecv and alltoall report no in-place check (``reportErrors = in_place ? 0 : 1``, the
  in-place #wrong is ``N/A``; alltoall only from 2022-09, commit a0a1491).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from envtool.errors import InputError
from envtool.nccl.model import COLUMNS_OLD, NcclResult, NcclRow, NcclRun

COLLECTIVES = (
    "all_reduce", "all_gather", "broadcast", "reduce_scatter", "reduce", "alltoall",
    "alltoallv", "scatter", "gather", "sendrecv", "hypercube",
)  # fmt: skip
_PROGRAM = re.compile(r"(?P<name>[a-z_]+?)_perf(?:_[A-Za-z0-9]+)?(?:\.exe)?")
_WORD = {
    "int8": 1,
    "uint8": 1,
    "char": 1,
    "f8e4m3": 1,
    "f8e5m2": 1,
    "half": 2,
    "bfloat16": 2,
    "int32": 4,
    "uint32": 4,
    "int": 4,
    "float": 4,
    "int64": 8,
    "uint64": 8,
    "double": 8,
}  # fmt: skip  (test_typenames in src/common.cu, old and new)
# alltoallv (2026-03) came after the "# Collective test starting:" line: its logs name it
_GUESSED = tuple(c for c in COLLECTIVES if c != "alltoallv")
_REDUCING = {"all_reduce", "reduce_scatter", "reduce", "sendrecv"}
_ROOTED = {"broadcast", "reduce", "gather", "scatter"}
_WHOLE = {"all_reduce", "broadcast", "reduce", "sendrecv"}
_SPLIT = set(_GUESSED) - _WHOLE
_NO_IN_PLACE_CHECK = {"sendrecv", "alltoall"}
_BUS_TWICE, _BUS_ONCE = {"all_reduce"}, {"broadcast", "reduce", "sendrecv", "hypercube"}


def from_program(program: str) -> str | None:
    """``all_reduce_perf`` (``_mpi``, ``.exe``) -> ``all_reduce``; None for another binary."""
    match = _PROGRAM.fullmatch(program)
    name = match.group("name") if match else None
    return name if name in COLLECTIVES else None


def _checked(r: NcclResult) -> bool:
    return r.wrong is not None or r.max_error is not None


def _by_op(rows: Sequence[NcclRow]) -> set[str] | None:
    ops = {r.redop for r in rows}
    if ops == {"none"}:
        return set(_GUESSED) - _REDUCING - {"hypercube"}
    return _REDUCING if "none" not in ops else None


def _by_root(rows: Sequence[NcclRow], columns: int) -> set[str] | None:
    if columns == COLUMNS_OLD:  # no root column before 2.13
        return None
    return _ROOTED if any(r.root >= 0 for r in rows) else set(_GUESSED) - _ROOTED


def _by_count(rows: Sequence[NcclRow], nranks: int | None) -> set[str] | None:
    ratios = {r.size / (r.count * _WORD[r.type]) for r in rows if r.count and r.type in _WORD}
    if ratios == {1.0} and nranks != 1:
        return _WHOLE
    if len(ratios) == 1 and ratios != {1.0} and nranks in (None, *ratios):
        return _SPLIT
    return None


def _by_check(rows: Sequence[NcclRow], columns: int) -> set[str] | None:
    if any(_checked(r.oop) and not _checked(r.ip) for r in rows):
        return _NO_IN_PLACE_CHECK
    if not any(_checked(r.ip) for r in rows):
        return None
    checked = set(_GUESSED) - {"sendrecv"}  # alltoall checked in place before 2.13 (12 fields)
    return checked if columns == COLUMNS_OLD else checked - {"alltoall"}


def _factor(collective: str, n: int) -> float:
    if collective in _BUS_TWICE:
        return 2 * (n - 1) / n
    return 1.0 if collective in _BUS_ONCE else (n - 1) / n


def _by_busbw(rows: Sequence[NcclRow], nranks: int | None) -> set[str] | None:
    """busbw / algbw of the row with the most algbw (two decimals printed: >= 1 GB/s)."""
    if not nranks or not rows:
        return None
    top = max(rows, key=lambda r: r.oop.algbw).oop
    if top.algbw < 1.0:
        return None
    return {
        c
        for c in _GUESSED
        if abs(top.busbw - top.algbw * _factor(c, nranks)) <= 0.01 + 0.01 * top.busbw
    }


def fits(rows: Sequence[NcclRow], columns: int, nranks: int | None) -> tuple[str, ...]:
    """The collectives a run's rows fit (in COLLECTIVES' order, never empty; alltoallv only
    by name): each piece of
    evidence narrows the set, unless it would leave nothing (a fork's own arithmetic)."""
    found = set(_GUESSED)
    tests: tuple[Callable[[], set[str] | None], ...] = (
        lambda: _by_op(rows),
        lambda: _by_root(rows, columns),
        lambda: _by_count(rows, nranks),
        lambda: _by_check(rows, columns),
        lambda: _by_busbw(rows, nranks),
    )
    for test in tests:
        narrowed = test()
        if narrowed is not None and found & narrowed:
            found &= narrowed
    return tuple(c for c in COLLECTIVES if c in found)


def identify(
    program: str | None, rows: Sequence[NcclRow], columns: int, nranks: int | None
) -> tuple[str | None, tuple[str, ...]]:
    """The collective (None: not known) and, when the log does not name it, what its rows fit."""
    named = from_program(program) if program else None
    if named is not None:
        return named, ()
    found = fits(rows, columns, nranks)
    return (found[0] if len(found) == 1 else None), found


def _article(text: str) -> str:
    return f"an {text}" if text[0] in "aeiou" else f"a {text}"


def what_run(run: NcclRun) -> str:
    """What a run measured, for a sentence: ``an all_gather_perf log``, ``an all_gather log
    (by its rows)``, ``a log whose rows fit all_gather or alltoall``."""
    if run.program:
        return f"{_article(run.program)} log"
    if run.collective:
        return f"{_article(run.collective)} log (by its rows; it names no collective)"
    return f"a log whose rows fit {' or '.join(run.fits) or 'no nccl-tests collective'}"


def require_all_reduce(run: NcclRun) -> NcclRun:
    """The run when it is (or may be) an all-reduce; InputError naming what it is otherwise."""
    if run.may_be_all_reduce:
        return run
    held = ", ".join(s.program or s.collective or "unknown" for s in run.skipped)
    held = f" (its other runs: {held}; none is all_reduce)" if held else ""
    raise InputError(f"{run.source}: {what_run(run)}, not all_reduce{held}")
