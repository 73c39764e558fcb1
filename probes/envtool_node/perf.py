"""nccl-tests' sizes and bandwidth formulas (doc/PERFORMANCE.md), the one definition of each.

The all-reduce probe measures with them; envtool imports the same functions for its own
options (``--large 256M``) and for checks. Python 3.9, standard library only.
"""

from __future__ import annotations

import re

ELEM = 4  # float32
_SIZE = re.compile(r"\s*([0-9]+)\s*([KMGT]?)(I?B)?\s*")
LARGE = 256 * 2**20  # nccl-tests' average understates the link: report sizes >= 256 MiB apart


def parse_size(text: str) -> int:
    """``"32M"`` → 33554432: K/M/G/T are powers of two, as in nccl-tests' -b/-e; ValueError
    on anything else."""
    match = _SIZE.fullmatch(text.upper())
    if not match:
        raise ValueError("not a size: %r (use e.g. 8, 64K, 256M, 1G)" % text)
    return int(match.group(1)) << (10 * "_KMGT".index(match.group(2) or "_"))


def sweep(begin: int, end: int, factor: int) -> list[int]:
    """The sizes: begin, begin*f, ... up to end, rounded down to whole float32 elements."""
    out, size = [], max(begin, ELEM)
    while size <= end:
        out.append(size - size % ELEM)
        if factor <= 1:
            break
        size *= factor
    return out


def algbw(size_bytes: int, time_us: float) -> float:
    """Algorithm bandwidth in decimal GB/s: bytes / 1e9 per second of one call."""
    if time_us <= 0:
        raise ValueError("time must be positive, got %r" % time_us)
    return size_bytes / 1e9 / (time_us / 1e6)


def busbw(algbw_gbps: float, nranks: int) -> float:
    """All-reduce bus bandwidth: algbw * 2(n-1)/n (0 for a single rank)."""
    if nranks < 1:
        raise ValueError("nranks must be at least 1, got %r" % nranks)
    return algbw_gbps * 2 * (nranks - 1) / nranks
