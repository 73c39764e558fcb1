"""Node lists as Slurm's hostlist reads them (what ``scontrol show hostnames`` prints).

Slurm reads ``prefix[ranges]suffix`` as the prefix, everything before ``[`` with its digits,
followed by each number of each range, zero-padded to the width its own low bound is written
with: ``dummy26[1-100]`` is ``dummy261`` … ``dummy26100``, 100 names (Slurm's FAQ), where
ClusterShell folds the prefix's digits into the number (``dummy[261-26100]``, 25,840 names).
``n[01-9]`` pads to 2, ``n[1-010]`` does not pad, ``n[005,4]`` is ``n005 n4``. Several bracket
groups expand as Slurm's ``_push_range_list`` does (src/common/hostlist.c); text after the
last ``]`` is read as Slurm does since 23.02.5. A step (``[1-9/2]``) is ClusterShell's syntax,
not Slurm's: it is parsed here and ``hosts`` checks it against ClusterShell's reading.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from envtool.errors import shown

MAX_DIGITS = 18  # a range bound: 10**18 is past any cluster (int() refuses 4,300 digits)
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+)(?:/([0-9]+))?)?")
_GROUP = re.compile(r"\[([^\[\]]*)\]")


class Span(NamedTuple):
    """``01-16`` in ``gpu[01-16]``: the numbers ``low``..``high`` every ``step``, padded.
    (A NamedTuple: a fragmented allocation is 100,000 of them, made at twice the speed.)"""

    low: int
    high: int
    width: int
    step: int = 1

    def numbers(self) -> list[str]:
        """Each number as Slurm prints it (``%0*lu``: zero-padded to ``width``)."""
        return [str(n).zfill(self.width) for n in range(self.low, self.high + 1, self.step)]


@dataclass(frozen=True)
class Pattern:
    """``rack[1-2]-node[01-02]``: ``texts`` around ``groups`` (one more text than groups)."""

    texts: tuple[str, ...]
    groups: tuple[tuple[Span, ...], ...]

    @property
    def stepped(self) -> bool:
        """Whether a range has a step (ClusterShell's syntax; Slurm refuses it)."""
        return any(span.step != 1 for group in self.groups for span in group)

    @property
    def digit_beside_a_bracket(self) -> bool:
        """A digit right before a ``[`` or after a ``]``: there ClusterShell reads the
        digit as part of the number and Slurm as part of the name."""
        return any(
            self.texts[i][-1:].isdigit() or self.texts[i + 1][:1].isdigit()
            for i in range(len(self.groups))
        )


def _span(text: str) -> Span:
    if text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS:  # one number: most
        return Span(int(text), int(text), len(text))
    match = _RANGE.fullmatch(text)
    if not match:
        raise ValueError(f"{shown(text, 40)} is not a number or a range of numbers")
    low, high, step = match.groups()
    if max(len(low), len(high or ""), len(step or "")) > MAX_DIGITS:
        raise ValueError(f"a range bound of more than {MAX_DIGITS} digits")
    span = Span(int(low), int(high or low), len(low), int(step or 1))
    if span.low > span.high:
        raise ValueError(f"the range {shown(text, 40)} runs backwards")
    if span.step < 1:
        raise ValueError(f"the range {shown(text, 40)} has a step of 0")
    return span


def parse(item: str) -> Pattern:
    """One comma-free item of a node list; a ValueError saying what is wrong with it."""
    parts = _GROUP.split(item)
    texts = tuple(parts[0::2])
    if any("[" in text or "]" in text for text in texts):
        raise ValueError("brackets that do not pair up")
    groups = tuple(tuple(_span(text) for text in content.split(",")) for content in parts[1::2])
    return Pattern(texts, groups)


def _order(n: int) -> list[int]:
    """The nesting of ``n`` bracket groups, outermost first, as Slurm's ``_push_range_list``
    recurses: the last group innermost, the others from the one nearest it outwards
    (``a[1-2]b[1-2]c[1-2]`` is a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1 …)."""
    return [*range(n - 2, -1, -1), n - 1] if n else []


def expand(pattern: Pattern) -> Iterator[str]:
    """The names, in Slurm's order, duplicates kept (``tux[0,0,1]`` is tux0 tux0 tux1)."""
    if not pattern.groups:
        yield pattern.texts[0]
        return
    order = _order(len(pattern.groups))
    numbers = [[s for span in pattern.groups[i] for s in span.numbers()] for i in order]
    where = {group: position for position, group in enumerate(order)}
    for combo in itertools.product(*numbers):
        pieces = [pattern.texts[0]]
        for i, text in enumerate(pattern.texts[1:]):
            pieces += (combo[where[i]], text)
        yield "".join(pieces)


def top_level(expr: str) -> list[str]:
    """``gpu[1,3],login1`` -> ``["gpu[1,3]", "login1"]``: split at commas outside brackets."""
    if "[" not in expr:
        return expr.split(",")
    items, depth, start = [], 0, 0
    for match in re.finditer(r"[\[\],]", expr):
        ch = match.group()
        if ch == ",":
            if depth == 0:
                items.append(expr[start : match.start()])
                start = match.end()
        else:
            depth += 1 if ch == "[" else -1
    items.append(expr[start:])
    return items


def _range_size(text: str) -> int:
    """How many numbers ``01-16,20,30-40/2`` names (0 when it is not a range list); a
    ValueError for a bound of more than MAX_DIGITS digits."""
    total = 0
    for item in text.split(","):
        span, _, step = item.partition("/")
        low, _, high = span.partition("-")
        if not low.isdigit() or (high and not high.isdigit()) or (step and not step.isdigit()):
            return 0
        if max(len(low), len(high), len(step)) > MAX_DIGITS:
            raise ValueError(f"a range bound of more than {MAX_DIGITS} digits")
        count = int(high) - int(low) + 1 if high else 1
        total += max(0, -(-count // int(step)) if step and int(step) else count)
    return total


def planned_size(expr: str) -> int:
    """How many names a node-set expression expands to, counted before anything is built
    (``n[1-100000000]`` must not be expanded to learn that it is too large)."""
    total = 0
    for pattern in top_level(expr):
        size = 1
        for group in re.findall(r"\[([^\]]*)\]", pattern):
            size *= _range_size(group) or 1
        total += size
    return total
