"""What a person reads after every verify run: a summary line first, a block per finding that
fits the terminal, each node's all-reduce figure, and always a verdict line last."""

from __future__ import annotations

import pytest
from test_report_verify import FACTS, _verdict

from envtool.judge import verdict
from envtool.judge.findings import Finding, Kind, Severity
from envtool.protocol.types import AllReduceResult, HostReport, PairRun, PairsRun
from envtool.report import verify as report

LONG = "/a/very/long/path/" * 12 + "libnccl.so.2"


def _lines(text: str) -> list[str]:
    return text.rstrip("\n").split("\n")


def _last(text: str) -> str:
    return text.rstrip("\n").split("\n\n")[-1].replace("\n  ", " ")


def _crowded() -> verdict.Verdict:
    """Long values everywhere, a pairs table and an all-reduce figure: what must still fold."""
    rs = tuple(HostReport(f"gpu-node-{i:03d}.cluster.example.org", facts=FACTS) for i in range(6))
    long = Finding(Kind.LOADED_OUTSIDE, Severity.ERROR, "nccl", "/opt/env", LONG,
                   tuple(r.host for r in rs[:3]), cause="ld-library-path")  # fmt: skip
    run = PairsRun((PairRun(rs[0].host, rs[1].host, 1, AllReduceResult("gloo", 2)),
                    PairRun(rs[2].host, rs[3].host, 1, None, error=LONG)), 1, 3.0)  # fmt: skip
    return verdict.Verdict(rs, (*_verdict().findings, long), "conda-lock.yml", 2.0, run)


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("wide", [False, True])
def test_no_line_is_wider_than_the_terminal(width: int, wide: bool) -> None:
    text = report.render(_crowded(), wide=wide, width=width)
    assert max(len(line) for line in _lines(text)) <= width, text
    if not wide:  # folded, never cut: the whole path is there, line after line
        assert LONG.replace("/", "") in text.replace("\n", "").replace(" ", "").replace("/", "")


def test_a_failing_run_starts_with_who_fails_and_ends_with_what_to_do() -> None:
    text = report.render(_verdict(), width=100)
    assert _lines(text.replace("\n  ", " "))[0] == (  # the summary line, unfolded
        "3 of 3 hosts fail: gpu01 (pytorch build cpu_0 vs cuda118_0), gpu02 (pytorch build cpu_0 "
        "vs cuda118_0), gpu03 (unreachable)"
    )
    assert _last(text).startswith("FAIL: gpu[01-02]: pytorch build cpu_0 vs cuda118_0 (and 1 ")


def test_a_clean_run_with_notes_or_warnings_still_ends_with_a_verdict() -> None:
    rs = (HostReport("a", facts=FACTS),)
    note = Finding(Kind.CUDA_UNAVAILABLE, Severity.INFO, "CUDA", "available", "no driver", ("a",))
    text = report.render(verdict.Verdict(rs, (note,), "", 1.0), width=100)
    assert _lines(text)[0] == "1 host passes" and "1 host, 1 answered, 1 finding" in text
    assert _last(text).startswith("all good: compared between the nodes") and "; 1 note" in text
    warn = Finding(Kind.EXTRA, Severity.WARNING, "six", hosts=("a",))
    text = report.render(verdict.Verdict(rs, (warn,), "", 1.0), width=100)
    assert _lines(text)[0] == "1 host passes with 1 warning"
    assert _last(text).startswith("passed with 1 warning: compared")


def test_each_nodes_all_reduce_figure_is_in_the_text() -> None:
    result = AllReduceResult("gloo", 2, error="")
    ran = HostReport("a", facts=FACTS, allreduce=result)
    failed = HostReport("b", facts=FACTS, allreduce=AllReduceResult("nccl", 8, error="timeout"))
    text = report.render(verdict.Verdict((ran, failed), (), "", 1.0), width=100)
    assert "all-reduce:\n  a: no rows\n  b: failed: timeout" in text


def test_the_progress_bar_is_quiet_off_a_terminal_in_ci_and_for_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import logging
    import sys

    from envtool.report import console

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.delenv("CI", raising=False)
    logger = logging.getLogger(console.LOGGER)  # a command's own level (it ran first or not)
    monkeypatch.setattr(logger, "level", logger.level)
    console.set_verbosity(console.NORMAL)
    assert console.Progress(1)._live is not None  # one host on a terminal: shown
    assert console.Progress(3, quiet=True)._live is None  # --format json / junit
    monkeypatch.setenv("CI", "true")
    assert console.Progress(3)._live is None
