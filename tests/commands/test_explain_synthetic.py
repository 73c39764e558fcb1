"""``envtool explain`` on logs written here (synthetic, each said so): a 4-rank interleaved
``srun --label`` job whose rank 2 ran out of /dev/shm, one with only watchdog timeouts,
hostile bytes (binary garbage, NUL, terminal escapes, a 10 MB line), an empty log, stdin."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO, run_main

from envtool.cli import main
from envtool.protocol import explain_report

HOSTS = ("node01", "node02", "node03", "node04")


def _rank_lines(task: int, shm_full: bool, timeout: bool) -> list[str]:
    """What one rank of a synthetic srun --label job writes (NCCL_DEBUG=INFO)."""
    host, pid = HOSTS[task], 4100 + task
    nccl = f"{task}: {host}:{pid}:{pid} [0] NCCL INFO"
    lines = [
        f"{nccl} Bootstrap : Using eth0:10.0.0.{task + 1}<0>",
        f"{nccl} NET/Socket : Using [0]eth0:10.0.0.{task + 1}<0>",
        f"{nccl} comm 0x55d0 rank {task} nranks 4 cudaDev 0 busId 1000 - Init COMPLETE",
    ]
    if shm_full:
        lines += [
            f"{task}: {host}:{pid}:{pid + 9} [0] include/shm.h:28 NCCL WARN Call to "
            "posix_fallocate failed : No space left on device",
            f"{task}: {host}:{pid}:{pid + 9} [0] NCCL INFO include/shm.h:41 -> 2",
        ]
    if timeout:
        lines += [
            f"{task}: [rank{task}]:[E ProcessGroupNCCL.cpp:607] [Rank {task}] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, "
            "NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600013 "
            "milliseconds before timing out.",
            f"{task}: [rank{task}]: terminate called after throwing an instance of "
            "'c10::DistBackendError'",
        ]
    else:
        lines.append(f"{task}: [rank{task}]: step 100 loss 2.31")
    return lines


def _interleaved(shm_task: int | None) -> str:
    ranks = [_rank_lines(t, t == shm_task, t != shm_task) for t in range(4)]
    rows = itertools.zip_longest(*ranks)
    return "".join(line + "\n" for row in rows for line in row if line is not None)


def _explain(tmp_path: Path, text: str | bytes, *args: str) -> tuple[int, str, str]:
    log = tmp_path / "job.log"
    log.write_bytes(text if isinstance(text, bytes) else text.encode())
    return run_main(main, tmp_path, [], ("explain", str(log), *args))


def test_synthetic_4_ranks_interleaved_shm_full_on_rank_2(tmp_path: Path) -> None:
    code, out, _ = _explain(tmp_path, _interleaved(shm_task=2), "--format", "json")
    doc = explain_report.loads(out, "stdout")
    assert code == 1 and doc.status == "cause"
    cause = doc.findings[0]
    assert cause.finding.kind == "shm-small" and cause.finding.hosts == ("node03",)
    assert cause.where == "node03 (task 2, GPU 0)"
    # after two ranks' timeouts (lines 13, 14), and still the first by precedence
    assert "(job.log:15)" in doc.verdict and "posix_fallocate" in cause.evidence[0].text
    assert dict(doc.cascade) == {"watchdog-timeout": 3, "sigabrt": 3}  # the teardown, counted
    assert doc.files[0].attributed == doc.files[0].lines == 21


def test_synthetic_only_timeouts_say_who_reported_what(tmp_path: Path) -> None:
    code, out, _ = _explain(tmp_path, _interleaved(shm_task=None), "--format", "json")
    doc = json.loads(out)
    assert code == 4 and doc["status"] == "not-established"
    kinds = [f["finding"]["kind"] for f in doc["findings"]]
    assert kinds == ["cause-not-established", "collective-timeout"]
    actual = doc["findings"][1]["finding"]["actual"]
    assert "ALLREDUCE SeqNum=5, Timeout(ms)=600000" in actual
    for task in range(4):
        assert f"rank {task}, task {task} (ran 600013 ms)" in actual  # no host on those lines


def test_synthetic_a_silent_rank_is_named(tmp_path: Path) -> None:
    ranks = [_rank_lines(t, False, t != 2) for t in range(4)]
    code, out, _ = _explain(
        tmp_path, "".join(f"{line}\n" for r in ranks for line in r), "--format", "json"
    )
    doc = json.loads(out)
    assert code == 4 and doc["silent"] == [2]
    assert "no timeout from rank 2" in doc["findings"][1]["finding"]["actual"]


def test_synthetic_binary_garbage_is_one_line(tmp_path: Path) -> None:
    code, out, err = _explain(tmp_path, os.urandom(200_000))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "job.log: not a text log (binary data from byte" in err


def test_synthetic_nul_escapes_and_a_10_mb_line(tmp_path: Path) -> None:
    text = (
        b"\x1b[2J\x1b]0;owned\x07 starting\0\0\n"
        + b"A" * 10_000_000
        + b"\n"
        + b"RuntimeError: CUDA error: uncorrectable ECC error encountered\x1b[31m\r\n"
    )
    code, out, err = _explain(tmp_path, text)
    assert code == 1 and err == "" and "\x1b" not in out and "\0" not in out
    assert out.startswith("cause: gpu-ecc-uncorrectable on the job")
    assert "encountered\\x1b[31m" in out  # the escape shown, not sent to the terminal
    flat = " ".join(out.split())  # folded at the terminal's (or COLUMNS') width
    assert "1 line over 65536 bytes read in part (line 2: 10000000 bytes)" in flat
    code, out, _ = _explain(tmp_path, text, "--format", "json")
    doc = explain_report.loads(out, "stdout")
    assert doc.files[0].cut == 1 and doc.files[0].odd == 1 and doc.files[0].lines == 3


def test_synthetic_a_10_mb_line_alone_is_no_failure(tmp_path: Path) -> None:
    code, out, _ = _explain(tmp_path, b"x" * 10_000_000)  # no newline at its end either
    assert code == 0 and out.startswith("no failure in the logs: 1 line of 1 file read")


def test_an_empty_log_shows_no_failure(tmp_path: Path) -> None:
    code, out, _ = _explain(tmp_path, b"", "--format", "json")
    doc = explain_report.loads(out, "stdout")
    assert code == 0 and doc.status == "no-failure" and doc.findings == ()


def test_synthetic_a_healthy_log_is_no_failure(tmp_path: Path) -> None:
    healthy = "".join(f"{line}\n" for t in range(2) for line in _rank_lines(t, False, False))
    healthy += "node01:4100:4100 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so\n"
    code, out, _ = _explain(tmp_path, healthy)
    assert code == 0 and out.startswith("no failure in the logs: 9 lines of 1 file read")


def test_bad_paths_are_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, _, err = run_main(main, tmp_path, [], ("explain", str(tmp_path / "empty")))
    assert code == 2 and "a folder with no files" in err and err.count("\n") == 1
    code, _, err = run_main(main, tmp_path, [], ("explain", str(tmp_path / "none.log")))
    assert code == 2 and "log not found" in err


def test_synthetic_stdin(tmp_path: Path) -> None:
    log = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    proc = subprocess.run(
        [sys.executable, "-m", "envtool", "explain", "-"],
        input=log.encode(),
        capture_output=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.decode().startswith("cause: gpu-arch-unsupported on the job — ")
    assert "(<stdin>:1)" in proc.stdout.decode()
