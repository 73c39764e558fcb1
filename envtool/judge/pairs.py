"""Which node or link is slow, from the pair-wise all-reduces (pure).

A pair is slow when its busbw is below a third of the median of the other pairs, below
``--min-busbw``, or more than ``--tolerance`` below ``--baseline``. A node whose every pair is
slow is the slow node (one finding, its pairs' figures); a slow pair whose two nodes are not
slow is a slow link. A pair that did not finish is a failed all-reduce naming the two nodes.

No node speaks for another (issue 24 M2, issue 33 item 3): both nodes of a pair report their own
figure of the same run (rank 0's node, ``PairRun.by``, and its partner's local rank 0), and the
pair's figure is the lower of the two, so a node that inflates its figure gains nothing (and
one that deflates it makes only its own pairs slow: it names itself). A figure beyond any link
(``CEILING_BUSBW``), beyond ``LINK_MARGIN`` times what the node's own links carry (its network
part: the selected interfaces' speed, its IB ports' rate), or more than ``BEYOND_OTHERS`` times
the fastest pair the other nodes reported is that node's finding (probe-failed, cause
``implausible-busbw``) and is left out before anything is judged slow: it is never the
yardstick of an honest link.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace

from envtool.judge.findings import Finding, Kind
from envtool.judge.gpu import GpuPolicy
from envtool.judge.rules import severity
from envtool.protocol.types import HostReport, PairRun, PairsRun

SLOWER_THAN_MEDIAN = 1 / 3  # a pair below a third of the other pairs' median is slow
# 10 TB/s: above any link between two nodes today (NVLink 5 is 1.8 TB/s per GPU, eight 800 Gb/s
# NICs are 800 GB/s); a figure beyond it is not a measurement, whatever the other pairs say
CEILING_BUSBW = 10_000.0
# two orders of magnitude above the fastest pair any other node reported (at least two of them,
# not all through one node): a slow node here measures 30-100x below the others
# (tests/cluster/test_pairs_netns.py), and in bisect both fast pairs may come from one node's
# rank 0, so one order is not proof of a lie
BEYOND_OTHERS = 100.0
CAUSE_IMPLAUSIBLE = "implausible-busbw"
# busbw can pass what the NICs carry (a 2-node all-reduce's busbw is ~2x its algbw), and a veth
# says a nominal 10 Gb/s while it moves memory: four times the links is no measurement
LINK_MARGIN = 4.0

Ceilings = Mapping[str, float]  # node -> the most busbw (GB/s) its own links can carry


def busbw(pair: PairRun) -> float | None:
    """Rank 0's figure of the pair (its busbw over the largest sizes), None: it did not
    finish."""
    return pair.result.peak_busbw if pair.result is not None else None


def ends(pair: PairRun) -> list[tuple[str, float]]:
    """Each node's own figure of the pair: rank 0's node's, then its partner's."""
    out = [(pair.by, v)] if (v := busbw(pair)) is not None else []
    if pair.partner_busbw is not None and out:
        out.append((pair.partner, pair.partner_busbw))
    return out


def figure(pair: PairRun) -> float | None:
    """The pair's figure: the lower of its two ends' (less those refused), None: none."""
    kept = [v for node, v in ends(pair) if node not in pair.refused]
    return min(kept) if kept else None


def ceilings(reports: Sequence[HostReport]) -> dict[str, float]:
    """Each node's most credible busbw from its network part: LINK_MARGIN times its up IB
    ports' rate plus the speed of the interfaces NCCL and gloo select; no ceiling where one of
    those says no speed (a virtual link) or is loopback (nodes of one machine)."""
    out = {}
    for r in reports:
        net = r.network
        if net is None:
            continue
        chosen = {n for sel in (net.nccl, net.gloo) if sel is not None for n in sel.selected}
        links = [net.interface(n) for n in sorted(chosen)]
        if not links or any(i is None or i.loopback or not i.speed_mbps for i in links):
            continue
        gbps = sum(i.speed_mbps or 0 for i in links if i is not None) / 1000
        ports = net.ib.ports if net.ib is not None else ()
        gbps += sum(p.rate_gbps or 0.0 for p in ports if p.up)
        out[r.host] = LINK_MARGIN * gbps / 8
    return out


def implausible(
    run: PairsRun, links: Ceilings | None = None
) -> list[tuple[PairRun, str, float, str]]:
    """Each end of a pair whose figure no link explains: (pair, its node, the limit it
    passed, what set it)."""
    links = links or {}
    out = []
    for pair in run.pairs:
        for node, value in ends(pair):
            others = [p for p in run.pairs if node not in (p.a, p.b) and figure(p)]
            theirs = [b for p in others if (b := figure(p))]
            top = max(theirs, default=0.0)
            if _one_node(others):  # one slow node may have slowed every one of them
                theirs = []
            if value > CEILING_BUSBW:
                out.append((pair, node, CEILING_BUSBW, "the fastest link there is"))
            elif node in links and value > links[node]:
                why = f"{LINK_MARGIN:.0f}x what {node}'s own links carry"
                out.append((pair, node, links[node], why))
            elif len(theirs) >= 2 and value > BEYOND_OTHERS * top:
                why = f"{BEYOND_OTHERS:.0f}x the other nodes' best {top:.3g}"
                out.append((pair, node, BEYOND_OTHERS * top, why))
    return out


def _one_node(pairs: Sequence[PairRun]) -> bool:
    """Whether one node is in every pair (then they are no yardstick: bisect's pairs all
    meeting a slow node measure that node, not the links)."""
    common = {pairs[0].a, pairs[0].b} if pairs else set()
    for p in pairs[1:]:
        common &= {p.a, p.b}
    return bool(common)


def credible(run: PairsRun, links: Ceilings | None = None) -> PairsRun:
    """``run`` with each figure no link explains refused (the pair keeps its other end's)."""
    refused: dict[int, set[str]] = {}
    for pair, node, _, _ in implausible(run, links):
        refused.setdefault(id(pair), set()).add(node)
    pairs = tuple(
        replace(p, refused=tuple(sorted(refused[id(p)]))) if id(p) in refused else p
        for p in run.pairs
    )
    return PairsRun(tuple(p for p in pairs if figure(p) is not None or p.result is None),
                    run.rounds, run.seconds)  # fmt: skip


def _liars(run: PairsRun, links: Ceilings | None = None) -> list[Finding]:
    """One finding per node that reported a figure no link explains, naming its claims."""
    by: dict[str, list[tuple[PairRun, float, str, float]]] = {}
    for pair, node, limit, why in implausible(run, links):
        value = dict(ends(pair)).get(node, 0.0)
        by.setdefault(node, []).append((pair, limit, why, value))
    out = []
    for node, claims in by.items():
        pair, limit, why, _ = min(claims, key=lambda c: c[1])
        told = ", ".join(f"{v:.3g} GB/s for {p.a} <-> {p.b}" for p, _, _, v in claims)
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
    others = [b for p in measured if p is not pair and (b := figure(p)) is not None]
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
    measured = [p for p in run.pairs if figure(p) is not None]
    out = []
    for pair in measured:
        found = floor(pair, measured, policy)
        value = figure(pair)
        if found is not None and value is not None and value < found[0]:
            out.append((pair, found[0], found[1]))
    return out


def _figures(pairs: list[PairRun], node: str) -> str:
    parts = []
    for p in pairs:
        other = p.b if p.a == node else p.a
        parts.append(f"{figure(p) or 0:.3g} GB/s with {other}")
    return ", ".join(parts)


def _slow_nodes(run: PairsRun, slow: list[tuple[PairRun, float, str]]) -> list[str]:
    slow_set = {id(p) for p, _, _ in slow}
    out = []
    for node in sorted({n for p in run.pairs for n in (p.a, p.b)}):
        mine = [p for p in run.pairs if node in (p.a, p.b) and figure(p) is not None]
        if len(mine) >= 2 and all(id(p) in slow_set for p in mine):
            out.append(node)
    return out


def suspect_links(
    run: PairsRun, policy: GpuPolicy, links: Ceilings | None = None
) -> list[tuple[str, str]]:
    """The slow pairs no slow node explains: measured again alone before they are named (a
    pair that shared a busy machine with others in its round may only have been starved)."""
    run = credible(run, links)
    slow = slow_pairs(run, policy)
    nodes = set(_slow_nodes(run, slow))
    return [(p.a, p.b) for p, _, _ in slow if p.a not in nodes and p.b not in nodes]


def next_round(
    run: PairsRun, policy: GpuPolicy, nodes: list[str], links: Ceilings | None = None
) -> list[tuple[str, str]]:
    """bisect's next matching (empty: done): each node not yet cleared (none of its pairs is
    fast) that has fewer than two pairs, beside a node with a fast pair it has not met yet;
    every node at most once. A slow node ends with two slow pairs, a slow link's nodes with a
    fast pair each."""
    honest = credible(run, links)
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


def decide(run: PairsRun, policy: GpuPolicy, links: Ceilings | None = None) -> list[Finding]:
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
    out += _liars(run, links)
    run = credible(run, links)
    slow = slow_pairs(run, policy)
    slow_nodes = _slow_nodes(run, slow)
    for node in slow_nodes:
        mine = [p for p in run.pairs if node in (p.a, p.b) and figure(p) is not None]
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
                    f">= {need:.3g} GB/s ({why})", f"{figure(pair) or 0:.3g} GB/s",
                    (pair.a, pair.b))
        )  # fmt: skip
    return out
