"""Which GPUs ``preflight --quick`` judges (issue 33 item 4): in a job's Prolog only the job's
(``--job-gpus``, as SLURM_JOB_GPUS / CUDA_VISIBLE_DEVICES name them) and the processes on
them; as a HealthCheckProgram (``--health``) their health, never who holds them. Real envtool
processes on the stand-in nvidia-smi (tests/fixtures/nvidia_smi.py): the idle H100 capture
with the fixture's copy of it as GPU 1 and one compute-apps row added on GPU 1 (another job's
training process), or the H100 load capture (its three processes on GPU 0). The run on a real
Slurm cluster, as slurmd starts the contrib script: tests/commands/test_prolog_slurm.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from fixtures.nvidia_smi import Faults
from test_preflight_quick import HOLDERS, Node, _flat, node  # noqa: F401 - the module's fixture

GPU1 = "GPU-00000000-0000-0000-0000-000000000001"  # the fixture's copy of GPU 0, as GPU 1
OTHER_JOB = {"gpu_uuid": GPU1, "pid": "4242", "process_name": "python train.py",
             "used_gpu_memory": "15000 MiB", "gpu_name": "NVIDIA H100 80GB HBM3"}  # fmt: skip
ECC = {"ecc.errors.uncorrected.volatile.total": "2", "ecc.errors.uncorrected.aggregate.total": "2"}


def _shared(node: Node) -> Path:  # noqa: F811
    return node.smi("idle", Faults(extra_gpus=1, add_apps=(OTHER_JOB,)), "shared")


def test_a_job_given_the_free_gpu_passes_beside_another_job(node: Node) -> None:  # noqa: F811
    smi = _shared(node)
    code, out, _ = node.quick(smi, "--drain-reason")  # every GPU judged: what drained it
    assert (code, out) == (1, "envtool: gpu-busy GPU 1 pid 4242\n")
    code, out, err = node.quick(smi, "--job-gpus", "0", "--drain-reason")
    assert (code, out) == (0, ""), err
    said = "the GPUs not the job's (GPUs judged: 1 of 2, the job's: 0)"
    assert err == f"envtool: not judged: {said}\n"
    code, out, err = node.quick(smi, "--job-gpus", "0")
    assert code == 0, out + err
    flat = _flat(out)
    assert "GPUs read without torch: 2x NVIDIA H100 80GB HBM3" in flat and said in flat


@pytest.mark.parametrize("named", ["1", GPU1, "0,1"])
def test_a_job_given_the_held_gpu_is_refused_naming_the_pid(node: Node, named: str) -> None:  # noqa: F811
    code, out, _ = node.quick(_shared(node), "--job-gpus", named, "--drain-reason")
    assert (code, out) == (1, "envtool: gpu-busy GPU 1 pid 4242\n")


def test_a_job_gpu_the_node_lacks_is_too_few_gpus(node: Node) -> None:  # noqa: F811
    code, out, _ = node.quick(node.smi("idle"), "--job-gpus", "0,3", "--drain-reason")
    assert code == 1 and out.startswith("envtool: too-few-gpus"), out
    code, out, _ = node.quick(node.smi("idle"), "--job-gpus", "0,3")
    assert code == 1 and "the job's GPUs 0,3 (--job-gpus)" in _flat(out)


def test_a_health_check_judges_health_not_occupancy(node: Node) -> None:  # noqa: F811
    code, out, _ = node.quick(node.smi("load"), "--drain-reason")
    assert (code, out) == (1, f"envtool: gpu-busy GPU 0 {HOLDERS}\n")
    code, out, err = node.quick(node.smi("load"), "--health", "--drain-reason")
    assert (code, out) == (0, ""), err
    said = "occupancy (health check: the processes holding a GPU are not judged)"
    assert err == f"envtool: not judged: {said}\n"
    code, out, _ = node.quick(node.smi("load"), "--health")
    assert code == 0 and said in _flat(out)
    # changed from the load capture: the uncorrectable ECC counts, 0 -> 2 (nothing else)
    code, out, _ = node.quick(node.smi("load", Faults(values=ECC), "ecc"), "--health",
                              "--drain-reason")  # fmt: skip
    assert (code, out) == (1, "envtool: gpu-ecc-uncorrectable GPU 0\n")


@pytest.mark.parametrize(
    ("args", "said"),
    [(("--job-gpus", "0-1"), "--job-gpus"), (("--job-gpus", ""), "--job-gpus"),
     (("--job-gpus", "NoDevFiles"), "--job-gpus"), (("--job-gpus", "MIG-0"), "MIG instance"),
     (("--job-gpus", "0", "--health"), "not both")],
)  # fmt: skip
def test_a_bad_gpu_list_is_exit_2_naming_the_option(
    node: Node,  # noqa: F811
    args: tuple[str, ...],
    said: str,
) -> None:
    code, out, err = node.quick(node.smi("idle"), *args, "--drain-reason")
    assert (code, out) == (2, "") and said in err, err


@pytest.mark.parametrize("args", [("--job-gpus", "0"), ("--health",)])
def test_the_scope_without_quick_is_a_usage_error(args: tuple[str, ...]) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    argv = [sys.executable, "-m", "envtool", "preflight", *args]
    out = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
                         check=False)  # fmt: skip
    assert out.returncode == 2 and f"{args[0]} goes with --quick" in out.stderr
