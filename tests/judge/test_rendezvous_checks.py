"""judge/rendezvous.py (pure): the rendezvous host unresolvable, on loopback, resolving
differently, or its port unreachable from a node while envtool listened; one cause, one
finding, and across nodes the failed all-reduce follows from it."""

from __future__ import annotations

from dataclasses import replace

from test_gpu import allreduce

from envtool.judge import gpu, rendezvous, verdict
from envtool.judge.findings import Finding, Kind
from envtool.protocol.rdzv_types import Listen, Reach, RendezvousCheck
from envtool.protocol.schemas import CAUSE_PORT_TAKEN
from envtool.protocol.types import AllReduceResult, HostReport

A1 = "10.77.20.11"
OK = Reach(True, "", 0.01, A1)
DROPPED = Reach(False, "timed out after 3 s", 10.0, A1)
HEARD = Listen(True, "", ("node1", "node2"))


def _check(name: str, addresses: tuple[str, ...] = (A1,), reach: Reach | None = OK,
           listen: Listen | None = None, error: str = "") -> HostReport:  # fmt: skip
    role = "host" if name == "node1" else "peer"
    check = RendezvousCheck("node1", 29400, role, addresses, error, reach, listen, 3)
    return HostReport(name, node=name, rendezvous=check)


def _healthy() -> list[HostReport]:
    return [_check("node1", listen=replace(HEARD, peers=("node1", "node2", "node3"))),
            _check("node2"), _check("node3")]  # fmt: skip


def _kinds(found: list[Finding]) -> list[tuple[Kind, str, tuple[str, ...], str]]:
    return [(f.kind, f.subject, f.hosts, f.actual) for f in found]


def test_healthy_nodes_say_nothing() -> None:
    assert rendezvous.check(_healthy()) == []
    assert rendezvous.check([HostReport("node1"), HostReport("node2")]) == []  # not checked


def test_a_name_that_does_not_resolve_on_one_node() -> None:
    reports = _healthy()
    reports[1] = _check("node2", (), None, error="Name or service not known")
    assert _kinds(rendezvous.check(reports)) == [
        (Kind.RDZV_UNRESOLVABLE, "node1", ("node2",), "Name or service not known")
    ]


def test_the_store_node_seeing_its_own_name_on_127_0_1_1() -> None:
    reports = _healthy()
    reports[0] = _check("node1", ("127.0.1.1",), replace(OK, address="127.0.1.1"),
                        listen=replace(HEARD, peers=("node1", "node2", "node3")))  # fmt: skip
    assert _kinds(rendezvous.check(reports)) == [
        (Kind.RDZV_LOOPBACK, "node1", ("node1",), "127.0.1.1")
    ]


def test_nodes_of_one_machine_share_its_loopback() -> None:
    """Test nodes on 127.0.0.x: every node resolves one loopback address and reached it."""
    here = ("127.0.0.2",)
    reach = replace(OK, address=here[0])
    reports = [_check("node1", here, reach, HEARD), _check("node2", here, reach)]
    assert rendezvous.check(reports) == []
    reports[1] = _check("node2", here, replace(DROPPED, address=here[0]))
    assert {f.kind for f in rendezvous.check(reports)} == {Kind.RDZV_LOOPBACK}


def test_a_node_that_resolves_elsewhere_is_not_also_unreachable() -> None:
    reports = _healthy()
    reports[2] = _check("node3", ("10.77.20.99",), replace(DROPPED, address="10.77.20.99"))
    found = rendezvous.check(reports)
    assert [(f.kind, f.hosts) for f in found] == [(Kind.RDZV_ADDRESS_DIFFERS, ("node3",))]
    assert (found[0].expected, found[0].actual) == (A1, "10.77.20.99")


def test_a_blocked_port_names_the_node_the_store_and_the_port() -> None:
    reports = _healthy()
    reports[0] = _check("node1", listen=HEARD)
    reports[2] = _check("node3", reach=DROPPED)
    assert _kinds(rendezvous.check(reports)) == [
        (Kind.RDZV_UNREACHABLE, "node1:29400", ("node3",), f"timed out after 3 s (to {A1}:29400)")
    ]


def test_no_unreachable_without_a_listener() -> None:
    """The store's node did not answer, or could not listen: the peers' failures say
    nothing about a firewall."""
    peers = [_check("node2", reach=DROPPED), _check("node3", reach=DROPPED)]
    assert rendezvous.check([HostReport("node1"), *peers]) == []
    failed = _check("node1", listen=Listen(False, "Permission denied", ()))
    assert rendezvous.check([failed, *peers]) == []


def test_a_held_port_is_one_port_taken_finding() -> None:
    taken = Listen(False, "rendezvous port 29400 on this node is already taken by uid 0", (),
                   CAUSE_PORT_TAKEN, "uid 0")  # fmt: skip
    reports = [_check("node1", reach=None, listen=taken), _check("node2"), _check("node3")]
    assert [(f.kind, f.hosts) for f in rendezvous.check(reports)] == [
        (Kind.RDZV_PORT_TAKEN, ("node1",))
    ]
    ar = AllReduceResult("gloo", 0, error=taken.error, cause=CAUSE_PORT_TAKEN, port=29400)
    reports[0] = replace(reports[0], allreduce=ar)  # the all-reduce says it: not twice
    assert rendezvous.check(reports) == []


def _failed_run(reports: list[HostReport]) -> list[HostReport]:
    ar = AllReduceResult("gloo", 2, error="rendezvous timed out")
    return [replace(r, allreduce=ar) for r in reports]


def test_across_nodes_the_failed_all_reduce_follows_from_it() -> None:
    reports = _healthy()
    reports[0] = _check("node1", listen=HEARD)
    reports[2] = _check("node3", reach=DROPPED)
    policy = verdict.Policy(gpu.GpuPolicy(min_gpus=0), "cluster")
    found = verdict.decide(_failed_run(reports), None, policy)
    assert [(f.kind, f.hosts) for f in found] == [(Kind.RDZV_UNREACHABLE, ("node3",))]
    assert found[0].follows >= 1
    # per node, the all-reduces do not use this rendezvous: their failures stay
    per_node = verdict.decide(_failed_run(reports), None, replace(policy, allreduce="node"))
    assert {f.kind for f in per_node} == {Kind.RDZV_UNREACHABLE, Kind.ALLREDUCE_FAILED}


def test_pair_by_pair_the_pair_of_the_cut_link_follows_from_it() -> None:
    """node3 cannot reach node1's port: the pair node1 <-> node3 fails on the same link and
    is no second finding; node2 <-> node3 failing too is a cause of its own and stays."""
    from envtool.protocol.types import PairRun, PairsRun

    reports = _healthy()
    reports[0] = _check("node1", listen=HEARD)
    reports[2] = _check("node3", reach=DROPPED)
    ok = allreduce(100.0)
    run = PairsRun((PairRun("node1", "node2", 1, ok), PairRun("node1", "node3", 2, None, "hung"),
                    PairRun("node2", "node3", 3, None, "hung")), 3, 30.0)  # fmt: skip
    for mode in ("pairs", "bisect"):
        policy = verdict.Policy(gpu.GpuPolicy(min_gpus=0), mode)
        found = verdict.decide(reports, None, policy, run)
        assert [(f.kind, f.subject) for f in found if f.severity.value == "error"] == [
            (Kind.RDZV_UNREACHABLE, "node1:29400"),
            (Kind.ALLREDUCE_FAILED, "node2 <-> node3"),
        ], mode
        assert found[0].follows == 1


T = 1_800_000_000.0  # a wall-clock second on the nodes


def _timed(late: float, offset: tuple[float, float] = (0.0, 0.2)) -> list[HostReport]:
    """node1 listened T..T+10; node2 tried T+1..T+11 and got through; node3 tried, refused,
    from ``late`` seconds after T for 10 s, its clock read with ``offset``."""
    refused = Reach(False, "connection refused", 10.0, A1, (T + late, T + late + 10))
    listen = replace(HEARD, open=(T, T + 10))
    rs = [_check("node1", listen=listen), _check("node2", reach=replace(OK, tried=(T + 1, T + 1))),
          _check("node3", reach=refused)]  # fmt: skip
    bounds = {"node1": (0.0, 0.2), "node2": (0.0, 0.2), "node3": offset}
    return [replace(r, clock_offset=bounds[r.host]) for r in rs]


def test_a_node_whose_connects_came_after_the_listener_closed_was_not_checked() -> None:
    """node3's start lagged 12 s: its connects were refused because nobody listened any more,
    not because a firewall rejects them; said as not checked, never as unreachable."""
    [f] = rendezvous.check(_timed(12.0))
    assert (f.kind, f.severity.value, f.subject, f.hosts) == (
        Kind.RDZV_LATE,
        "warning",
        "node1:29400",
        ("node3",),
    )
    assert f.actual == "its connects began 2.0 s after the port closed: not checked"
    # the same refusal while the port was open is a finding of the port
    [f] = rendezvous.check(_timed(5.0))
    assert (f.kind, f.hosts) == (Kind.RDZV_UNREACHABLE, ("node3",))


def test_lateness_counts_only_beyond_each_clocks_bound() -> None:
    # node3's clock runs 3 s ahead: its T+12 is envtool's T+9, while the port was open
    assert _kinds(rendezvous.check(_timed(12.0, (3.0, 0.2))))[0][0] is Kind.RDZV_UNREACHABLE
    # an offset known only to ± 1.5 s cannot tell a 2 s gap from an overlap: judged as before
    assert _kinds(rendezvous.check(_timed(12.0, (0.0, 1.9))))[0][0] is Kind.RDZV_UNREACHABLE
    assert _kinds(rendezvous.check(_timed(12.0, (0.0, 1.7))))[0][0] is Kind.RDZV_LATE
    # an older node sends no spans, or its clock is unknown: judged as before
    old = [replace(r, clock_offset=None) for r in _timed(12.0)]
    assert _kinds(rendezvous.check(old))[0][0] is Kind.RDZV_UNREACHABLE


def test_a_store_node_that_opened_after_the_others_gave_up_is_the_one_named() -> None:
    rs = _timed(-20.0)  # node3 tried T-20..T-10; node2 too, refused
    node2 = _check("node2", reach=Reach(False, "connection refused", 10.0, A1, (T - 19, T - 9)))
    rs[1] = replace(node2, clock_offset=(0.0, 0.2))
    [f] = rendezvous.check(rs)
    assert (f.kind, f.hosts) == (Kind.RDZV_LATE, ("node1",))
    assert f.actual == "it opened the port 9.0 s after node2, node3 stopped trying: not checked"


def test_missed_is_signed_and_zero_when_unknown() -> None:
    assert rendezvous.missed((T, T + 10), (0.0, 0.1), (T + 12, T + 22), (0.0, 0.1)) == 2.0
    assert rendezvous.missed((T, T + 10), (0.0, 0.1), (T - 9, T - 5), (0.0, 0.1)) == -5.0
    assert rendezvous.missed((T, T + 10), (0.0, 0.1), (T + 9, T + 19), (0.0, 0.1)) == 0.0
    assert rendezvous.missed(None, (0.0, 0.1), (T + 12, T + 22), (0.0, 0.1)) == 0.0


def _run_from(
    rs: list[HostReport], start: float = T - 1, seconds: float = 25.0
) -> list[HostReport]:
    """Each node's transport ran ``start`` .. ``start + seconds`` on envtool's clock."""
    return [replace(r, started=start, seconds=seconds) for r in rs]


def test_the_store_node_s_clock_cannot_make_another_node_late() -> None:
    """Issue 33 item 3: the store's node adds 100 s to its clock entry (its listener span as
    it was): node3's refused connects, made while the port was open, stay unreachable (an
    error), not late (a warning that exits 0). Its listener span, on envtool's clock, would
    fall 100 s before its transport started: it cannot have happened, so nothing of node3's
    rests on it."""
    rs = _run_from(_timed(5.0))
    assert _kinds(rendezvous.check(rs))[0][0] is Kind.RDZV_UNREACHABLE
    rs[0] = replace(rs[0], clock_offset=(100.0, 0.2))  # node1's clock entry, 100 s ahead
    [f] = rendezvous.check(rs)
    assert (f.kind, f.hosts) == (Kind.RDZV_UNREACHABLE, ("node3",))
    # an honest late node is still said late, with every span inside its node's run
    [f] = rendezvous.check(_run_from(_timed(12.0)))
    assert (f.kind, f.hosts) == (Kind.RDZV_LATE, ("node3",))


def test_a_span_outside_its_node_s_run_is_unknown() -> None:
    node = replace(HostReport("n"), started=T, seconds=12.0, clock_offset=(0.0, 0.5))
    assert rendezvous.trusted((T + 1, T + 11), node) == (T + 1, T + 11)
    assert rendezvous.trusted((T - 100, T - 90), node) is None
    assert rendezvous.trusted((T + 1, T + 14), node) is None  # ended after its answer came
    assert rendezvous.trusted((T + 1, T + 11), HostReport("old")) == (T + 1, T + 11)
