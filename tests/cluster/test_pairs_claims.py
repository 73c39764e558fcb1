"""cluster/pairs.py: a pair's result is rank 0's, checked against both members' answers, and
carries the node whose answer it came from (issue 24 M2: no node speaks for another)."""

from __future__ import annotations

from envtool.cluster.pairs import _result
from envtool.protocol.types import AllReduceResult, Failure, HostReport, Outcome

RESULT = AllReduceResult("gloo", 2, avg_busbw=1.0)
MEMBER = AllReduceResult("gloo", 0, member=True)


def test_the_result_names_the_node_whose_rank_0_wrote_it() -> None:
    reports = [HostReport("n1", allreduce=MEMBER), HostReport("n2", allreduce=RESULT)]
    assert _result(reports) == (RESULT, "", "n2")


def test_two_nodes_claiming_rank_0_are_neither_believed() -> None:
    reports = [HostReport("n1", allreduce=RESULT), HostReport("n2", allreduce=RESULT)]
    assert _result(reports) == (None, "n1 and n2 each report rank 0's result", "")


def test_a_result_the_partner_took_no_part_in_is_refused() -> None:
    lost = Failure(Outcome.TIMED_OUT, "rendezvous timed out")
    reports = [HostReport("n1", allreduce=RESULT), HostReport("n2", failure=lost)]
    result, error, by = _result(reports)
    assert (result, by) == (None, "n1")
    assert error == "n1 reports a result its partner took no part in (n2: rendezvous timed out)"
    partner = AllReduceResult("gloo", 0, error="rendezvous timed out")
    assert _result([HostReport("n2", allreduce=partner), HostReport("n1", allreduce=RESULT)])[
        :1
    ] == (None,)


def test_a_result_unlike_the_pairs_parameters_is_refused() -> None:
    eight = AllReduceResult("nccl", 8)
    assert _result([HostReport("n1", allreduce=eight), HostReport("n2", allreduce=MEMBER)]) == (
        None, "n1 reports 8 nccl ranks for two nodes", "n1"
    )  # fmt: skip
    three = AllReduceResult("gloo", 3)
    assert (
        _result([HostReport("n1", allreduce=three), HostReport("n2", allreduce=MEMBER)])[0] is None
    )


def test_an_honest_failure_keeps_its_own_words() -> None:
    failed = AllReduceResult("gloo", 2, error="NCCL error: unhandled system error")
    reports = [HostReport("n1", allreduce=failed), HostReport("n2", allreduce=MEMBER)]
    assert _result(reports) == (None, "NCCL error: unhandled system error", "n1")
