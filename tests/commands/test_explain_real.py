"""``envtool explain`` on the real failed jobs of ../shared/data/real/failed-jobs/ (read in
place): every case whose SOURCES.md row says the log alone suffices has its cause named with
the finding kind and the evidence line; the others say "not established" and what would
settle it. Never a wrong cause: each expectation is the thread's established cause."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import run_main

from envtool.cli import main
from envtool.protocol import explain_report


@dataclass(frozen=True)
class Case:
    """What the thread established, as explain must say it."""

    status: str  # cause | not-established
    kind: str  # the first finding's kind
    line: int  # the evidence line the verdict cites
    where: str  # who the log says wrote it ("the job": the log does not say)
    said: str  # words the verdict line must hold (the value that decides it)


CASES = {
    # the log alone suffices (SOURCES.md): the cause named
    "featdepth68-arch-sm86-no-kernel-image.log": Case(
        "cause", "gpu-arch-unsupported", 16, "the job", "no kernel image"
    ),
    "pytorch25581-driver-384-too-old.log": Case(
        "cause", "driver-too-old", 2, "the job", "CUDA 9.0"
    ),
    "aws-do-eks50-gloo-hostname-loopback-fallback.log": Case(
        "cause", "gloo-loopback", 1, "rank 8", "loopback"
    ),
    "torchtitan853-ci-container-shm-16mb.log": Case(
        "cause", "shm-small", 4, "the job", "/dev/shm/nccl-1YsMbG (7.0 MiB)"
    ),
    # the class from the log, the node from elsewhere (said as "open")
    "jade194-ecc-uncorrectable-node-dgk713.log": Case(
        "cause", "gpu-ecc-uncorrectable", 1, "the job", "uncorrectable ECC"
    ),
    # the log names the failing call and the only HCA in use: the NIC (why: node facts)
    "nccl799-roce-hca-ibv-modify-qp-enodev.log": Case(
        "cause", "ib-qp-error", 7, "72bf7b08-26f3-4ebc-8b9d-85df3e4414c0 (GPU 3)", "ibv_modify_qp"
    ),
    # the size disagreement between the two nodes (which setting: node facts, said as "open")
    "nccl969-config-mismatch-ib-collective-size.log": Case(
        "cause", "collective-mismatch", 1, "10.10.23.10 (GPU 0)", "peer 10.10.23.6"
    ),
    # the log alone does not suffice: not established, and what would settle it
    "dlrover1046-k8s-shm-sigbus-checkpoint.log": Case(
        "not-established", "cause-not-established", 1, "local rank 0", "/dev/shm"
    ),
    "hkproj1-ifname-no-route-to-host.log": Case(
        "not-established", "cause-not-established", 4, "the job", "interface NCCL chose"
    ),
    "nccl-tests206-memlock-ibv-reg-mr-enomem.log": Case(
        "not-established", "cause-not-established", 1, "the job", "ulimit -l"
    ),
    "pytorch73790-p2p-iommu-a6000-ddp-hang.log": Case(
        "not-established",
        "cause-not-established",
        5,
        "john-trx40-designare (GPU 1)",
        "Init COMPLETE",
    ),
    "instructlab520-watchdog-timeout-1ms.log": Case(
        "not-established", "cause-not-established", 2, "rank 3", "SeqNum=1"
    ),
    "particleflow390-watchdog-rank0-only-eval.log": Case(
        "not-established", "cause-not-established", 2, "the job", "WorkNCCL(SeqNum=..."
    ),
}


def test_every_case_of_the_corpus_has_its_row(shared_data: Path) -> None:
    logs = {p.name for p in (shared_data / "real" / "failed-jobs").glob("*.log")}
    assert logs == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_real_failed_job(shared_data: Path, tmp_path: Path, name: str) -> None:
    case = CASES[name]
    path = str(shared_data / "real" / "failed-jobs" / name)
    code, out, err = run_main(main, tmp_path, [], ("explain", path, "--format", "json"))
    assert err == ""
    assert code == (1 if case.status == "cause" else 4)
    doc = explain_report.loads(out, "stdout")
    assert doc.status == case.status
    first = doc.findings[0]
    assert first.finding.kind == case.kind
    assert first.where == case.where
    assert f"{name}:{case.line})" in doc.verdict and case.said in doc.verdict
    assert any(e.line == case.line and e.file == path for e in first.evidence)
    if case.status == "not-established":
        assert doc.verdict.startswith("cause not established: ") and first.needs
    else:
        assert doc.verdict.startswith(f"cause: {case.kind} on {case.where} — ")


def test_the_watchdog_case_says_which_rank_reported_what(shared_data: Path, tmp_path: Path) -> None:
    path = str(shared_data / "real" / "failed-jobs" / "instructlab520-watchdog-timeout-1ms.log")
    _, out, _ = run_main(main, tmp_path, [], ("explain", path, "--format", "json"))
    timeout = json.loads(out)["findings"][1]["finding"]
    assert timeout["kind"] == "collective-timeout" and timeout["subject"] == "ALLREDUCE SeqNum=1"
    assert timeout["actual"].startswith("rank 3 (ran 90 ms): ALLREDUCE SeqNum=1, Timeout(ms)=1")
    assert "the timeout is 1 ms" in timeout["actual"]


def test_the_text_report_leads_with_the_verdict(shared_data: Path, tmp_path: Path) -> None:
    path = str(shared_data / "real" / "failed-jobs" / "torchtitan853-ci-container-shm-16mb.log")
    code, out, _ = run_main(main, tmp_path, [], ("explain", path))
    flat = " ".join(out.split())  # folded at whatever width the terminal (or COLUMNS) has
    assert code == 1
    assert flat.startswith("cause: shm-small on the job — NCCL could not create /dev/shm/")
    assert "ERROR the job · shm-small · /dev/shm" in flat
    assert "torchtitan853-ci-container-shm-16mb.log:4: Error while creating shared memory" in flat
