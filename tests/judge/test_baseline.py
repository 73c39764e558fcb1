"""Each node's all-reduce against its GPU model's median in the fleet's own history
(judge/baseline.py), and the store's side of it (history/store.py ``baselines``): a node
slowed below its model's median is ``allreduce-below-baseline`` while its healthy peers are
not; another model is held to its own peers, not to the fastest; too little history is said,
not judged; a node's bad runs and runs measured differently are no part of a baseline."""

from __future__ import annotations

from pathlib import Path

from envtool.history import queries, store
from envtool.judge import baseline
from envtool.judge.findings import Finding
from envtool.judge.kinds import Kind, Severity
from envtool.nccl.model import NcclResult, NcclRow
from envtool.protocol.types import AllReduceResult, Device, HostReport, NodeFacts
from envtool.protocol.verify_report import AllReduceEntry, FindingEntry, HostEntry, VerifyDocument
from envtool.report.verify import document

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"


def _report(host: str, model: str, busbw: float, gpus: int = 8) -> HostReport:
    part = NcclResult(1000.0, busbw * 0.57, busbw, 0)
    row = NcclRow(256 * 2**20, 64 * 2**20, "float", "sum", -1, part, part)
    facts = NodeFacts(host, "3.9.18", devices=tuple(Device(i, model) for i in range(gpus)))
    return HostReport(host, facts=facts, allreduce=AllReduceResult("nccl", gpus, rows=(row,)))


FLEET = {
    f"{H100} x8": baseline.FleetBaseline((380.0, 381.0, 379.0, 383.0, 377.0, 380.0), (1, 2, 3)),
    f"{A100} x8": baseline.FleetBaseline((225.0, 224.0, 226.0, 223.0, 227.0), (1, 2, 3)),
}


def test_the_slow_node_of_its_model_and_not_its_peers_or_another_model() -> None:
    reports = [_report("gpu1", H100, 381.0), _report("gpu2", H100, 290.0),
               _report("gpu3", A100, 224.0)]  # fmt: skip
    [found] = baseline.check(reports, FLEET, 0.10, [])
    assert (found.kind, found.severity, found.hosts) == (
        Kind.ALLREDUCE_BELOW_BASELINE, Severity.WARNING, ("gpu2",))  # fmt: skip
    assert found.actual == "290.00 GB/s"
    assert "fleet median 380.00 GB/s - 10%" in found.expected and "runs 1-3" in found.expected
    assert "377.00-383.00" in found.expected  # the spread it was taken from


def _sweep(host: str, figures: dict[int, float]) -> HostReport:
    """A node's sweep: each size's busbw (GB/s), the largest its peak."""
    rows = tuple(
        NcclRow(
            size,
            size // 4,
            "float",
            "sum",
            -1,
            NcclResult(1.0, f * 0.57, f, 0),
            NcclResult(1.0, f * 0.57, f, 0),
        )
        for size, f in sorted(figures.items())
    )
    facts = NodeFacts(host, "3.9.18", devices=tuple(Device(i, H100) for i in range(8)))
    return HostReport(host, facts=facts, allreduce=AllReduceResult("nccl", 8, rows=rows))


HEALTHY = {256 << 10: 20.0, 2 << 20: 110.0, 8 << 20: 250.0, 32 << 20: 370.0}  # an H100 x8


def test_a_node_slow_at_ddps_bucket_sizes_but_not_at_its_peak_is_named_at_that_size(
    tmp_path: Path,
) -> None:
    """Six healthy nights of gpu1-gpu3 recorded with their sweeps (the store keeps each size
    from 1 MiB up per model); then gpu2 reaches its usual peak at 32 MiB but half its 8 MiB
    figure (a protocol or algorithm choice gone wrong shows so): the peak alone passes it;
    the sizes name it, once, at 8 MiB. A 256 KiB figure (latency, noise) is never held to."""
    with store.opened(tmp_path / "h.sqlite") as db:
        for night in range(6):
            nodes = [_sweep(h, {s: f * (0.99 + night % 3 / 100) for s, f in HEALTHY.items()})
                     for h in ("gpu1", "gpu2", "gpu3")]  # fmt: skip
            store.record(db, document_of(nodes), "verify", float(night), "node -b 8 -e 32M")
        fleet = queries.baselines(db, "node -b 8 -e 32M")
    key = f"{H100} x8"
    assert [size for size, _ in fleet[key].sizes] == [2 << 20, 8 << 20, 32 << 20]
    assert all(len(f) == 18 for _, f in fleet[key].sizes)
    slow = {**HEALTHY, 8 << 20: 125.0, 256 << 10: 2.0}
    noisy = {**HEALTHY, 256 << 10: 2.0}  # only its latency-bound size is low
    now = [_sweep("gpu1", HEALTHY), _sweep("gpu2", slow), _sweep("gpu3", noisy)]
    assert (
        baseline.check(
            now, {key: baseline.FleetBaseline(fleet[key].figures, fleet[key].runs)}, 0.10, []
        )
        == []
    )
    [found] = baseline.check(now, fleet, 0.10, [])
    assert (found.hosts, found.subject) == (("gpu2",), "busbw")
    assert found.actual == "125.00 GB/s at 8 MiB"
    assert found.expected.startswith(">= 225.00 GB/s at 8 MiB (") and "18 figures" in found.expected
    assert "fleet median 250.00 GB/s - 10% at that size" in found.expected, found.expected


def test_too_little_history_is_said_not_judged() -> None:
    thin = {f"{H100} x8": baseline.FleetBaseline((380.0, 381.0), (1,))}
    reports = [_report("gpu1", H100, 100.0), _report("gpu9", H100, 380.0, gpus=4)]
    assert baseline.check(reports, thin, 0.10, []) == []
    assert baseline.unjudged(reports, thin) == [
        f"the all-reduce against the fleet's history: 0 figures of {H100} x4 in it (5 needed)",
        f"the all-reduce against the fleet's history: 2 figures of {H100} x8 in it (5 needed)",
    ]


def test_a_node_already_below_min_busbw_gets_one_finding() -> None:
    low = Finding(Kind.BUSBW_LOW, Severity.ERROR, "busbw", ">= 350", "290", ("gpu2",))
    assert baseline.check([_report("gpu2", H100, 290.0)], FLEET, 0.10, [low]) == []


def _host(name: str, busbw: float, model: str = H100) -> HostEntry:
    from envtool.protocol.verify_report import FactsEntry

    facts = FactsEntry(name, "3.9.18", "2.1.0", "11.8", True, 8, (model,) * 8, "535.104.05",
                       None, "2.18.3", (), ())  # fmt: skip
    return HostEntry(name, True, None, 1.0, (), 300, facts, AllReduceEntry("nccl", 8, busbw, 0,
                                                                         None))  # fmt: skip


def test_the_store_keeps_good_runs_measured_alike(tmp_path: Path) -> None:
    bad = FindingEntry("version-differs", "error", "nccl", "a", "b", "fix", ("gpu2",))
    with store.opened(tmp_path / "h.sqlite") as db:
        for night in range(12):
            doc = VerifyDocument(None, 1.0, False, (_host("gpu1", 380.0 + night % 3),
                                                    _host("gpu2", 100.0)), (bad,))  # fmt: skip
            store.record(db, doc, "verify", float(night), "node -b 8 -e 32M")
        other = VerifyDocument(None, 1.0, True, (_host("gpu1", 999.0),), ())
        store.record(db, other, "verify", 99.0, "node -b 8 -e 8M")  # measured otherwise
        found = queries.baselines(db, "node -b 8 -e 32M", last=10)
    figures, runs = found[f"{H100} x8"].figures, found[f"{H100} x8"].runs
    assert len(figures) == 10 and set(figures) == {380.0, 381.0, 382.0}  # gpu2: an error
    assert runs == tuple(range(3, 13))  # the last ten runs measured alike


def test_a_report_keeps_the_model_names_the_store_keys_by() -> None:
    doc = document_of([_report("gpu1", H100, 381.0)])
    assert doc.hosts[0].facts is not None
    assert baseline.model_key(doc.hosts[0].facts.devices[0], 8) == baseline.key_of(
        _report("gpu1", H100, 381.0)
    )


def document_of(reports: list[HostReport]) -> VerifyDocument:
    from envtool.judge.verdict import Verdict

    return document(Verdict(tuple(reports), (), "", 1.0))


def test_the_policy_pins_a_baseline_or_a_floor_without_any_history() -> None:
    pinned = [(f"{H100} x8", 380.0, None), (f"{A100} x8", None, 200.0)]
    reports = [_report("gpu1", H100, 381.0), _report("gpu2", H100, 300.0),
               _report("gpu3", A100, 150.0), _report("gpu4", A100, 210.0)]  # fmt: skip
    found = baseline.check(reports, {}, 0.10, [], pinned)
    assert [(f.hosts, f.expected) for f in found] == [
        (("gpu2",), f">= 342.00 GB/s (the policy's baseline for {H100} x8 380.00 GB/s - 10%)"),
        (("gpu3",), f">= 200.00 GB/s (the policy's floor for {A100} x8)"),
    ]
    assert baseline.unjudged(reports, {}, pinned) == [
        f"the all-reduce against the fleet's history: 0 figures of {A100} x8 in it (5 needed)"
    ]  # the pinned model needs no history; a floor alone does not stand for a baseline


def _cards(host: str, width: int, mib: int) -> HostReport:
    from envtool.protocol.gpu_types import GpuDevice, GpuLayer

    devices = tuple(GpuDevice(i, H100, f"GPU-{host}-{i}", memory_total_mib=mib if i else 81559,
                              pcie_width_current=width if i == 1 else 16, pcie_width_max=width
                              if i == 1 else 16) for i in range(2))  # fmt: skip
    return HostReport(host, gpus=GpuLayer("nvml", "535.104.05", devices=devices))


def test_a_card_narrower_or_smaller_than_it_was_and_the_store_keeps_it(tmp_path: Path) -> None:
    """gpu2's GPU 1 reported x16 and 81559 MiB in earlier runs; now x8 (its own maximum x8
    too: the card cannot say it) and 81000 MiB. gpu1 is as it was."""
    with store.opened(tmp_path / "h.sqlite") as db:
        for night in range(3):
            doc = document_of([_cards("gpu1", 16, 81559), _cards("gpu2", 16, 81559)])
            store.record(db, doc, "verify", float(night))
        past = queries.gpu_past(db)
    assert past[("gpu2", "GPU-gpu2-1")] == (16, 81559, 3)
    now = [_cards("gpu1", 16, 81559), _cards("gpu2", 8, 81000)]
    found = baseline.gpu_drift(now, past, [])
    assert [(f.kind, f.hosts, f.subject, f.expected, f.actual) for f in found] == [
        (Kind.GPU_FIGURE_DROPPED, ("gpu2",), "GPU 1", "PCIe x16 (run 3)", "PCIe x8"),
        (Kind.GPU_FIGURE_DROPPED, ("gpu2",), "GPU 1", "81559 MiB (run 3)", "81000 MiB"),
    ]
    degraded = Finding(Kind.GPU_PCIE_DEGRADED, Severity.WARNING, "GPU 1", "x16", "x8", ("gpu2",))
    assert len(baseline.gpu_drift(now, past, [degraded])) == 1  # the width said once


def test_pairs_all_slow_alike_are_held_to_the_fleets_pairs(tmp_path: Path) -> None:
    """Six healthy nights of three H100 pairs (the lower end's figure kept), then a night on
    which every pair is slow alike (no slow node or link among them to name): each pair is
    below the pairs' median; a pair whose node is already slow-node is not named again."""
    from envtool.protocol.types import PairRun
    from envtool.protocol.verify_report import PairEntry

    hosts = (_host("gpu1", 0.0), _host("gpu2", 0.0), _host("gpu3", 0.0))
    with store.opened(tmp_path / "h.sqlite") as db:
        for night in range(6):
            pairs = (PairEntry("gpu1", "gpu2", 1, 40.0, None, 1.0, "gpu1", 41.0),
                     PairEntry("gpu1", "gpu3", 2, 42.0, None, 1.0, "gpu1", 39.0),
                     PairEntry("gpu2", "gpu3", 3, 40.0, None, 1.0, "gpu2", None))  # fmt: skip
            doc = VerifyDocument(None, 1.0, True, hosts, (), pairs, 3)
            store.record(db, doc, "verify", float(night), "pairs -b 8")
        fleet = queries.pair_baselines(db, "pairs -b 8")
    figures, runs = fleet[f"{H100} x8"].figures, fleet[f"{H100} x8"].runs
    assert sorted(set(figures)) == [39.0, 40.0] and len(figures) == 18 and runs[-1] == 6

    reports = [_report(h, H100, 0.0) for h in ("gpu1", "gpu2", "gpu3")]

    def run(a: str, b: str, busbw: float) -> PairRun:
        return PairRun(a, b, 1, _report(a, H100, busbw).allreduce, partner_busbw=busbw)

    slow = [run("gpu1", "gpu2", 12.0), run("gpu1", "gpu3", 11.0), run("gpu2", "gpu3", 39.5)]
    named = baseline.check_pairs(reports, slow, fleet, 0.10, [])
    assert [(f.subject, f.actual) for f in named] == [
        ("gpu1 <-> gpu2", "12.00 GB/s"), ("gpu1 <-> gpu3", "11.00 GB/s")]  # fmt: skip
    assert "pairs' fleet median 40.00 GB/s - 10%; 18 figures, runs 1-6" in named[0].expected
    node = Finding(Kind.SLOW_NODE, Severity.ERROR, "gpu1", ">= 30", "12", ("gpu1",))
    assert baseline.check_pairs(reports, slow, fleet, 0.10, [node]) == []
    assert baseline.unjudged_pairs(reports, slow, {}) == [
        f"the pairs' all-reduce against the fleet's history: 0 figures of {H100} x8 in it "
        "(5 needed)"]  # fmt: skip
