"""Which node or link is slow, from the pair-wise all-reduces (pure).

A pair is slow when its busbw is below a third of the median of the other pairs, below
``--min-busbw``, or more than ``--tolerance`` below ``--baseline``. A node whose every pair is
slow is the slow node (one finding, its pairs' figures); a slow pair whose two nodes are not
slow is a slow link. A pair that did not finish is a failed all-reduce naming the two nodes.

No node speaks for another (issue 24 M2): a pair's figure comes from the answer of one node, the
one whose rank 0 wrote it (``PairRun.by``). A figure beyond any link (``CEILING_BUSBW``) or more
than ``BEYOND_OTHERS`` times the fastest pair the other nodes reported is that node's finding
(probe-failed, cause ``implausible-busbw``) and is left out before anything is judged slow: it
is never the yardstick of an honest link.
"""

from __future__ import annotations

import statistics

from envtool.judge.findings import Finding, Kind
from envtool.judge.gpu import GpuPolicy
from envtool.judge.rules import severity
from envtool.protocol.types import PairRun, PairsRun

SLOWER_THAN_MEDIAN = 1 / 3  # a pair below a third of the other pairs' median is slow
# 10 TB/s: above any link between two nodes today (NVLink 5 is 1.8 TB/s per GPU, eight 800 Gb/s
# NICs are 800 GB/s); a figure beyond it is not a measurement, whatever the other pairs say
CEILING_BUSBW = 10_000.0
# two orders of magnitude above the fastest pair any other node reported (at least two of them):
# a slow node here measures 10-20x below the others (tests/cluster/test_pairs_netns.py), and in
# bisect both fast pairs may come from one node's rank 0, so one order is not proof of a lie
BEYOND_OTHERS = 100.0
CAUSE_IMPLAUSIBLE = "implausible-busbw"


def busbw(pair: PairRun) -> float | None:
    """The pair's busbw over its largest sizes, None when it did not finish."""
    return pair.result.peak_busbw if pair.result is not None else None


def implausible(run: PairsRun) -> list[tuple[PairRun, float, str]]:
    """Each pair whose figure no link explains, with the limit it passed and what set it."""
    out = []
    for pair in run.pairs:
        value = busbw(pair)
        if value is None:
            continue
        if value > CEILING_BUSBW:
            out.append((pair, CEILING_BUSBW, "the fastest link there is"))
            continue
        theirs = [b for p in run.pairs if p.by != pair.by and (b := busbw(p)) is not None]
        top = max(theirs, default=0.0)
        if len(theirs) >= 2 and value > BEYOND_OTHERS * top:
            out.append(
                (pair, BEYOND_OTHERS * top, f"{BEYOND_OTHERS:.0f}x the other nodes' best {top:.3g}")
            )
    return out


def credible(run: PairsRun) -> PairsRun:
    """``run`` without the pairs whose figure no link explains."""
    bad = {id(p) for p, _, _ in implausible(run)}
    return PairsRun(tuple(p for p in run.pairs if id(p) not in bad), run.rounds, run.seconds)


def _liars(run: PairsRun) -> list[Finding]:
    """One finding per node that reported a figure no link explains, naming its claims."""
    by: dict[str, list[tuple[PairRun, float, str]]] = {}
    for found in implausible(run):
        by.setdefault(found[0].by, []).append(found)
    out = []
    for node, claims in by.items():
        pair, limit, why = min(claims, key=lambda c: c[1])
        told = ", ".join(f"{busbw(p) or 0:.3g} GB/s for {p.a} <-> {p.b}" for p, _, _ in claims)
        hosts = (node,) if node else (pair.a, pair.b)  # who reported it unknown: both
        subject = f"{pair.a} <-> {pair.b}" if len(claims) == 1 else "pair busbw"
        out.append(
            Finding(Kind.PROBE_FAILED, severity(Kind.PROBE_FAILED), subject,
                    f"<= {limit:.3g} GB/s ({why})", f"{node or 'rank 0'} reported {told}",
                    hosts, cause=CAUSE_IMPLAUSIBLE)
        )  # fmt: skip
    return out


def floor(pair: PairRun, measured: list[PairRun], policy: GpuPolicy) -> tuple[float, str] | None:
    """The busbw this pair must reach, and what set it (None: nothing to compare with)."""
    floors: list[tuple[float, str]] = []
    others = [b for p in measured if p is not pair and (b := busbw(p)) is not None]
    if others:
        median = statistics.median(others)
        floors.append((SLOWER_THAN_MEDIAN * median, f"a third of the other pairs' {median:.3g}"))
    if policy.min_busbw is not None:
        floors.append((policy.min_busbw, "--min-busbw"))
    if policy.baseline_busbw is not None:
        floors.append((policy.baseline_busbw * (1 - policy.tolerance), "--baseline"))
    return max(floors) if floors else None


def slow_pairs(run: PairsRun, policy: GpuPolicy) -> list[tuple[PairRun, float, str]]:
    """Each slow pair with the floor it missed and what set that floor."""
    measured = [p for p in run.pairs if busbw(p) is not None]
    out = []
    for pair in measured:
        found = floor(pair, measured, policy)
        value = busbw(pair)
        if found is not None and value is not None and value < found[0]:
            out.append((pair, found[0], found[1]))
    return out


def _figures(pairs: list[PairRun], node: str) -> str:
    parts = []
    for p in pairs:
        other = p.b if p.a == node else p.a
        parts.append(f"{busbw(p) or 0:.3g} GB/s with {other}")
    return ", ".join(parts)


def _slow_nodes(run: PairsRun, slow: list[tuple[PairRun, float, str]]) -> list[str]:
    slow_set = {id(p) for p, _, _ in slow}
    out = []
    for node in sorted({n for p in run.pairs for n in (p.a, p.b)}):
        mine = [p for p in run.pairs if node in (p.a, p.b) and busbw(p) is not None]
        if len(mine) >= 2 and all(id(p) in slow_set for p in mine):
            out.append(node)
    return out


def suspect_links(run: PairsRun, policy: GpuPolicy) -> list[tuple[str, str]]:
    """The slow pairs no slow node explains: measured again alone before they are named (a
    pair that shared a busy machine with others in its round may only have been starved)."""
    run = credible(run)
    slow = slow_pairs(run, policy)
    nodes = set(_slow_nodes(run, slow))
    return [(p.a, p.b) for p, _, _ in slow if p.a not in nodes and p.b not in nodes]


def next_round(run: PairsRun, policy: GpuPolicy, nodes: list[str]) -> list[tuple[str, str]]:
    """bisect's next matching (empty: done): each node not yet cleared (none of its pairs is
    fast) that has fewer than two pairs, beside a node with a fast pair it has not met yet;
    every node at most once. A slow node ends with two slow pairs, a slow link's nodes with a
    fast pair each."""
    honest = credible(run)
    slow = {id(p) for p, _, _ in slow_pairs(honest, policy)}
    fast = {n for p in honest.pairs if p.result is not None and id(p) not in slow
            for n in (p.a, p.b)}  # fmt: skip
    met = {frozenset((p.a, p.b)) for p in run.pairs}
    count = {n: sum(n in (p.a, p.b) for p in run.pairs) for n in nodes}
    suspects = [n for n in nodes if n not in fast and count[n] < 2]
    suspects.sort(key=lambda n: count[n], reverse=True)  # the nodes of slow pairs first
    busy: set[str] = set()
    out = []
    for node in suspects:
        if node in busy:
            continue
        for good in nodes:
            if good in fast and good not in busy and frozenset((node, good)) not in met:
                out.append((node, good))
                busy |= {node, good}
                break
    return out


def decide(run: PairsRun, policy: GpuPolicy) -> list[Finding]:
    """Nodes that reported what no link explains, then slow nodes, slow links and failed
    pairs, judged without those figures."""
    out = [
        Finding(Kind.ALLREDUCE_FAILED, severity(Kind.ALLREDUCE_FAILED), f"{p.a} <-> {p.b}",
                "completes", p.error, (p.a, p.b))
        for p in run.pairs if p.result is None and not p.cause
    ]  # fmt: skip
    kind = Kind.RDZV_PORT_TAKEN  # the pair's store host could not be envtool's
    out += [
        Finding(kind, severity(kind), f"{p.a} <-> {p.b}", "its port free for envtool's store",
                p.error, (p.by or p.a,))
        for p in run.pairs if p.result is None and p.cause
    ]  # fmt: skip
    out += _liars(run)
    run = credible(run)
    slow = slow_pairs(run, policy)
    slow_nodes = _slow_nodes(run, slow)
    for node in slow_nodes:
        mine = [p for p in run.pairs if node in (p.a, p.b) and busbw(p) is not None]
        if mine:
            best = max(f for p, f, _ in slow if id(p) in {id(q) for q in mine})
            out.append(
                Finding(Kind.SLOW_NODE, severity(Kind.SLOW_NODE), node, f">= {best:.3g} GB/s",
                        _figures(mine, node), (node,))
            )  # fmt: skip
    for pair, need, why in slow:
        if pair.a in slow_nodes or pair.b in slow_nodes:
            continue  # that node's finding names it
        out.append(
            Finding(Kind.SLOW_LINK, severity(Kind.SLOW_LINK), f"{pair.a} <-> {pair.b}",
                    f">= {need:.3g} GB/s ({why})", f"{busbw(pair) or 0:.3g} GB/s",
                    (pair.a, pair.b))
        )  # fmt: skip
    return out
