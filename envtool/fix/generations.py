"""A prefix's generations, as envtool's own fix uses them: the node package's code
(envtool_node/generations.py, the standard library alone, shared with a node that fixes its
prefix with micromamba, mamba or conda), its errors as envtool's. See that module for how a
switch is made in one step and which processes hold a generation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from envtool.errors import InputError, InstallError
from envtool_node import generations as _node
from envtool_node.generations import (
    PENDING,
    PREVIOUS,
    Generation,
    generations,
    next_path,
    path_of,
    previous,
    stale,
    unfinished,
)
from envtool_node.holders import holders

__all__ = [
    "PENDING", "PREVIOUS", "Generation", "check_writable", "current", "generations", "holders",
    "next_path", "path_of", "previous", "prune", "remove", "restore_original", "roll_back",
    "stale", "switch", "unfinished",
]  # fmt: skip

T = TypeVar("T")


def _as_ours(call: Callable[[], T]) -> T:
    try:
        return call()
    except _node.Refused as exc:
        raise InputError(str(exc)) from None
    except _node.GenerationError as exc:
        raise InstallError(str(exc)) from None


def check_writable(prefix: Path) -> None:
    """InputError when ``P`` or a folder above it is another user's or every user's."""
    _as_ours(lambda: _node.check_writable(prefix))


def current(prefix: Path) -> Generation | None:
    """The generation ``P`` links to (None: a directory); InstallError: a link elsewhere."""
    return _as_ours(lambda: _node.current(prefix))


def switch(prefix: Path, target: Path, gap: bool = False) -> str:
    """``P`` made the generation at ``target`` in one step; how it was done."""
    return _as_ours(lambda: _node.switch(prefix, target, gap))


def restore_original(prefix: Path) -> None:
    """Generation 0 (the directory ``P`` was) back at ``P``, in one step."""
    _as_ours(lambda: _node.restore_original(prefix))


def prune(
    prefix: Path, keep: int, proc: Path
) -> tuple[list[str], list[tuple[str, tuple[int, ...]]], int]:
    """Older generations beyond ``keep`` removed, but one a process holds."""
    return _as_ours(lambda: _node.prune(prefix, keep, proc))


def roll_back(prefix: Path) -> tuple[str, str] | None:
    """``P`` back to its previous generation: (its name now, how); None: never switched."""
    return _as_ours(lambda: _node.roll_back(prefix))


def remove(path: Path) -> None:
    """A generation removed (InstallError when it cannot be)."""
    _as_ours(lambda: _node.remove(path))
