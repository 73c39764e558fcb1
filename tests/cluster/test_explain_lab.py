"""``envtool explain`` on real failed jobs (synthetic: faults injected here, each said so): a
DDP job run by torchrun on three namespaced sshd nodes (tests/fixtures/netns.py), gloo on CPU,
its output gathered as pdsh gathers it (tests/fixtures/ddpjob.py). node2 has a private 64 MiB
tmpfs on /dev/shm, as a container started without ``--shm-size`` has.

- 16 ranks (6 + 5 + 5), rank 7 (on node2) sleeping past the 10 s timeout: the log alone
  establishes no cause; the 15 ranks' gloo timeouts are listed, and rank 7, on node2, as the
  one that reported none. Joined with the lab's verify report, node2's /dev/shm is beside it,
  never its cause (gloo uses no /dev/shm).
- The job script sets ``GLOO_SOCKET_IFNAME=eth9`` on node3: ``socket-ifname-unmatched`` on node3.
- A DataLoader's batches through /dev/shm: ``shm-small`` on node2, and joined with the verify
  report, verify's own ``shm-small`` on node2 confirms it; ``--hosts node[1-3]`` runs that
  verify over ssh itself and joins it the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import RuntimeLab as Rig
from conftest import runtime_lab
from fixtures import ddpjob

from envtool.protocol import explain_report

SETUP = {2: "mount -t tmpfs -o size=64m tmpfs /dev/shm"}
pytestmark = pytest.mark.usefixtures("cpu_exclusive")  # 16 ranks load both cores


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, python_channel: Path) -> Iterator[Rig]:
    with runtime_lab(tmp_path_factory.mktemp("jobs"), python_channel, SETUP) as rig:
        yield rig


@pytest.fixture(scope="module")
def report(rig: Rig) -> Path:
    """The lab's verify report (shm-small on node2)."""
    code, out, err = rig.project.run(
        "verify", "--hosts", "node[1-3]", "-F", str(rig.lab.cluster.ssh_config),
        "--min-gpus", "0", "--format", "json", "--timeout", "60",
    )  # fmt: skip
    assert code == 1 and '"shm-small"' in out, err
    path = rig.root / "verify.json"
    path.write_text(out)
    return path


def _job(
    rig: Rig,
    name: str,
    procs: list[int],
    env: dict[str, str],
    node_env: dict[int, dict[str, str]] | None = None,
) -> Path:
    folder = rig.root / name
    folder.mkdir()
    log, codes = ddpjob.run(rig.lab.cluster.ssh_config, folder, procs, env, node_env)
    assert any(codes), log.read_text()[-3000:]  # the job failed
    return log


def _explain(rig: Rig, log: Path, *args: str) -> tuple[int, explain_report.ExplainDocument, str]:
    code, out, err = rig.project.run("explain", str(log), "--format", "json", *args)
    assert out, err
    return code, explain_report.loads(out, "stdout"), out


def test_a_16_rank_job_whose_rank_7_sleeps_names_rank_7_on_node2(rig: Rig, report: Path) -> None:
    log = _job(rig, "sleep", [6, 5, 5], {"JOB_FAULT": "sleep", "JOB_RANK": "7"})
    code, doc, out = _explain(rig, log)
    assert code == 4 and doc.status == "not-established", out
    timeout = next(f for f in doc.findings if f.finding.kind == "collective-timeout")
    assert doc.silent == (7,), out
    assert "no timeout from rank 7 (node2)" in timeout.finding.actual, out
    assert "gloo" in timeout.finding.actual and "Timeout(ms)=10000" in timeout.finding.actual
    assert "rank 7 (node2)" in doc.verdict
    code, doc, out = _explain(rig, log, "--report", str(report))
    assert code == 4 and doc.status == "not-established", out  # /dev/shm is not gloo's
    assert [(j.role, j.finding.kind) for j in doc.joined if j.finding.kind == "shm-small"] == [
        ("beside", "shm-small")
    ]


def test_an_interface_the_job_script_names_on_node3_only(rig: Rig) -> None:
    env = {"JOB_INIT_TIMEOUT": "10"}  # the other nodes wait that long for node3's rank
    log = _job(rig, "ifname", [1, 1, 1], env, node_env={3: {"GLOO_SOCKET_IFNAME": "eth9"}})
    code, doc, out = _explain(rig, log)
    assert code == 1 and doc.status == "cause", out
    cause = doc.findings[0].finding
    assert (cause.kind, cause.subject, cause.hosts) == (
        "socket-ifname-unmatched", "GLOO_SOCKET_IFNAME", ("node3",)
    ), out  # fmt: skip
    assert "eth9" in cause.actual
    assert doc.verdict.startswith("cause: socket-ifname-unmatched on node3")


@pytest.fixture(scope="module")
def shm_log(rig: Rig) -> Path:
    """The DataLoader job's log (run once for the two tests that read it)."""
    return _job(rig, "shm", [1, 1, 1], {"JOB_FAULT": "shm"})


def test_a_dataloader_through_a_64_mib_dev_shm_on_node2(
    rig: Rig, report: Path, shm_log: Path
) -> None:
    log = shm_log
    code, doc, out = _explain(rig, log, "--report", str(report))
    assert code == 1 and doc.status == "cause", out
    cause = doc.findings[0]
    assert (cause.finding.kind, cause.finding.hosts) == ("shm-small", ("node2",)), out
    assert "/torch_" in cause.evidence[0].text and cause.evidence[0].where.startswith("node2")
    assert [(j.role, j.finding.kind, j.finding.hosts) for j in doc.joined][:1] == [
        ("confirms", "shm-small", ("node2",))
    ], json.dumps(json.loads(out)["joined"], indent=1)


def test_hosts_runs_verify_on_the_lab_over_ssh_and_joins_it(rig: Rig, shm_log: Path) -> None:
    log = shm_log
    ssh = ("--hosts", "node[1-3]", "-F", str(rig.lab.cluster.ssh_config), "--timeout", "60")
    code, doc, out = _explain(rig, log, *ssh)
    assert code == 1 and doc.findings[0].finding.hosts == ("node2",), out
    [same] = [j for j in doc.joined if j.role == "confirms"]
    assert (same.report, same.finding.kind, same.finding.hosts) == (
        "verify --hosts node[1-3]", "shm-small", ("node2",)
    ), out  # fmt: skip
