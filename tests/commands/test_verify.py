"""commands/verify.py: the baseline is read (and judged as input) before any host is asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from envtool.commands import verify
from envtool.errors import InputError
from envtool.protocol import verify_report as vr


def _report(*peaks: float | None) -> str:
    hosts = tuple(
        vr.HostEntry(
            f"h{i}", True, None, 0.5, (), 9, None,
            None if p is None else vr.AllReduceEntry("nccl", 8, p, 0, None),
        )
        for i, p in enumerate(peaks)
    )  # fmt: skip
    return vr.dumps(vr.VerifyDocument("conda-lock.yml", 1.0, True, hosts, ()))


def test_baseline_from_nccl_log_and_from_a_json_report(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text(
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "   134217728      33554432     float     sum      -1    613.3  218.85  382.99      0"
        "    614.3  218.48  382.34      0\n"
    )
    assert verify.baseline_busbw(log) == pytest.approx(382.99)
    report = tmp_path / "report.json"
    report.write_text(_report(410.5, None))
    assert verify.baseline_busbw(report) == 410.5
    report.write_text(_report(None))
    with pytest.raises(InputError, match="no all-reduce result"):
        verify.baseline_busbw(report)
    report.write_text('{"hosts": [{"host": "a", "allreduce": null}]}')
    with pytest.raises(InputError, match="not an envtool verify JSON report"):
        verify.baseline_busbw(report)
