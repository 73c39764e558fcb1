"""Which node or link is slow, from pair-wise all-reduces (judge/pairs.py), and the rounds
that run every pair once with every node busy once per round (cluster/pairs.py)."""

from __future__ import annotations

import itertools

import pytest
from test_gpu import allreduce

from envtool.cluster.pairs import rounds
from envtool.judge import pairs
from envtool.judge.findings import Kind
from envtool.judge.gpu import GpuPolicy
from envtool.protocol.types import PairRun, PairsRun

NODES = ["n1", "n2", "n3", "n4"]


def _run(slow: dict[frozenset[str], float], failed: frozenset[str] = frozenset()) -> PairsRun:
    out = []
    for a, b in itertools.combinations(NODES, 2):
        key = frozenset((a, b))
        if key == failed:
            out.append(PairRun(a, b, 1, None, "rendezvous timed out"))
        else:
            out.append(PairRun(a, b, 1, allreduce(slow.get(key, 100.0))))
    return PairsRun(tuple(out), 3, 30.0)


@pytest.mark.parametrize("count", range(2, 10))
def test_rounds_are_matchings_that_cover_every_pair_once(count: int) -> None:
    plan = rounds(count)
    assert len(plan) == (count - 1 if count % 2 == 0 else count)
    seen = [p for matching in plan for p in matching]
    assert sorted(seen) == list(itertools.combinations(range(count), 2))
    for matching in plan:
        used = [n for p in matching for n in p]
        assert len(used) == len(set(used))  # every node in at most one pair per round


def test_a_node_whose_every_pair_is_slow_is_named_alone() -> None:
    slow = {frozenset(("n3", other)): 5.0 for other in ("n1", "n2", "n4")}
    found = pairs.decide(_run(slow), GpuPolicy())
    assert [(f.kind, f.subject, f.hosts) for f in found] == [(Kind.SLOW_NODE, "n3", ("n3",))]
    assert "5 GB/s with n1" in found[0].actual


def test_one_slow_pair_is_a_link_not_a_node() -> None:
    found = pairs.decide(_run({frozenset(("n1", "n2")): 5.0}), GpuPolicy())
    assert [(f.kind, f.subject, f.hosts) for f in found] == [
        (Kind.SLOW_LINK, "n1 <-> n2", ("n1", "n2"))
    ]


def test_noise_is_not_a_finding_and_min_busbw_still_is() -> None:
    noisy = {frozenset(("n3", "n4")): 55.0}  # half as fast: within a third of the median
    assert pairs.decide(_run(noisy), GpuPolicy()) == []
    found = pairs.decide(_run(noisy), GpuPolicy(min_busbw=80.0))
    assert [(f.kind, f.subject) for f in found] == [(Kind.SLOW_LINK, "n3 <-> n4")]


def test_a_pair_that_did_not_finish_names_both_nodes() -> None:
    found = pairs.decide(_run({}, failed=frozenset(("n2", "n4"))), GpuPolicy())
    assert [(f.kind, f.hosts, f.actual) for f in found] == [
        (Kind.ALLREDUCE_FAILED, ("n2", "n4"), "rendezvous timed out")
    ]


def test_only_a_slow_pair_no_slow_node_explains_is_measured_again() -> None:
    node3 = {frozenset(("n3", other)): 5.0 for other in ("n1", "n2", "n4")}
    assert pairs.suspect_links(_run(node3), GpuPolicy()) == []  # the node explains them
    link = {frozenset(("n1", "n2")): 5.0}
    assert pairs.suspect_links(_run(link), GpuPolicy()) == [("n1", "n2")]
    assert pairs.suspect_links(_run({}), GpuPolicy()) == []


def _bisect(count: int, speed: dict[frozenset[str], float]) -> PairsRun:
    """bisect as verify runs it (commands/verify.py), each pair's busbw from ``speed``
    (100 GB/s unless listed): the first matching, then next_round until it is empty."""
    nodes = [f"n{i}" for i in range(1, count + 1)]
    first = [(nodes[i], nodes[j]) for i, j in rounds(count)[0]]
    run = PairsRun((), 0, 0.0)
    step: list[tuple[str, str]] = first
    while step and run.rounds < count:
        now = [PairRun(a, b, run.rounds + 1, allreduce(speed.get(frozenset((a, b)), 100.0)))
               for a, b in step]  # fmt: skip
        run = PairsRun((*run.pairs, *now), run.rounds + 1, 0.0)
        step = pairs.next_round(run, GpuPolicy(), nodes)
    return run


@pytest.mark.parametrize("count", range(4, 10))
def test_bisect_names_any_slow_node_in_two_or_three_rounds(count: int) -> None:
    for slow in range(1, count + 1):
        node = f"n{slow}"
        speed = {frozenset((node, f"n{o}")): 5.0 for o in range(1, count + 1) if o != slow}
        run = _bisect(count, speed)
        found = [(f.kind, f.subject) for f in pairs.decide(run, GpuPolicy())]
        assert found == [(Kind.SLOW_NODE, node)], (count, node, run)
        rested = all(slow - 1 not in p for p in rounds(count)[0])
        # a third round when the slow node rested in the first, or (five nodes) when the
        # fast pair's two nodes cannot serve the three suspects at once
        assert run.rounds == 2 if not rested and count != 5 else run.rounds <= 3


def test_bisect_tells_a_slow_link_from_a_node_when_the_two_meet() -> None:
    first = rounds(6)[0][0]
    a, b = f"n{first[0] + 1}", f"n{first[1] + 1}"
    run = _bisect(6, {frozenset((a, b)): 5.0})
    found = [(f.kind, f.subject) for f in pairs.decide(run, GpuPolicy())]
    assert found == [(Kind.SLOW_LINK, f"{a} <-> {b}")] and run.rounds == 2


def test_bisect_with_nothing_slow_stops_after_one_round() -> None:
    run = _bisect(8, {})
    assert run.rounds == 1 and len(run.pairs) == 4 and pairs.decide(run, GpuPolicy()) == []


def test_a_pair_meets_on_its_first_node_unless_told_this_machine() -> None:
    from envtool.cluster.hosts import Host
    from envtool.cluster.options import FanoutOptions
    from envtool.cluster.pairs import How

    first = Host("gpu07")
    assert How(FanoutOptions(), (), 29400).endpoint(first, 0) == "gpu07:29400"
    assert How(FanoutOptions(), (), 29400, "gpu01").endpoint(first, 2) == "gpu07:29402"
    assert How(FanoutOptions(), (), 29400, "127.0.0.1").endpoint(first, 1) == "127.0.0.1:29401"
