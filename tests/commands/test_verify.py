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


def test_a_liar_s_report_as_baseline_fails_no_honest_node(tmp_path: Path) -> None:
    """Issue 33 item 3: h1 claimed ×1000 in the report now used as --baseline. Each node is
    held to its own past figure (h0 and h2 pass at their 20 GB/s), a node the report lacks to
    the report's median node (never its best: that was the liar's 20,000, and every honest
    node failed busbw-low)."""
    from envtool.judge import gpu
    from envtool.nccl.model import NcclResult, NcclRow
    from envtool.protocol.types import AllReduceResult, HostReport

    def allreduce(peak: float) -> AllReduceResult:
        part = NcclResult(1000.0, peak / 1.75, peak, 0)
        return AllReduceResult("nccl", 8, (NcclRow(256 << 20, 64 << 20, "float", "sum", -1,
                                                   part, part),))  # fmt: skip

    report = tmp_path / "report.json"
    report.write_text(_report(20.0, 20_000.0, 20.0))
    median, per_node = verify.baseline_busbw(report)
    assert median == 20.0 and dict(per_node) == {"h0": 20.0, "h1": 20_000.0, "h2": 20.0}
    policy = gpu.GpuPolicy(0, None, None, median, 0.1, per_node)
    now = [HostReport(h, allreduce=allreduce(19.5)) for h in ("h0", "h2", "h3")]
    assert [f for f in gpu.check(now, policy) if f.kind.value == "busbw-low"] == []
    (low,) = gpu.check([HostReport("h1", allreduce=allreduce(19.5))], policy)
    assert low.kind.value == "busbw-low" and "h1's baseline" in low.expected  # its own claim


def test_baseline_from_nccl_log_and_from_a_json_report(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_text(
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "   134217728      33554432     float     sum      -1    613.3  218.85  382.99      0"
        "    614.3  218.48  382.34      0\n"
    )
    assert verify.baseline_busbw(log) == (pytest.approx(382.99), ())
    report = tmp_path / "report.json"
    report.write_text(_report(410.5, None))
    assert verify.baseline_busbw(report) == (410.5, (("h0", 410.5),))
    report.write_text(_report(None))
    with pytest.raises(InputError, match="no all-reduce result"):
        verify.baseline_busbw(report)
    report.write_text('{"hosts": [{"host": "a", "allreduce": null}]}')
    with pytest.raises(InputError, match="not an envtool verify JSON report"):
        verify.baseline_busbw(report)


@pytest.mark.parametrize(
    "option",
    [
        "ProxyCommand=touch /tmp/envtool-proxy-ran",
        "StrictHostKeyChecking=no",
        "StrictHostKeyChecking accept-new",
        "UserKnownHostsFile=/dev/null",
        "LocalCommand=id",
        "KnownHostsCommand=/bin/true",
    ],
)
def test_ssh_options_that_skip_host_keys_need_the_insecure_flag(
    tmp_path: Path, option: str
) -> None:
    from conftest import run_main

    from envtool.cli import main

    argv = ("verify", "--hosts", "envtool-nosuch1", "--no-lock", "--ssh-option", option)
    code, out, err = run_main(main, tmp_path, [], argv)
    assert code == 2 and "pass --insecure-no-host-key-check" in err and not out
    assert not Path("/tmp/envtool-proxy-ran").exists()


def test_output_writes_the_table_too(tmp_path: Path) -> None:
    from conftest import run_main

    from envtool.cli import main

    target = tmp_path / "report.txt"
    argv = ("verify", "--hosts", "envtool-nosuch[1-3]", "--no-lock", "--output", str(target))
    code, out, err = run_main(main, tmp_path, [], argv)
    assert code == 1 and out == "" and f"wrote {target}" in err
    text = target.read_text()
    assert "envtool-nosuch[1-3]" in text and "unreachable" in text and "\x1b" not in text
