"""Which node or link is slow, from pair-wise all-reduces (judge/pairs.py), and the rounds
that run every pair once with every node busy once per round (cluster/pairs.py)."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from test_gpu import allreduce

from envtool.cluster.pairs import rounds
from envtool.judge import findings, pairs
from envtool.judge.findings import Kind
from envtool.judge.gpu import GpuPolicy
from envtool.protocol.net_types import IbPort, IfSelection, Infiniband, Interface, Network
from envtool.protocol.types import HostReport, PairRun, PairsRun

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


def _claimed(
    speed: dict[frozenset[str], float], by: dict[frozenset[str], str], base: float = 100.0
) -> PairsRun:
    """Every pair of NODES at ``speed`` (``base`` GB/s unless listed), each result reported by the
    node ``by`` names (its first node unless listed): the node whose rank 0 wrote it."""
    out = []
    for a, b in itertools.combinations(NODES, 2):
        key = frozenset((a, b))
        out.append(PairRun(a, b, 1, allreduce(speed.get(key, base)), by=by.get(key, a)))
    return PairsRun(tuple(out), 3, 30.0)


def test_a_node_that_lies_about_its_pairs_is_named_and_no_honest_link_is_framed() -> None:
    """n1's rank 0 claims 1000 GB/s for each of its pairs where the other nodes measured about
    1 GB/s: the claims are n1's finding, never the yardstick (with them, the median called
    n2 <-> n3, n2 <-> n4 and n3 <-> n4 slow links and named no liar) (issue 24 M2)."""
    speed = {frozenset(("n1", o)): 1000.0 for o in ("n2", "n3", "n4")}
    speed[frozenset(("n3", "n4"))] = 0.9  # honest noise
    run = _claimed(speed, {}, base=1.0)
    found = pairs.decide(run, GpuPolicy())
    assert [(f.kind, f.subject, f.hosts, f.cause) for f in found] == [
        (Kind.PROBE_FAILED, "pair busbw", ("n1",), pairs.CAUSE_IMPLAUSIBLE)
    ]
    assert found[0].actual == (
        "n1 reported 1e+03 GB/s for n1 <-> n2, 1e+03 GB/s for n1 <-> n3, 1e+03 GB/s for n1 <-> n4"
    )
    assert pairs.suspect_links(run, GpuPolicy()) == []  # nothing measured again for a lie


def test_one_lie_among_honest_pairs_is_the_claimants_alone() -> None:
    found = pairs.decide(_claimed({frozenset(("n1", "n2")): 5000.0}, {}, 20.0), GpuPolicy())
    assert [(f.kind, f.subject, f.hosts) for f in found] == [
        (Kind.PROBE_FAILED, "n1 <-> n2", ("n1",))
    ]
    assert found[0].expected == "<= 2e+03 GB/s (100x the other nodes' best 20)"


def test_the_liar_is_the_node_that_reported_not_the_first_of_the_pair() -> None:
    lie = frozenset(("n1", "n3"))
    found = pairs.decide(_claimed({lie: 5000.0}, {lie: "n3"}, 10.0), GpuPolicy())
    assert [(f.kind, f.hosts) for f in found] == [(Kind.PROBE_FAILED, ("n3",))]


def test_a_figure_beyond_any_link_is_refused_even_alone() -> None:
    """One pair (two nodes): no other pair to compare with, only the physical ceiling."""
    alone = PairsRun((PairRun("n1", "n2", 1, allreduce(50_000.0), by="n2"),), 1, 1.0)
    found = pairs.decide(alone, GpuPolicy(min_busbw=10.0))
    assert [(f.kind, f.hosts) for f in found] == [(Kind.PROBE_FAILED, ("n2",))]
    honest = PairsRun((PairRun("n1", "n2", 1, allreduce(400.0), by="n2"),), 1, 1.0)
    assert pairs.decide(honest, GpuPolicy(min_busbw=10.0)) == []


def test_a_liar_claiming_all_its_pairs_is_compared_with_the_others_claims() -> None:
    """n2 is rank 0 of all three of its pairs and claims 900 GB/s each: its own claims do not
    vouch for each other; n1, n3 and n4 report 3 GB/s."""
    mine = {frozenset(("n2", o)) for o in ("n1", "n3", "n4")}
    found = pairs.decide(
        _claimed({k: 900.0 for k in mine}, {k: "n2" for k in mine}, 3.0), GpuPolicy()
    )
    assert [(f.kind, f.hosts) for f in found] == [(Kind.PROBE_FAILED, ("n2",))]
    assert found[0].actual.count("900 GB/s") == 3


def test_a_slow_node_does_not_make_the_fast_pairs_liars() -> None:
    slow = {frozenset(("n3", o)): 3.0 for o in ("n1", "n2", "n4")}  # 33x below the others
    found = pairs.decide(_claimed(slow, {}), GpuPolicy())
    assert [(f.kind, f.subject) for f in found] == [(Kind.SLOW_NODE, "n3")]


def test_bisect_with_both_fast_pairs_from_one_rank_0_still_names_the_slow_node() -> None:
    """As tests/cluster/test_pairs_netns.py measured: node3 20x slower, and n1's rank 0 wrote
    both fast pairs; the slow pairs are the only other nodes' figures: not a lie."""
    n1n4, n2n3 = (
        PairRun("n1", "n4", 1, allreduce(0.3), by="n1"),
        PairRun("n2", "n3", 1, allreduce(0.015), by="n3"),
    )
    n1n2, n3n4 = (
        PairRun("n1", "n2", 2, allreduce(0.3), by="n1"),
        PairRun("n3", "n4", 2, allreduce(0.015), by="n4"),
    )
    found = pairs.decide(PairsRun((n1n4, n2n3, n1n2, n3n4), 2, 9.0), GpuPolicy())
    assert [(f.kind, f.subject) for f in found] == [(Kind.SLOW_NODE, "n3")]


def test_a_pair_whose_store_port_was_taken_names_the_port_not_the_pair() -> None:
    """Only that pair's failure follows from it; another pair's failure stays its own."""
    why = "rendezvous port 29401 on this node is already taken by nobody (uid 65534)"
    run = PairsRun(
        (
            PairRun("n1", "n2", 1, None, why, by="n1", cause="rdzv-port-taken"),
            PairRun("n3", "n4", 1, None, "RendezvousTimeoutError"),
        ),
        1,
        1.0,
    )
    found = findings.explain(pairs.decide(run, GpuPolicy()))
    assert [(f.kind.value, f.subject, f.hosts) for f in found] == [
        ("allreduce-failed", "n3 <-> n4", ("n3", "n4")),
        ("rendezvous-port-taken", "n1 <-> n2", ("n1",)),
    ]


# --- issue 33 item 3: a pair's figure must agree at both ends -----------------------------
def _three(claims: dict[str, float], honest: float = 1.0) -> PairsRun:
    """Three nodes, each pair's rank 0 on its first node; each end reports its own figure:
    ``claims`` a node's (×) on every pair it is part of, ``honest`` what the link does."""
    out = []
    for a, b in itertools.combinations(["a", "b", "c"], 2):
        mine, theirs = honest * claims.get(a, 1.0), honest * claims.get(b, 1.0)
        out.append(PairRun(a, b, 1, allreduce(mine), by=a, partner_busbw=theirs))
    return PairsRun(tuple(out), 3, 30.0)


def _veth(mbps: int = 10_000) -> HostReport:
    """A node whose NCCL and gloo pick one veth of ``mbps`` (what the netns labs have)."""
    veth = Interface("veth0", True, addresses=("10.77.0.2/24",), speed_mbps=mbps)
    pick = IfSelection("NCCL_SOCKET_IFNAME", None, ("veth0",), "default")
    return HostReport("x", network=Network((veth,), nccl=pick, gloo=replace(pick, variable="G")))


def test_an_inflated_figure_frames_no_honest_link() -> None:
    """a claims ×1000 on both its pairs, three nodes: before, its two claims were "credible"
    (fewer than two other pairs to hold them against) and made the median, and b <-> c, the
    honest link, a slow-link. Now each pair's figure is the lower of its two ends'."""
    assert pairs.decide(_three({"a": 1000.0}), GpuPolicy()) == []
    # with each node's own links known (a 10 Gb/s veth: at most 4 x 1.25 GB/s), a is named
    links = pairs.ceilings([replace(_veth(), host=h) for h in ("a", "b", "c")])
    assert links == {"a": 5.0, "b": 5.0, "c": 5.0}
    found = pairs.decide(_three({"a": 1000.0}), GpuPolicy(), links)
    assert [(f.kind, f.hosts, f.cause) for f in found] == [
        (Kind.PROBE_FAILED, ("a",), pairs.CAUSE_IMPLAUSIBLE)
    ]
    assert found[0].expected == "<= 5 GB/s (4x what a's own links carry)"


def test_a_deflated_figure_names_only_its_own_node() -> None:
    found = pairs.decide(_three({"a": 0.001}, honest=2.0), GpuPolicy())
    assert [(f.kind, f.subject) for f in found] == [(Kind.SLOW_NODE, "a")]


def test_a_pair_s_figure_is_the_lower_end_less_what_was_refused() -> None:
    pair = PairRun("a", "b", 1, allreduce(9.0), by="b", partner_busbw=3.0)
    assert pair.partner == "a" and pairs.figure(pair) == 3.0
    assert pairs.figure(replace(pair, refused=("a",))) == 9.0
    assert pairs.figure(replace(pair, partner_busbw=None)) == 9.0  # an older partner
    assert pairs.figure(replace(pair, result=None)) is None


def test_no_ceiling_where_a_picked_link_says_no_speed_or_is_loopback() -> None:
    assert pairs.ceilings([_veth(0)]) == {} and pairs.ceilings([HostReport("x")]) == {}
    lo = Interface("lo", True, loopback=True, addresses=("127.0.0.1/8",))
    pick = IfSelection("NCCL_SOCKET_IFNAME", None, ("lo",), "default")
    assert pairs.ceilings([HostReport("x", network=Network((lo,), nccl=pick))]) == {}
    ib = Infiniband(True, (IbPort("mlx5_0", 1, "ACTIVE", "LinkUp", 400.0, None, "InfiniBand"),))
    with_ib = replace(_veth(25_000), network=replace(_veth(25_000).network, ib=ib))
    assert pairs.ceilings([with_ib]) == {"x": 4 * (25 + 400) / 8}


def test_pairs_that_all_meet_one_slow_node_are_no_yardstick_for_a_fast_one() -> None:
    """bisect's second round (tests/cluster/test_pairs_netns.py, measured: n3 at 50 Mbit/s
    gave 0.005359 and 0.005207 GB/s, n1 <-> n2 0.5367): the only pairs without n1 both pass through
    n3, so n1's fast figure, 100x theirs, is n3's slowness, not n1's lie."""
    run = PairsRun(
        (
            PairRun("n1", "n4", 1, allreduce(0.376), by="n1", partner_busbw=0.376),
            PairRun("n2", "n3", 1, allreduce(0.005359), by="n2", partner_busbw=0.005359),
            PairRun("n2", "n1", 2, allreduce(0.5367), by="n1", partner_busbw=0.5367),
            PairRun("n3", "n4", 2, allreduce(0.005207), by="n3", partner_busbw=0.005207),
        ),
        2,
        40.0,
    )
    assert pairs.implausible(run) == []
    found = pairs.decide(run, GpuPolicy())
    assert [(f.kind, f.hosts) for f in found] == [(Kind.SLOW_NODE, ("n3",))]
