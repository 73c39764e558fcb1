"""The initiating event by precedence, not by order; the teardown counted after it (synthetic
lines)."""

from __future__ import annotations

import io

from envtool.joblog.scan import FileScan, scan
from envtool.joblog.stream import lines
from envtool.judge.explain import Status, decide
from envtool.judge.kinds import Kind

TIMEOUT = (
    "[rank1]:[E] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, "
    "OpType=ALLGATHER, NumelIn=1, NumelOut=1, Timeout(ms)=600000)"
)


def _scan(name: str, *text: str) -> FileScan:
    return scan(name, lines(io.BytesIO("".join(t + "\n" for t in text).encode())))


def test_a_cause_in_another_file_beats_the_timeouts_before_it() -> None:
    v = decide(
        [
            _scan("rank1.log", TIMEOUT, "Signal 6 (SIGABRT)"),
            _scan("rank0.log", "RuntimeError: CUDA error: uncorrectable ECC error encountered"),
        ]
    )
    assert v.status is Status.CAUSE and v.exit_code == 1
    assert v.findings[0].finding.kind is Kind.GPU_ECC and v.findings[0].lead.file == "rank0.log"
    assert {s.value: n for s, n in v.cascade} == {"watchdog-timeout": 1, "sigabrt": 1}


def test_hardware_before_the_environment() -> None:
    v = decide(
        [
            _scan(
                "a.log",
                "Error while creating shared memory segment /dev/shm/nccl-x",
                "CUDA error: uncorrectable ECC error encountered",
            )
        ]
    )
    assert v.findings[0].finding.kind is Kind.GPU_ECC


def test_sigbus_is_shm_only_where_the_log_says_dev_shm() -> None:
    alone = decide([_scan("a.log", "Signal 7 (SIGBUS) received by PID 54")])
    assert alone.status is Status.NOT_ESTABLISHED and alone.exit_code == 4
    said = decide(
        [_scan("a.log", "saving to /dev/shm/ckpt", "Signal 7 (SIGBUS) received by PID 54")]
    )
    assert said.status is Status.CAUSE and said.findings[0].finding.kind is Kind.SHM_SMALL
    assert [e.line for e in said.findings[0].evidence] == [1, 2]


def test_only_timeouts_are_not_a_cause() -> None:
    v = decide([_scan("a.log", TIMEOUT, "[rank0]: step 7")])
    assert v.status is Status.NOT_ESTABLISHED and v.silent == (0,)
    assert [f.finding.kind for f in v.findings] == [
        Kind.CAUSE_NOT_ESTABLISHED,
        Kind.COLLECTIVE_TIMEOUT,
    ]
    assert v.findings[1].finding.subject == "ALLGATHER SeqNum=3"


def test_no_failure() -> None:
    v = decide([_scan("a.log", "epoch 1 done", "node1:1:1 [0] NCCL INFO Init COMPLETE")])
    assert v.status is Status.NO_FAILURE and v.exit_code == 0 and v.findings == ()
