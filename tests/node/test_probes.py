"""The node package's facts and all-reduce, run for real (``python -m envtool_node.X``)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import require, run_main
from fixtures.gpu import cuda_devices, without_collected

from envtool.cli import main

MODULES = {"gpu_facts": "envtool_node.facts", "allreduce": "envtool_node.allreduce"}


def _torch() -> None:
    require(
        importlib.util.find_spec("torch") is not None,
        "torch is not installed (pip install torch==2.13.0)",
    )


def _probe(
    name: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-B", "-m", MODULES[name], *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**without_collected(dict(os.environ)), "ENVTOOL_TEST_TAG": TAG, **(env or {})},
        check=False,
    )


def test_gpu_facts_without_torch_and_env_allow_list() -> None:
    env = {
        "NCCL_SOCKET_IFNAME": "lo",
        "NCCL_IB_TOKEN_SECRET": "hunter2",
        "MASTER_PORT": "29500",
        "AWS_SECRET_ACCESS_KEY": "x",
    }
    out = _probe("gpu_facts", "--no-torch", env=env)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "envtool.gpu-facts/1"
    assert doc["env"] == {"MASTER_PORT": "29500", "NCCL_SOCKET_IFNAME": "lo"}
    assert "hunter2" not in out.stdout
    assert doc["python"] == ".".join(map(str, sys.version_info[:3]))


def test_gpu_facts_when_torch_is_broken(tmp_path: Path) -> None:
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise OSError('libcudart.so.11.0: cannot open')\n")
    out = _probe("gpu_facts", env={"PYTHONPATH": str(tmp_path)})
    assert out.returncode == 0 and "Traceback" not in out.stderr
    doc = json.loads(out.stdout)
    assert doc["torch"] is None and doc["cuda_available"] is False
    assert any("libcudart.so.11.0" in n for n in doc["notes"])


def test_gpu_facts_with_torch() -> None:
    _torch()
    doc = json.loads(_probe("gpu_facts").stdout)
    import torch

    assert doc["torch"] == str(torch.__version__)
    gpus = cuda_devices()
    if gpus:  # the CUDA variant: every device named, the NCCL torch links reported
        assert doc["cuda_available"] is True and doc["device_count"] == gpus
        assert len(doc["devices"]) == gpus and all(d["name"] for d in doc["devices"])
        assert doc["nccl"] and doc["nccl"].count(".") == 2
    else:
        assert doc["cuda_available"] is False and doc["device_count"] == 0
        assert doc["nccl"] is None  # a CPU build has no NCCL


@pytest.fixture(scope="module")
def allreduce_doc() -> dict:  # type: ignore[type-arg]
    _torch()
    out = _probe(
        "allreduce",
        "-b",
        "1K",
        "-e",
        "256K",
        "-f",
        "4",
        "-n",
        "4",
        "-w",
        "1",
        "--nproc",
        "3",
        "--backend",
        "gloo",
        "--format",
        "json",
        "--timeout",
        "120",
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_allreduce_rows_follow_nccl_tests_formulas(allreduce_doc: dict) -> None:  # type: ignore[type-arg]
    doc = allreduce_doc
    assert doc["schema"] == "envtool.allreduce/1" and doc["backend"] == "gloo"
    assert doc["nranks"] == 3 and len(doc["devices"]) == 3
    assert [r["size"] for r in doc["rows"]] == [1024, 4096, 16384, 65536, 262144]
    for row in doc["rows"]:
        assert row["count"] == row["size"] // 4
        for part in (row["oop"], row["ip"]):
            algbw = row["size"] / (part["time_us"] * 1e-6) / 1e9
            assert part["algbw"] == pytest.approx(algbw, rel=1e-9)
            assert part["busbw"] == pytest.approx(algbw * 2 * (3 - 1) / 3, rel=1e-9)
            assert part["wrong"] == 0
    assert doc["wrong_total"] == 0


def test_allreduce_deadline_is_kept_and_no_worker_outlives_it() -> None:
    _torch()
    assert _workers() == []
    start = time.monotonic()
    out = _probe(
        "allreduce",
        "-b",
        "1M",
        "-e",
        "1M",
        "-n",
        "100000",
        "--nproc",
        "2",
        "--format",
        "json",
        "--timeout",
        "3",
        timeout=60,
    )
    assert time.monotonic() - start < 20
    assert out.returncode == 1
    assert "deadline" in json.loads(out.stdout)["error"]
    time.sleep(1)
    assert _workers() == []  # the watchdog and the launcher left no rank running


def test_allreduce_sigterm_stops_its_ranks(tmp_path: Path) -> None:
    """Each rank runs in its own session: SIGTERM to the launcher (what the node script sends
    when the connection is gone) must still stop every rank."""
    _torch()
    sweep = ["-b", "1M", "-e", "1M", "-n", "1000000", "--nproc", "2", "--timeout", "120"]
    run = subprocess.Popen(
        [sys.executable, "-B", "-m", "envtool_node.allreduce", *sweep],
        env={**os.environ, "TMPDIR": str(tmp_path)},  # torchrun's and the ranks' --out is here
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def mine() -> list[str]:
        return [line for line in _ps() if str(tmp_path) in line]

    end = time.monotonic() + 90
    while len([a for a in mine() if "--worker" in a]) < 2 and time.monotonic() < end:
        time.sleep(0.1)  # two ranks, started directly
    assert run.poll() is None and len(mine()) >= 2, mine()
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 143 and "its ranks stopped" in err, err
    end = time.monotonic() + 5
    while mine() and time.monotonic() < end:
        time.sleep(0.05)
    assert mine() == []
    assert list(tmp_path.glob("envtool-allreduce-*")) == []


def test_allreduce_nccl_on_a_cpu_machine_fails_in_one_line() -> None:
    _torch()
    out = _probe(
        "allreduce",
        "-b",
        "8",
        "-e",
        "8",
        "--nproc",
        "1",
        "--backend",
        "nccl",
        "--format",
        "json",
        "--timeout",
        "60",
        timeout=90,
    )
    doc = json.loads(out.stdout)
    if cuda_devices():  # the GPU variant: one rank on one GPU with NCCL works
        assert out.returncode == 0 and doc["backend"] == "nccl" and not doc.get("error")
        return
    assert out.returncode == 1 and "nccl backend has no GPU" in doc["error"], doc
    assert "\n" not in doc["error"]


def test_envtool_probe_json(tmp_path: Path) -> None:
    _torch()
    code, out, err = run_main(
        main,
        tmp_path,
        [],
        (
            "probe",
            "--prefix",
            sys.prefix,
            "--format",
            "json",
            "-b",
            "8",
            "-e",
            "64",
            "-n",
            "2",
            "-w",
            "1",
        ),
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "envtool.probe/1"
    assert doc["facts"]["schema"] == "envtool.gpu-facts/1"
    ranks = cuda_devices() or 2  # one rank per GPU with NCCL, else 2 with gloo
    assert doc["allreduce"]["nranks"] == ranks and doc["allreduce"]["wrong_total"] == 0


def test_envtool_probe_table_without_allreduce(tmp_path: Path) -> None:
    code, out, _ = run_main(main, tmp_path, [], ("probe", "--prefix", sys.prefix, "--no-allreduce"))
    assert code == 0
    assert "CUDA available" in out and "glibc" in out


def _ps() -> list[str]:
    argv = ["ps", "-ww", "-eo", "args"]  # -ww: whole command lines, not cut at 80 columns
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.splitlines()


TAG = f"probes-{os.getpid()}"  # in every process these tests start: theirs, not another run's


def _workers() -> list[str]:
    """This test run's all-reduce ranks (tests in other processes run ranks of their own)."""
    from fixtures.sshnodes import processes_with_env

    mine = processes_with_env("ENVTOOL_TEST_TAG", {TAG}).values()
    return [line for line in mine if "envtool_node.allreduce --worker" in line]


def test_allreduce_failure_names_the_ranks_exception(tmp_path: Path) -> None:
    _torch()
    env = {**os.environ, "GLOO_SOCKET_IFNAME": "envtool-no-such-if0"}  # a wrong interface
    argv = [sys.executable, "-m", "envtool_node.allreduce", "-e", "1K", "-n", "1", "-w", "1"]
    out = subprocess.run(
        [*argv, "--backend", "gloo", "--format", "json", "--timeout", "60"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 1
    error = json.loads(out.stdout)["error"]
    assert "Unable to find address for: envtool-no-such-if0" in error, error
