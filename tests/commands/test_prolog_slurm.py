"""contrib/slurm/envtool-prolog.sh as slurmd runs it, on a real Slurm cluster (slurmctld + 2
slurmd, tests/fixtures/slurm.py) whose nodes have 2 gres GPUs each: the script is both the
``Prolog`` (slurmd gives it SLURM_JOB_ID, SLURM_JOB_GPUS, CUDA_VISIBLE_DEVICES) and the
``HealthCheckProgram`` (no job). Each node's stand-in ``nvidia-smi`` replays the real idle H100
capture with a copy of it as GPU 1 (tests/fixtures/nvidia_smi.py); what holds a GPU is a
compute-apps row the test adds. slurmd gives a prolog no PATH: a wrapper (this test's only
addition) names the stand-in, the lock, the prefix and envtool, then runs the contrib script
unchanged and logs its exit code (issue 33 item 4)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import KERNEL_LOG, REPO, require
from fixtures import slurm
from fixtures.lock_records import real_prefix
from fixtures.nvidia_smi import Faults, install

SCRIPT = REPO / "contrib" / "slurm" / "envtool-prolog.sh"
HEALTH_S = 3  # HealthCheckInterval
FOREIGN = 4242  # the pid on node1's GPU 1: a process Slurm did not start for any job here
WRAPPER = """#!/bin/sh
started=$(date +%s.%N)
node=${{SLURMD_NODENAME:-$(hostname -s)}}
export PATH={root}/smi/$node:{path} ENVTOOL={root}/bin/envtool LOCK={lock} PREFIX={prefix}
export ENVTOOL_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 ENVTOOL_CACHE_DIR={root}/cache
export {kernel_log}={kernel} SLURM_CONF={conf}
sh {script}
code=$?
echo "$started ${{SLURM_JOB_ID:-health}} $node $code" >> {root}/runs.log
exit $code
"""


def _app(gpu: int, pid: int, name: str) -> dict[str, str]:
    """A compute-apps row holding 15000 MiB of GPU ``gpu`` (its stand-in UUID and bus id)."""
    return {"gpu_uuid": f"GPU-00000000-0000-0000-0000-{gpu:012d}", "pid": str(pid),
            "process_name": name, "used_gpu_memory": "15000 MiB",
            "gpu_name": "NVIDIA H100 80GB HBM3"}  # fmt: skip


@dataclass
class Lab:
    root: Path
    shared: Path
    env: dict[str, str]

    def smi(self, node: str, *apps: dict[str, str]) -> None:
        """``node``'s nvidia-smi from now on: 2 idle H100s, ``apps`` holding them (replaced in
        one rename: a run reading it meanwhile reads the old or the new, never half)."""
        staged = self.root / "staging" / node
        install(staged, self.shared, "h100", "idle", Faults(extra_gpus=1, add_apps=apps))
        folder = self.root / "smi" / node
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(staged / "nvidia-smi", folder / "nvidia-smi")
        os.replace(staged / "nvidia-smi.json", folder / "nvidia-smi.json")

    def slurm(self, *argv: str) -> str:
        out = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30,
                             check=True)  # fmt: skip
        return out.stdout.strip()

    def submit(self, node: str, gpus: int) -> str:
        """A batch job on ``node`` given ``gpus`` GPUs; its id."""
        return self.slurm("sbatch", "--parsable", "-w", node, f"--gres=gpu:{gpus}", "-o",
                          "/dev/null", "--wrap", "sleep 300")  # fmt: skip

    def prolog_ran(self, job: str) -> None:
        """Wait until ``job``'s prolog has run (slurmctld says RUNNING before it does)."""
        _until(lambda: any(r[0] == job for r in self.runs()), 30, lambda: str(self.runs()))

    def job(self, job: str, field: str) -> str:
        return _field(self.slurm("scontrol", "show", "job", job), field)

    def node(self, node: str, field: str) -> str:
        return _field(self.slurm("scontrol", "show", "node", node), field)

    def runs(self, since: float = 0.0) -> list[tuple[str, str, int]]:
        """(job or ``health``, node, exit code) of each run the wrapper logged that started
        after ``since``."""
        log = self.root / "runs.log"
        lines = log.read_text().split("\n") if log.exists() else []
        rows = [line.split() for line in lines if line]
        return [(r[1], r[2], int(r[3])) for r in rows if float(r[0]) > since]


def _field(text: str, name: str) -> str:
    """``Reason=envtool: gpu-busy ...`` → its value (to the next `` Key=`` or line end)."""
    for line in text.splitlines():
        _, found, rest = f" {line}".partition(f" {name}=")
        if found:
            words = rest.split(" ")
            end = next((i for i, w in enumerate(words) if "=" in w and i), len(words))
            return " ".join(words[:end])
    return ""


def _until(what: Callable[[], bool], seconds: float, said: Callable[[], str]) -> None:
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, said()
        time.sleep(0.2)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Iterator[Lab]:
    require(slurm.available(), "Slurm is not installed (apt-get install slurmctld slurmd)")
    root = tmp_path_factory.mktemp("prolog")
    lock, prefix = real_prefix(root, shared_data)
    (root / "bin").mkdir()
    (root / "bin" / "envtool").write_text(f'#!/bin/sh\nexec {sys.executable} -m envtool "$@"\n')
    (root / "bin" / "envtool").chmod(0o755)
    cluster_root = root / "slurm"
    wrapper = root / "prolog.sh"
    tools = ":".join(dict.fromkeys([str(Path(shutil.which("scontrol") or "/usr/bin/scontrol")
                                             .parent), "/usr/bin", "/bin"]))  # fmt: skip
    wrapper.write_text(WRAPPER.format(
        root=root, path=tools, lock=lock, prefix=prefix, kernel_log=KERNEL_LOG,
        kernel=os.environ[KERNEL_LOG], conf=cluster_root / "etc" / "slurm.conf", script=SCRIPT,
    ))  # fmt: skip
    wrapper.chmod(0o755)
    lab = Lab(root, shared_data.parent, {})
    lab.smi("node1", _app(1, FOREIGN, "/home/bob/stray.py"))
    lab.smi("node2")
    extra = (f"Prolog={wrapper}\nHealthCheckProgram={wrapper}\n"
             f"HealthCheckInterval={HEALTH_S}\nHealthCheckNodeState=ANY\n")  # fmt: skip
    cluster = slurm.start(cluster_root, nodes=2, gpus=2, extra=extra)
    lab.env = {**os.environ, **cluster.env}
    try:
        yield lab
    finally:
        with_jobs = lab.slurm("squeue", "-h", "-o", "%i").split()
        if with_jobs:
            lab.slurm("scancel", *with_jobs)
        _until(lambda: not lab.slurm("squeue", "-h", "-o", "%i"), 20, lambda: "jobs left")
        cluster.stop()


def test_a_prolog_judges_only_the_gpus_its_job_was_given(lab: Lab) -> None:
    """node1's GPU 1 holds a process of no job of this node's: a job given GPU 0 starts
    and the node stays up (the old script drained it for GPU 1); a job then given GPU 1 is
    refused with the pid in the drain reason, and the first job keeps running
    (MIXED+DRAIN)."""
    first = lab.submit("node1", 1)
    lab.prolog_ran(first)
    assert (first, "node1", 0) in lab.runs(), lab.node("node1", "Reason")
    assert lab.job(first, "JobState") == "RUNNING"
    assert "DRAIN" not in lab.node("node1", "State")
    second = lab.submit("node1", 1)  # GPU 0 is the first job's: this one gets GPU 1
    lab.prolog_ran(second)
    assert lab.node("node1", "Reason").startswith(f"envtool: gpu-busy GPU 1 pid {FOREIGN}")
    # the refused job is COMPLETING for a moment (its Prolog failed): then the node is
    # MIXED+DRAIN, the first job still on it
    _until(lambda: "COMPLETING" not in lab.node("node1", "State"), 20,
           lambda: lab.node("node1", "State"))  # fmt: skip
    assert lab.node("node1", "State") == "MIXED+DRAIN"
    assert (second, "node1", 1) in lab.runs()
    _until(lambda: lab.job(second, "Reason") == "launch_failed_requeued_held", 20,
           lambda: lab.job(second, "Reason"))  # fmt: skip
    assert lab.job(first, "JobState") == "RUNNING"
    lab.slurm("scancel", first, second)


def test_a_health_check_never_drains_a_node_merely_in_use(lab: Lab) -> None:
    """node2 runs a job on both GPUs whose training processes then hold them: the health
    checks that run meanwhile (no SLURM_JOB_ID) judge health only and leave the node up."""
    job = lab.submit("node2", 2)
    lab.prolog_ran(job)
    assert (job, "node2", 0) in lab.runs() and lab.job(job, "JobState") == "RUNNING"
    lab.smi("node2", _app(0, 5001, "python train.py"), _app(1, 5002, "python train.py"))
    since = time.time()
    checked = lambda: [r for r in lab.runs(since) if r[:2] == ("health", "node2")]  # noqa: E731
    _until(lambda: bool(checked()), 4 * HEALTH_S, lambda: str(lab.runs()))
    assert checked() and all(code == 0 for *_, code in checked()), lab.runs()
    assert "DRAIN" not in lab.node("node2", "State"), lab.node("node2", "Reason")
    assert lab.job(job, "JobState") == "RUNNING"
    health = [r for r in lab.runs() if r[0] == "health"]
    assert {n for _, n, _ in health} == {"node1", "node2"} and all(c == 0 for *_, c in health)
    lab.slurm("scancel", job)
