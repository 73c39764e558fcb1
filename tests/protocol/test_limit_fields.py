"""protocol/limit_fields.py and limit_types.clock_offset: the ``limits`` part and the
``clock`` entry read strictly (a malformed one is that node's problem, never a crash), and
the clock offset bounded by when the transport started and when the answer came back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from envtool.protocol.answers import host_report
from envtool.protocol.limit_types import ClockReading, clock_offset
from envtool.protocol.types import Answer, ProblemKind

LIMITS = {"schema": "envtool.limits/1", "shm_bytes": 67108864, "shm_error": None,
          "nofile": [1024, 1048576], "memlock": [65536, -1], "kernel": "6.1.0-18-amd64",
          "glibc": "2.36"}  # fmt: skip


def _answer(limits: Any = LIMITS, clock: Any = None, seconds: float = 2.0,
            started: float = 0.0) -> Answer:  # fmt: skip
    doc: dict[str, Any] = {"schema": "envtool.node/1", "node": "n1", "prefix": "/p",
                           "facts": {"schema": "envtool.gpu-facts/1"},
                           "limits": limits}  # fmt: skip
    if clock is not None:
        doc["clock"] = clock
    return Answer("n1", 0, json.dumps(doc), "", seconds, started=started)


def test_the_limits_part_is_read_as_it_is() -> None:
    report = host_report(_answer())
    assert report.problems == () and report.limits is not None
    assert report.limits.shm_bytes == 64 * 1024 * 1024 and report.limits.shm_error == ""
    assert report.limits.nofile == (1024, 1048576) and report.limits.memlock == (65536, -1)
    assert (report.limits.kernel, report.limits.glibc) == ("6.1.0-18-amd64", "2.36")
    assert report.clock_offset is None  # no clock entry


def test_no_shm_is_read_with_its_error() -> None:
    limits = {**LIMITS, "shm_bytes": None, "shm_error": "/dev/shm: No such file or directory"}
    report = host_report(_answer(limits))
    assert report.limits is not None and report.limits.shm_bytes is None
    assert "No such file" in report.limits.shm_error


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"schema": "envtool.limits/9"}, "not an envtool.limits/1"),
        ({"nofile": [1024]}, "[soft, hard]"),
        ({"nofile": "1024"}, "[soft, hard]"),
        ({"memlock": [-2, -1]}, "two counts"),
        ({"memlock": [True, -1]}, "two counts"),
        ({"shm_bytes": -5}, "negative"),
        ({"shm_bytes": "64m"}, "integer"),
        ({"kernel": ["6.1"]}, "expected a string"),
    ],
)
def test_a_malformed_limits_part_is_that_node_s_problem(change: dict[str, Any], words: str) -> None:
    report = host_report(_answer({**LIMITS, **change}))
    assert report.limits is None
    (problem,) = report.problems
    assert (problem.part, problem.kind) == ("limits", ProblemKind.MALFORMED)
    assert words in problem.detail


@pytest.mark.parametrize("clock", [{"time": "now", "elapsed": 1.0}, {"time": 1e9},
                                   {"time": 1e9, "elapsed": -1.0}, [1e9, 1.0]])  # fmt: skip
def test_a_malformed_clock_is_that_node_s_problem(clock: Any) -> None:
    report = host_report(_answer(clock=clock, started=1000.0))
    assert report.clock_offset is None and [p.part for p in report.problems] == ["clock"]


def test_the_offset_is_taken_against_the_middle_of_when_the_node_could_have_printed() -> None:
    """Transport started at 1000.0 and answered 4 s later; the node had run 1 s when it
    printed: it printed at 1001..1004 by our clock, so a node reading 1302.5 is 300 s ahead,
    ± 1.5 s."""
    report = host_report(_answer(clock={"time": 1302.5, "elapsed": 1.0}, seconds=4.0,
                                 started=1000.0))  # fmt: skip
    assert report.clock_offset == (300.0, 1.5)


def test_a_node_behind_is_a_negative_offset() -> None:
    offset, bound = clock_offset(ClockReading(942.0, 0.5), 1000.0, 2.5) or (0.0, 0.0)
    assert (offset, bound) == (-59.5, 1.0)


def test_an_unknown_start_gives_no_offset() -> None:
    assert clock_offset(ClockReading(1e9, 1.0), 0.0, 2.0) is None


def test_a_node_that_ran_longer_than_its_transport_gets_the_widest_bound() -> None:
    """Its elapsed cannot be true (it started after the transport did): counted as 0."""
    assert clock_offset(ClockReading(1001.0, 9.0), 1000.0, 2.0) == (0.0, 1.0)
