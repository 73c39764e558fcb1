"""The GPU layer end to end (issue 27): ``envtool verify`` over the local transport and over
sshd nodes, each node replaying a real nvidia-smi capture (../shared/data/real/nvidia-smi/,
SOURCES.md there) through the stand-in ``nvidia-smi`` on its PATH (tests/fixtures/
nvidia_smi.py), NVML pointed at a library that does not exist. torch here is a CPU build: it
says CUDA is unavailable and its arch list is empty, so no arch finding can come from it,
while the cards, read without torch, are judged all the same.

Faults are made from a real capture by changing only the values each test names."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Project, require, runtime_project
from fixtures import sshnodes
from fixtures.nvidia_smi import Faults, install

from envtool.judge.rules_gpu import GPU_RULES

GPU_KINDS = {k.value for k in GPU_RULES}
NO_NVML = "/nonexistent/libnvidia-ml.so.1"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
Doc = dict[str, Any]


@pytest.fixture(scope="module")
def shared(shared_data: Path) -> Path:
    return shared_data.parent


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, python_channel: Path) -> tuple[Project, Path]:
    """A project whose lock is what runs here (this python, this CPU torch), installed once."""
    root = tmp_path_factory.mktemp("gpus")
    project, prefix = runtime_project(root, python_channel)
    return project, prefix


def _gpu_findings(doc: Doc) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return sorted((f["kind"], f["severity"], f["subject"], tuple(f["hosts"]))
                  for f in doc["findings"] if f["kind"] in GPU_KINDS)  # fmt: skip


def _by_kind(doc: Doc, kind: str) -> Doc:
    [found] = [f for f in doc["findings"] if f["kind"] == kind]
    return dict(found)


def _words(text: object) -> str:
    return " ".join(str(text).split())


# --- the local transport: this machine through the same node script -------------------------


def _local(
    project: Project, prefix: Path, monkeypatch: pytest.MonkeyPatch, smi: Path, *extra: str
) -> tuple[int, Doc, str]:
    monkeypatch.setenv("PATH", f"{smi}:{os.environ['PATH']}")
    monkeypatch.setenv("ENVTOOL_NVML_LIBRARY", NO_NVML)
    code, out, err = project.run(
        "verify", "--transport", "local", "--hosts", "localhost", "--prefix", str(prefix),
        "--format", "json", "--timeout", "60", *extra,
    )  # fmt: skip
    assert out, err
    return code, json.loads(out), err


def test_a_busy_gpu_is_named_with_its_pids_over_the_local_transport(
    env: tuple[Project, Path], shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, prefix = env
    smi = install(tmp_path / "smi", shared, "h100", "load").parent  # as recorded
    code, doc, _ = _local(project, prefix, monkeypatch, smi)  # --min-gpus 1, the default
    busy = _by_kind(doc, "gpu-busy")
    assert (busy["severity"], busy["subject"], busy["hosts"]) == ("error", "GPU 0", ["localhost"])
    # the pids are the capture's: no user is said unless this machine has such a pid now
    held = r"pid {} \({}(?:, [\w-]+)?, {} MiB\)"
    assert re.fullmatch(
        "GPU 0 held by " + ", ".join([held.format(11327, "/root/tools/memhog", 2566),
                                      held.format(11328, "/root/tools/memhog", 1542),
                                      held.format(11345, r"\./gpu_burn", 15690)]),
        _words(busy["actual"]),
    ), busy["actual"]  # fmt: skip
    assert _words(busy["expected"]) == "at most 0 MiB held by other processes"
    assert (
        _words(busy["hint"])
        == "stop pid 11327, 11328, 11345 or use other GPUs (CUDA_VISIBLE_DEVICES)"
    )
    # the card is read without torch: its finding stands beside torch's own (a CPU build)
    assert _by_kind(doc, "cuda-unavailable")["hosts"] == ["localhost"]
    assert not [f for f in doc["findings"] if f["kind"] == "gpu-arch-unsupported"]
    assert _gpu_findings(doc) == [("gpu-busy", "error", "GPU 0", ("localhost",))]
    [host] = doc["hosts"]
    assert host["facts"]["cuda_available"] is False and host["facts"]["devices"] == []
    gpus = host["gpus"]
    assert (gpus["source"], gpus["driver"]) == ("nvidia-smi", "590.48.01")
    assert [d["name"] for d in gpus["devices"]] == ["NVIDIA H100 80GB HBM3"]
    assert [(p["pid"], p["used_mib"]) for p in gpus["processes"]] == [
        (11327, 2566), (11328, 1542), (11345, 15690)
    ]  # fmt: skip
    assert code == 1


def test_a_policy_allowing_the_foreign_memory_passes_the_busy_gpu(
    env: tuple[Project, Path], shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, prefix = env
    smi = install(tmp_path / "smi", shared, "h100", "load").parent  # 19798 MiB held in all
    policy = tmp_path / "policy.yml"
    policy.write_text("gpus:\n  foreign_memory_mib: 20000\n")
    code, doc, _ = _local(project, prefix, monkeypatch, smi, "--min-gpus", "0",
                          "--policy", str(policy))  # fmt: skip
    assert _gpu_findings(doc) == []
    assert code == 0, doc["findings"]


def test_a_bad_policy_file_exits_2_before_any_node_is_contacted(
    env: tuple[Project, Path], tmp_path: Path
) -> None:
    project, _ = env
    marker = tmp_path / "contacted"
    node = tmp_path / "node"  # its python only leaves a mark: any node contacted is seen
    (node / "bin").mkdir(parents=True)
    (node / "bin" / "python").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (node / "bin" / "python").chmod(0o755)
    policy = tmp_path / "policy.yml"
    policy.write_text("gpus:\n  model: H100\n  mig_alowed: true\n")
    code, out, err = project.run(
        "verify", "--transport", "local", "--hosts", "localhost", "--no-lock",
        "--prefix", str(node), "--policy", str(policy),
    )  # fmt: skip
    assert code == 2 and not out
    assert f"{policy}:3: unknown key gpus.mig_alowed" in err
    assert len(err.strip().splitlines()) == 1, err
    assert not marker.exists()
    code, _, err = project.run("verify", "--transport", "local", "--hosts", "localhost",
                               "--no-lock", "--prefix", str(node), "--policy",
                               str(tmp_path / "absent.yml"))  # fmt: skip
    assert code == 2 and "absent.yml" in err and not marker.exists()


def test_preflight_reads_its_policy_before_any_srun(
    env: tuple[Project, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project, _ = env
    monkeypatch.setenv("SLURM_JOB_ID", "4242")  # an allocation, but no srun is reached
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[01-02]")
    policy = tmp_path / "policy.yml"
    policy.write_text("accept:\n  - gpu-modle-differs\n")
    code, out, err = project.run("preflight", "--no-lock", "--policy", str(policy))
    assert code == 2 and not out
    assert f"{policy}:2: accept: 'gpu-modle-differs' is no finding kind" in err


# --- sshd nodes, each replaying its own capture ----------------------------------------------


@dataclass
class Rig:
    project: Project
    cluster: sshnodes.Cluster
    smi: dict[int, Path]  # node number → the folder its sessions find nvidia-smi in
    shared: Path

    def cards(self, *per_node: tuple[str, Faults | None]) -> None:
        """Node i+1 replays ``per_node[i]``: (capture, faults), idle."""
        for i, (capture, faults) in enumerate(per_node, start=1):
            install(self.smi[i], self.shared, capture, "idle", faults)


@pytest.fixture(scope="module")
def rig(
    tmp_path_factory: pytest.TempPathFactory, env: tuple[Project, Path], shared: Path
) -> Iterator[Rig]:
    """Three sshd nodes sharing one prefix, each with its own nvidia-smi folder on PATH."""
    require(sshnodes.available(), "OpenSSH sshd is not installed (apt-get install openssh-server)")
    project, prefix = env
    root = tmp_path_factory.mktemp("gpu-nodes")
    (root / "tmp").mkdir()
    smi = {i: root / f"smi{i}" for i in (1, 2, 3)}
    envs = [{"CONDA_PREFIX": str(prefix), "TMPDIR": str(root / "tmp"),
             "PATH": f"{smi[i]}:{SYSTEM_PATH}", "ENVTOOL_NVML_LIBRARY": NO_NVML}
            for i in (1, 2, 3)]  # fmt: skip
    cluster = sshnodes.start_cluster(root / "ssh", envs)
    try:
        yield Rig(project, cluster, smi, shared)
    finally:
        cluster.stop()


def _verify(rig: Rig, *extra: str) -> tuple[int, Doc]:
    code, out, err = rig.project.run(
        "verify", "--hosts", "node[1-3]", "-F", str(rig.cluster.ssh_config),
        "--format", "json", "--timeout", "60", *extra,
    )  # fmt: skip
    assert out, err
    doc: Doc = json.loads(out)
    assert all(h["ok"] for h in doc["hosts"]), doc["hosts"]
    return code, doc


IDLE: tuple[str, Faults | None] = ("h100", None)


def test_healthy_h100_nodes_give_no_gpu_finding(rig: Rig) -> None:
    rig.cards(IDLE, IDLE, IDLE)
    code, doc = _verify(rig, "--min-gpus", "0")
    assert _gpu_findings(doc) == []
    assert [h["gpus"]["devices"][0]["name"] for h in doc["hosts"]] == ["NVIDIA H100 80GB HBM3"] * 3
    assert code == 0, doc["findings"]


def test_a_heterogeneous_cluster_names_each_odd_node(rig: Rig) -> None:
    # node2: the H100 idle capture with mig.mode.current Disabled -> Enabled (nothing else)
    mig = Faults(values={"mig.mode.current": "Enabled"})
    rig.cards(IDLE, ("h100", mig), ("h200", None))  # node3: the real H200 capture
    code, doc = _verify(rig)  # --min-gpus 1: torch says CUDA is unavailable on every node
    assert _gpu_findings(doc) == [
        ("gpu-mig-enabled", "warning", "GPU 0", ("node2",)),
        ("gpu-model-differs", "error", "GPU model", ("node3",)),
    ]  # the H200's memory (143771 MiB) and its capability follow from its model
    model = _by_kind(doc, "gpu-model-differs")
    assert "NVIDIA H100 80GB HBM3" in model["expected"] and "NVIDIA H200" in model["actual"]
    assert not [f for f in doc["findings"] if f["kind"] == "gpu-memory-differs"]
    assert _by_kind(doc, "cuda-unavailable")["hosts"] == ["node1", "node2", "node3"]
    assert not [f for f in doc["findings"] if f["kind"] == "gpu-arch-unsupported"]  # arch list []
    assert [h["gpus"]["devices"][0]["mig_mode"] for h in doc["hosts"]] == [False, True, False]
    assert code == 1
    code, out, _ = rig.project.run("verify", "--hosts", "node[1-3]", "-F",
                                   str(rig.cluster.ssh_config), "--timeout", "60")  # fmt: skip
    text = _words(out)  # the table lists the cards' findings, never counted as packages
    assert "gpu-model-differs" in text and "gpu-mig-enabled" in text, out
    assert "NVIDIA H200" in text and "more about other packages" not in text, out


def test_a_policy_accepting_the_model_difference_makes_it_info(rig: Rig, tmp_path: Path) -> None:
    rig.cards(IDLE, IDLE, ("h200", None))
    policy = tmp_path / "policy.yml"
    policy.write_text("accept:\n  - gpu-model-differs\n")
    code, doc = _verify(rig, "--min-gpus", "0", "--policy", str(policy))
    assert _gpu_findings(doc) == [("gpu-model-differs", "info", "GPU model", ("node3",))]
    assert code == 0, doc["findings"]


def test_ecc_remap_and_pcie_faults_are_named_on_their_nodes(rig: Rig) -> None:
    # node1: pcie.link.width.current 16 -> 8 (max stays 16); node2:
    # ecc.errors.uncorrected.volatile.total 0 -> 2; node3: remapped_rows.pending No -> Yes
    # (what the driver shows after an uncorrectable error until the GPU is reset)
    rig.cards(("h100", Faults(values={"pcie.link.width.current": "8"})),
              ("h100", Faults(values={"ecc.errors.uncorrected.volatile.total": "2"})),
              ("h100", Faults(values={"remapped_rows.pending": "Yes"})))  # fmt: skip
    code, doc = _verify(rig, "--min-gpus", "0")
    assert sorted(_gpu_findings(doc)) == [
        ("gpu-ecc-uncorrectable", "error", "GPU 0", ("node2",)),
        ("gpu-pcie-degraded", "warning", "GPU 0", ("node1",)),
        ("gpu-row-remap", "error", "GPU 0", ("node3",)),
    ]
    ecc = _by_kind(doc, "gpu-ecc-uncorrectable")
    assert _words(ecc["actual"]).startswith("volatile 2,")
    assert _words(ecc["hint"]) == "drain the node; reset or replace GPU 0"
    pcie = _by_kind(doc, "gpu-pcie-degraded")
    assert "8" in pcie["actual"] and "16" in pcie["expected"]
    assert code == 1
