"""Each node's all-reduce against its own fleet's history (pure): for its GPU model and count,
the median busbw the model's nodes reached in the last good runs that measured the same way
(history/store.py ``baselines``); ``allreduce-below-baseline`` (a warning) when a node falls
more than ``tolerance`` below it, naming the median, the spread and the runs it came from.
A fixed threshold fails healthy nodes whose card, link or driver differs; a node held to
its own model's past is not. With fewer than ``MIN_FIGURES`` figures for a model, nothing is
judged and the run says so. A node that already has a ``busbw-low`` (``--min-busbw``,
``--baseline``) gets no second finding for one shortfall."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from envtool.judge.findings import Finding
from envtool.judge.kinds import Kind
from envtool.judge.rules import severity
from envtool.protocol.types import HostReport

MIN_FIGURES = 5


@dataclass(frozen=True)
class FleetBaseline:
    """One GPU model's figures in the history."""

    figures: tuple[float, ...]  # GB/s, one per good host run
    runs: tuple[int, ...]  # the runs they came from


Fleet = Mapping[str, FleetBaseline]  # by model_key: "NVIDIA H100 80GB HBM3 x8"


NO_GPU = "no GPU"  # a CPU node's all-reduce (gloo) is held to the other CPU nodes'


def model_key(name: str, count: int) -> str:
    """What a baseline is kept per: the GPU model and how many a node has."""
    return f"{name} x{count}" if name and count else NO_GPU


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


def check(
    reports: Sequence[HostReport], fleet: Fleet, tolerance: float, found: Sequence[Finding]
) -> list[Finding]:
    """``allreduce-below-baseline`` for each node below its model's median by > tolerance."""
    low = {h for f in found if f.kind is Kind.BUSBW_LOW for h in f.hosts}
    out = []
    for report, key, busbw in _judged(reports):
        base = fleet.get(key)
        if report.host in low or base is None or len(base.figures) < MIN_FIGURES:
            continue
        median = statistics.median(base.figures)
        if busbw < median * (1 - tolerance):
            expected = (f">= {median * (1 - tolerance):.2f} GB/s ({key} fleet median "
                        f"{median:.2f} GB/s - {tolerance:.0%}; {len(base.figures)} figures, "
                        f"{min(base.figures):.2f}-{max(base.figures):.2f}, "
                        f"{_runs(base.runs)})")  # fmt: skip
            kind = Kind.ALLREDUCE_BELOW_BASELINE
            out.append(Finding(kind, severity(kind), "busbw", expected, f"{busbw:.2f} GB/s",
                               (report.host,)))  # fmt: skip
    return out


def unjudged(reports: Sequence[HostReport], fleet: Fleet) -> list[str]:
    """The models this run measured whose history is too short to judge them by (said)."""
    seen: dict[str, int] = {}
    for _, key, _ in _judged(reports):
        seen[key] = len(fleet[key].figures) if key in fleet else 0
    short = sorted((key, n) for key, n in seen.items() if n < MIN_FIGURES)
    return [f"the all-reduce against the fleet's history: {n} figures of {key} in it "
            f"({MIN_FIGURES} needed)" for key, n in short]  # fmt: skip
