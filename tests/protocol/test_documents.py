"""protocol/documents.py: numbers a node cannot have measured are that node's problem."""

from __future__ import annotations

import json

from envtool.protocol.answers import host_report
from envtool.protocol.types import Answer, ProblemKind


def _node(allreduce: object) -> str:
    facts = {"schema": "envtool.gpu-facts/1", "python": "3.9.18"}
    return json.dumps({"schema": "envtool.node/1", "facts": facts, "allreduce": allreduce})


def _allreduce(busbw: object) -> dict[str, object]:
    part = {"time_us": 10.0, "algbw": 1.0, "busbw": busbw, "wrong": 0}
    row = {"size": 1024, "count": 256, "oop": part, "ip": part}
    return {"schema": "envtool.allreduce/1", "backend": "nccl", "nranks": 2, "rows": [row]}


def test_nan_or_infinite_busbw_is_a_problem_not_a_figure() -> None:
    for bad in (float("nan"), float("inf"), -1.0, 10**400):
        report = host_report(Answer("n1", 0, _node(_allreduce(bad))))
        assert report.allreduce is None and report.facts is not None
        assert [(p.part, p.kind) for p in report.problems] == [("allreduce", ProblemKind.MALFORMED)]


def test_a_5000_digit_integer_is_an_unreadable_answer() -> None:
    text = '{"schema": "envtool.node/1", "facts": ' + "9" * 5000 + "}"
    report = host_report(Answer("n1", 0, text))
    assert report.ok and [p.kind for p in report.problems] == [ProblemKind.UNREADABLE]
    assert "no valid JSON" in report.problems[0].detail
