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
