"""Each node's all-reduce against its own fleet's history (pure): for its GPU model and count,
the median busbw the model's nodes reached in the last good runs that measured the same way
(history/store.py ``baselines``); ``allreduce-below-baseline`` (a warning) when a node falls
more than ``tolerance`` below it, naming the median, the spread and the runs it came from.
A fixed threshold fails healthy nodes whose card, link or driver differs; a node held to
its own model's past is not. With fewer than ``MIN_FIGURES`` figures for a model, nothing is
judged and the run says so. A node that already has a ``busbw-low`` (``--min-busbw``,
``--baseline``) gets no second finding for one shortfall."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from envtool.judge.findings import Finding
from envtool.judge.kinds import Kind
from envtool.judge.rules import severity
from envtool.protocol.types import HostReport, PairRun

MIN_FIGURES = 5
SIZE_FLOOR = 1 << 20  # from here up each size is judged on its own: the bandwidth-bound sizes
# (DDP's gradient buckets are 25 MiB); below it a figure is latency, too noisy to hold a node to


@dataclass(frozen=True)
class FleetBaseline:
    """One GPU model's figures in the history."""

    figures: tuple[float, ...]  # GB/s, one per good host run: its peak
    runs: tuple[int, ...]  # the runs they came from
    sizes: tuple[tuple[int, tuple[float, ...]], ...] = ()  # from SIZE_FLOOR: each size's figures


Fleet = Mapping[str, FleetBaseline]  # by model_key: "NVIDIA H100 80GB HBM3 x8"


NO_GPU = "no GPU"  # a CPU node's all-reduce (gloo) is held to the other CPU nodes'


def model_key(name: str, count: int) -> str:
    """What a baseline is kept per: the GPU model and how many a node has."""
    return f"{name} x{count}" if name and count else NO_GPU


def card_key(index: int, uuid: str) -> str:
    """One card across runs: its UUID, else its index on the node."""
    return uuid or f"index {index}"


def key_of(report: HostReport) -> str:
    """The node's GPU model and count, as the store keys it ("" without its facts)."""
    facts = report.facts
    if facts is None:
        return ""
    first = facts.devices[0].name if facts.devices else ""
    return model_key(first, len(facts.devices))


def _judged(reports: Sequence[HostReport]) -> list[tuple[HostReport, str, float]]:
    out = []
    for r in reports:
        ar = r.allreduce
        if ar is not None and not ar.member and ar.peak_busbw is not None and key_of(r):
            out.append((r, key_of(r), ar.peak_busbw))
    return out


def _runs(runs: tuple[int, ...]) -> str:
    return f"run {runs[0]}" if len(runs) == 1 else f"runs {runs[0]}-{runs[-1]}"


Pinned = Sequence[tuple[str, float | None, float | None]]  # --policy: model, busbw, floor


def _finding(host: str, floor: float, why: str, busbw: float, at: str = "") -> Finding:
    kind = Kind.ALLREDUCE_BELOW_BASELINE
    return Finding(kind, severity(kind), "busbw", f">= {floor:.2f} GB/s{at} ({why})",
                   f"{busbw:.2f} GB/s{at}", (host,))  # fmt: skip


def _size(n: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor and n % factor == 0:
            return f"{n // factor} {unit}"
    return f"{n} bytes"


def _worst_size(
    report: HostReport, base: FleetBaseline
) -> tuple[float, int, float, float, tuple[float, ...]] | None:
    """The node's size furthest below its model's median at that size (ratio, bytes, its
    figure, the median, the figures), among the sizes from ``SIZE_FLOOR`` it ran that the
    history holds enough figures of; None where there is none (judged by the peak)."""
    rows = report.allreduce.rows if report.allreduce is not None else ()
    mine = {r.size: max(r.oop.busbw, r.ip.busbw) for r in rows if r.size >= SIZE_FLOOR}
    worst = None
    for size, figures in base.sizes:
        median = statistics.median(figures) if len(figures) >= MIN_FIGURES else 0.0
        if size in mine and median > 0 and math.isfinite(mine[size]):
            ratio = mine[size] / median
            if worst is None or ratio < worst[0]:
                worst = (ratio, size, mine[size], median, figures)
    return worst


def _spread(key: str, median: float, tolerance: float, figures: tuple[float, ...],
            runs: tuple[int, ...], at: str = "") -> str:  # fmt: skip
    return (f"{key} fleet median {median:.2f} GB/s - {tolerance:.0%}{at}; {len(figures)} "
            f"figures, {min(figures):.2f}-{max(figures):.2f}, {_runs(runs)}")  # fmt: skip


def check(
    reports: Sequence[HostReport],
    fleet: Fleet,
    tolerance: float,
    found: Sequence[Finding],
    pinned: Pinned = (),
) -> list[Finding]:
    """``allreduce-below-baseline`` for each node below its model's floor (``--policy``), or
    more than ``tolerance`` below its model's baseline: the policy's pinned figure, else the
    fleet's median at each size from ``SIZE_FLOOR`` the history holds (one finding, at the
    node's worst size), else the fleet's median peak."""
    low = {h for f in found if f.kind is Kind.BUSBW_LOW for h in f.hosts}
    policy = {model: (busbw, floor) for model, busbw, floor in pinned}
    out = []
    for report, key, busbw in _judged(reports):
        if report.host in low:
            continue
        pin, floor = policy.get(key, (None, None))
        if floor is not None and busbw < floor:
            out.append(_finding(report.host, floor, f"the policy's floor for {key}", busbw))
            continue
        base = fleet.get(key)
        worst = _worst_size(report, base) if pin is None and base is not None else None
        if base is not None and worst is not None:
            ratio, size, figure, median, figures = worst
            if ratio < 1 - tolerance:
                why = _spread(key, median, tolerance, figures, base.runs, " at that size")
                out.append(_finding(report.host, median * (1 - tolerance), why, figure,
                                    f" at {_size(size)}"))  # fmt: skip
            continue
        if pin is not None:
            median, why = pin, f"the policy's baseline for {key} {pin:.2f} GB/s - {tolerance:.0%}"
        elif base is not None and len(base.figures) >= MIN_FIGURES:
            median = statistics.median(base.figures)
            why = _spread(key, median, tolerance, base.figures, base.runs)
        else:
            continue
        if busbw < median * (1 - tolerance):
            out.append(_finding(report.host, median * (1 - tolerance), why, busbw))
    return out


def unjudged(reports: Sequence[HostReport], fleet: Fleet, pinned: Pinned = ()) -> list[str]:
    """The models this run measured whose history is too short to judge them by (said),
    but those the policy pins."""
    seen: dict[str, int] = {}
    for _, key, _ in _judged(reports):
        seen[key] = len(fleet[key].figures) if key in fleet else 0
    pins = {model for model, busbw, _ in pinned if busbw is not None}
    short = sorted((key, n) for key, n in seen.items() if n < MIN_FIGURES and key not in pins)
    return [f"the all-reduce against the fleet's history: {n} figures of {key} in it "
            f"({MIN_FIGURES} needed)" for key, n in short]  # fmt: skip


Past = Mapping[tuple[str, str], tuple[int, int, int]]  # (host, card) → width, MiB, last run


def gpu_drift(reports: Sequence[HostReport], past: Past, found: Sequence[Finding]) -> list[Finding]:
    """``gpu-figure-dropped``: a card's PCIe link narrower, or its memory total smaller, than
    that same card (by UUID, on that host) reported in the history's last runs; not again
    where the card's own maximum already explains the width (``gpu-pcie-degraded``)."""
    said = {(h, f.subject) for f in found if f.kind is Kind.GPU_PCIE_DEGRADED for h in f.hosts}
    kind, out = Kind.GPU_FIGURE_DROPPED, []
    for report in reports:
        for d in report.gpus.devices if report.gpus is not None else ():
            width, mib, run = past.get((report.host, card_key(d.index, d.uuid)), (0, 0, 0))
            subject = f"GPU {d.index}"
            now_w, now_m = d.pcie_width_current, d.memory_total_mib
            if now_w is not None and now_w < width and (report.host, subject) not in said:
                out.append(Finding(kind, severity(kind), subject, f"PCIe x{width} (run {run})",
                                   f"PCIe x{now_w}", (report.host,)))  # fmt: skip
            if now_m is not None and now_m < mib:
                out.append(Finding(kind, severity(kind), subject, f"{mib} MiB (run {run})",
                                   f"{now_m} MiB", (report.host,)))  # fmt: skip
    return out


PAIR_KINDS = (Kind.SLOW_NODE, Kind.SLOW_LINK, Kind.BUSBW_LOW)  # a pair's shortfall, said


def check_pairs(
    reports: Sequence[HostReport],
    pairs: Sequence[PairRun],
    fleet: Fleet,
    tolerance: float,
    found: Sequence[Finding],
) -> list[Finding]:
    """``allreduce-below-baseline`` for each pair of nodes of one model whose figure (the
    lower of its two ends') is more than ``tolerance`` below that model's pairs' median in the
    history: what a run whose pairs are all slow alike (no slow node, no slow link among
    them) cannot say itself. Not again for a pair whose node or link is already named."""
    keys = {r.host: key_of(r) for r in reports}
    named = {h for f in found if f.kind in PAIR_KINDS for h in f.hosts}
    out = []
    for pair in pairs:
        ends = [pair.result.peak_busbw if pair.result is not None else None, pair.partner_busbw]
        figures = [f for f in ends if f is not None]
        key = keys.get(pair.a, "")
        base = fleet.get(key)
        if (not figures or not key or keys.get(pair.b) != key or base is None
                or len(base.figures) < MIN_FIGURES or {pair.a, pair.b} & named):  # fmt: skip
            continue
        median, busbw = statistics.median(base.figures), min(figures)
        if busbw < median * (1 - tolerance):
            kind = Kind.ALLREDUCE_BELOW_BASELINE
            expected = (f">= {median * (1 - tolerance):.2f} GB/s ({key} pairs' fleet median "
                        f"{median:.2f} GB/s - {tolerance:.0%}; {len(base.figures)} figures, "
                        f"{_runs(base.runs)})")  # fmt: skip
            out.append(Finding(kind, severity(kind), f"{pair.a} <-> {pair.b}", expected,
                               f"{busbw:.2f} GB/s", (pair.a, pair.b)))  # fmt: skip
    return out


def unjudged_pairs(
    reports: Sequence[HostReport], pairs: Sequence[PairRun], fleet: Fleet
) -> list[str]:
    """The models whose pairs this run measured but whose history is too short (said)."""
    keys = {r.host: key_of(r) for r in reports}
    seen = {keys[p.a] for p in pairs if keys.get(p.a) and keys.get(p.a) == keys.get(p.b)}
    return [f"the pairs' all-reduce against the fleet's history: {n} figures of {key} in it "
            f"({MIN_FIGURES} needed)" for key in sorted(seen)
            if (n := len(fleet[key].figures) if key in fleet else 0) < MIN_FIGURES]  # fmt: skip
