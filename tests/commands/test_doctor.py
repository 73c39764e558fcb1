"""``envtool doctor`` on real prefixes installed from a local channel: all ✓ on a good one,
✗ with the fixing command on broken ones (stale lock, missing, drifted, unfinished install,
no torch, busy port, failing DDP run)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import VIRTUAL_CUDA, require, run_main
from fixtures import promtool
from fixtures.channel import build_channel, realistic_packages
from fixtures.gpu import cuda_devices, ddp_plan
from fixtures.prefixes import add_dist_info, install_prefix
from fixtures.runtime import (
    DRIFTED_BUILD,
    LAB_ENV,
    SHORT,
    other_torch,
    runtime_packages,
    torch_version,
)
from fixtures.runtime import SP as RUNTIME_SP

from envtool.cli import main

ENV = LAB_ENV
# The lock the H100 report was made against: python 3.9, a CUDA 11.8 pytorch; the prefix
# installed from it runs this machine's interpreter and torch (a wrapper bin/python).
NOT_WHAT_RUNS = """\
name: ddp
channels: [{channel}]
dependencies: [python=3.9, "pytorch=*=cuda118*", cudatoolkit=11.8, nccl, numpy, pip]
"""
STEPS = ["lockfile", "environment", "packages", "consistency", "torch", "cuda", "ddp", "gpus",
         "network", "ports"]  # fmt: skip
MACHINE = ("gpus", "network")  # the machine's own state: its limits may warn, never fail here


@dataclass
class Lab:
    root: Path
    channel: Path
    good: Path  # a prefix installed from the lock

    def doctor(self, *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
        return run_main(main, cwd or self.root, [], ("doctor", *args))

    def install(self, prefix: Path, lock: str = "conda-lock.yml") -> None:
        code, _, err = run_main(
            main,
            self.root,
            [],
            (
                "install",
                "--allow-insecure-url",
                "--lockfile",
                lock,
                "--prefix",
                str(prefix),
                "--cache-dir",
                self.cache,
            ),
        )
        assert code == 0, err

    @property
    def cache(self) -> str:
        return str(self.root.parent / "cache")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def _ports() -> tuple[str, ...]:
    return ("--master-port", str(_free_port()), "--rdzv-port", str(_free_port()))


def _torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A lock of a local channel that describes what runs here (fixtures/runtime.py), and a
    prefix installed from it."""
    require(torch_version() is not None, "torch is not installed (pip install torch==2.13.0)")
    base = tmp_path_factory.mktemp("doctor")
    channel = build_channel(base / "channel", realistic_packages() + runtime_packages())
    root = base / "proj"
    root.mkdir()
    (root / "virtual-packages.yml").write_text(VIRTUAL_CUDA)
    (root / "environment.yml").write_text(ENV.format(channel=channel.as_uri()))
    code, _, err = run_main(main, root, [], ("lock", "--cache-dir", str(base / "cache")))
    assert code == 0, err
    lab = Lab(root, channel, base / "good-env")
    lab.install(lab.good)
    yield lab


def _lines(out: str) -> dict[str, str]:
    """Step name → its line (and the fix line under it)."""
    found: dict[str, str] = {}
    current = ""
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in STEPS:
            current = parts[1]
            found[current] = line
        elif current and line.strip().startswith("fix:"):
            found[current] += "\n" + line
    return found


def test_good_prefix_all_pass(lab: Lab) -> None:
    require(_torch_available(), "torch is not installed (pip install torch==2.13.0)")
    code, out, err = lab.doctor("--prefix", str(lab.good), "--min-gpus", "0", *_ports())
    assert code == 0, out + err
    lines = _lines(out)
    assert list(lines) == STEPS  # every step, in the order
    assert all(line.startswith("✓") for n, line in lines.items() if n not in MACHINE), out
    assert not any(lines[n].startswith("✗") for n in MACHINE), out
    assert "all 10 checks passed" in out
    backend, ranks = ddp_plan(2)  # gloo on 2 CPU processes; NCCL on one GPU each
    assert f"{ranks} ranks, {backend}" in lines["ddp"]
    assert "gradients equal across ranks" in lines["ddp"]
    records = len(list((lab.good / "conda-meta").glob("*.json")))
    assert f"all {records} packages match the lock (installed from this lock)" in lines["packages"]
    # the torch step names what was imported, from where, and that it is the locked runtime
    assert f"from {lab.good}/lib/python{SHORT}/site-packages/torch" in lines["torch"]
    assert "as locked: python, torch, torch CUDA" in lines["torch"]
    # the steps that take seconds are announced on stderr before they start
    assert f"envtool: doctor: torch: importing it with {lab.good}/bin/python" in err
    assert "envtool: doctor: ddp: a DDP step across processes (up to " in err


def test_cuda_required_on_a_cpu_machine_fails_with_the_fix(lab: Lab) -> None:
    require(_torch_available(), "torch is not installed (pip install torch==2.13.0)")
    gpus = cuda_devices()  # the GPU variant: ask for one GPU more than there are
    code, out, _ = lab.doctor("--prefix", str(lab.good), "--no-ddp", "--min-gpus", str(gpus + 1),
                              *_ports())  # fmt: skip
    assert code == 1
    cuda = _lines(out)["cuda"]
    if gpus:
        assert cuda.startswith("✗") and "too-few-gpus" in cuda and f"too-few-gpus: {gpus}" in cuda
    else:
        assert cuda.startswith("✗") and "cuda-unavailable" in cuda and "CPU-only build" in cuda
    assert "fix:" in cuda and "troubleshooting.md#cuda-not-available" in cuda
    assert _lines(out)["ddp"].startswith("-")  # --no-ddp: skipped, not failed


def test_missing_environment_names_the_install_command(lab: Lab, tmp_path: Path) -> None:
    where = tmp_path / "nowhere"
    code, out, _ = lab.doctor("--prefix", str(where), "--min-gpus", "0", *_ports())
    assert code == 1
    lines = _lines(out)
    assert lines["environment"].startswith("✗")
    assert f"fix: envtool install --lockfile conda-lock.yml --prefix {where}" in out
    assert f"conda-lock install --prefix {where} conda-lock.yml" in out
    for later in ("packages", "torch", "cuda", "ddp"):
        assert lines[later].startswith("-"), lines[later]  # skipped, with the reason
    assert not where.exists()  # never installed unasked when stdin is not a terminal


def test_install_flag_installs_then_everything_passes(lab: Lab, tmp_path: Path) -> None:
    target = tmp_path / "new-env"
    code, out, err = lab.doctor(
        "--prefix",
        str(target),
        "--install",
        "--allow-insecure-url",
        "--min-gpus",
        "0",
        "--no-ddp",
        *_ports(),
    )
    locked = (lab.root / "conda-lock.yml").read_text().count("manager: conda")
    assert f"installed {locked} packages into" in _lines(out)["environment"], out + err
    assert (target / "conda-meta").is_dir()
    assert _lines(out)["packages"].startswith("✓")
    if _torch_available():  # --no-ddp: no claim that a DDP step ran
        assert "9 checks passed (skipped: ddp): this environment matches the lock." in out
    assert code == (0 if _torch_available() else 1)


def test_drifted_prefix_names_each_difference_and_the_fix(lab: Lab, tmp_path: Path) -> None:
    older = DRIFTED_BUILD.strip('"').replace("=", " ")
    specs = [f"python {SHORT}.*", older, "cudatoolkit 11.8.*", "nccl 2.16.5.1", "pip"]
    drifted = install_prefix(lab.channel, [*specs, "numpy"], tmp_path / "drifted", tmp_path / "c")
    add_dist_info(drifted, "torch", "2.3.0", sp=RUNTIME_SP)  # pip install torch over pytorch
    code, out, _ = lab.doctor("--prefix", str(drifted), "--min-gpus", "0", "--no-ddp", *_ports())
    assert code == 1
    line = _lines(out)["packages"]
    assert line.startswith("✗") and "3 differences from the lock:" in line  # no stamp: made
    # by install_prefix (rattler alone), not by envtool install
    for what in ("build-differs pytorch", "version-differs nccl", "pip-shadowing torch"):
        assert what in line
    assert f"fix: envtool install --lockfile conda-lock.yml --prefix {drifted}" in line


def test_only_pip_shadowing_gets_the_uninstall_fix(lab: Lab, tmp_path: Path) -> None:
    shadowed = tmp_path / "shadowed"
    shutil.copytree(lab.good, shadowed, symlinks=True)
    add_dist_info(shadowed, "torch", "2.3.0", sp=RUNTIME_SP)
    code, out, _ = lab.doctor("--prefix", str(shadowed), "--min-gpus", "0", "--no-ddp", *_ports())
    assert code == 1
    assert "fix: pip uninstall torch" in _lines(out)["packages"]


def test_unfinished_install_is_reported(lab: Lab, tmp_path: Path) -> None:
    from envtool.lock.prefixes import INCOMPLETE_MARKER

    broken = tmp_path / "broken"
    shutil.copytree(lab.good, broken, symlinks=True)
    (broken / INCOMPLETE_MARKER).write_text("interrupted\n")
    code, out, _ = lab.doctor("--prefix", str(broken), "--min-gpus", "0", "--no-ddp", *_ports())
    assert code == 1
    line = _lines(out)["environment"]
    assert line.startswith("✗") and "did not finish" in line and "envtool install" in line


def test_stale_lock_names_the_relock_command(lab: Lab, tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    shutil.copytree(lab.root, proj)
    env = proj / "environment.yml"
    env.write_text(env.read_text().replace("numpy, pip", "numpy>=1.20, pip"))
    code, out, _ = lab.doctor(
        "--prefix", str(lab.good), "--min-gpus", "0", "--no-ddp", *_ports(), cwd=proj
    )
    assert code == 1
    line = _lines(out)["lockfile"]
    assert line.startswith("✗") and "stale" in line
    assert "fix: envtool lock -f environment.yml --lockfile conda-lock.yml" in line


def test_missing_lock_and_bad_lock(lab: Lab, tmp_path: Path) -> None:
    code, out, _ = lab.doctor("--lockfile", str(tmp_path / "none.yml"), "--no-ddp", cwd=tmp_path)
    assert code == 1 and _lines(out)["lockfile"].startswith("✗") and "not found" in out
    bad = tmp_path / "bad.yml"
    bad.write_text("version: 1\npackage: [\n")
    code, out, err = lab.doctor("--lockfile", str(bad), "--no-ddp", cwd=tmp_path)
    assert code == 1 and "Traceback" not in out + err
    assert f"{bad}:" in _lines(out)["lockfile"]  # the parser's file:line message


def test_python_without_torch_fails_the_torch_step(lab: Lab, tmp_path: Path) -> None:
    notorch = tmp_path / "notorch"
    shutil.copytree(lab.good, notorch, symlinks=True)
    python = notorch / "bin" / "python"
    python.unlink()
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')  # -S: no site-packages
    python.chmod(0o755)
    code, out, _ = lab.doctor("--prefix", str(notorch), "--min-gpus", "0", *_ports())
    assert code == 1
    lines = _lines(out)
    assert lines["torch"].startswith("✗") and "torch cannot be imported" in lines["torch"]
    assert "conda activate" in lines["torch"]
    assert lines["cuda"].startswith("-") and lines["ddp"].startswith("-")


def test_busy_master_port_names_a_free_one(lab: Lab) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out, _ = lab.doctor(
            "--prefix", str(lab.good), "--min-gpus", "0", "--no-ddp", "--master-port", str(port)
        )
    assert code == 1
    line = _lines(out)["ports"]
    assert line.startswith("✗") and f"MASTER_PORT {port}" in line and "export MASTER_PORT=" in line


def test_ddp_that_cannot_finish_fails_and_json_report(lab: Lab) -> None:
    require(_torch_available(), "torch is not installed (pip install torch==2.13.0)")
    code, out, err = lab.doctor(
        "--prefix", str(lab.good), "--min-gpus", "0", "--timeout", "1", "--format", "json"
    )
    assert code == 1, err
    doc = json.loads(out)
    assert doc["schema"] == "envtool.doctor/1" and doc["ok"] is False
    steps = {s["name"]: s for s in doc["steps"]}
    assert [s["name"] for s in doc["steps"]] == STEPS
    assert steps["ddp"]["status"] == "fail" and "deadline" in steps["ddp"]["summary"]
    assert "troubleshooting" in steps["ddp"]["fix"]
    assert steps["packages"]["status"] == "pass"


TAG = f"doctor-{os.getpid()}"  # in the processes this file starts, not another run's


def _ddp_processes() -> list[str]:
    from fixtures.sshnodes import processes_with_env

    mine = processes_with_env("ENVTOOL_TEST_TAG", {TAG}).values()
    return [line for line in mine if "envtool_node.ddp_smoke" in line]


def test_ctrl_c_during_the_ddp_step_leaves_no_rank_behind(lab: Lab) -> None:
    require(_torch_available(), "torch is not installed (pip install torch==2.13.0)")
    envtool = str(Path(sys.executable).parent / "envtool")
    argv = [envtool, "doctor", "--prefix", str(lab.good), "--min-gpus", "0", *_ports()]
    env = {**os.environ, "ENVTOOL_TEST_TAG": TAG}
    run = subprocess.Popen(argv, cwd=lab.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           env=env)  # fmt: skip
    end = time.monotonic() + 120
    ranks = ddp_plan(2)[1]
    while sum("--worker" in p for p in _ddp_processes()) < ranks and time.monotonic() < end:
        time.sleep(0.05)
    assert run.poll() is None, "doctor ended before its DDP ranks ran"
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=30)
    assert run.returncode == 130 and b"interrupted" in err and b"Traceback" not in err
    end = time.monotonic() + 5
    while _ddp_processes() and time.monotonic() < end:
        time.sleep(0.05)
    left = _ddp_processes()
    assert left == [], left  # the launcher and both ranks stop with doctor


def test_failed_install_is_a_fail_and_skips_the_rest(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An empty package cache of its own: a package another test cached under the default
    # cache is a verified copy, and rattler rightly installs it without the gone channel.
    monkeypatch.setenv("ENVTOOL_CACHE_DIR", str(tmp_path / "empty-cache"))
    proj = tmp_path / "proj"
    shutil.copytree(lab.root, proj)
    lock = proj / "conda-lock.yml"
    lock.write_text(lock.read_text().replace(lab.channel.as_uri(), (tmp_path / "gone").as_uri()))
    target = tmp_path / "env"
    code, out, _ = lab.doctor(
        "--prefix", str(target), "--install", "--allow-insecure-url", "--no-ddp", cwd=proj
    )
    assert code == 1
    lines = _lines(out)
    assert lines["environment"].startswith("✗") and "install failed" in lines["environment"]
    assert "cannot read the archive" in lines["environment"]
    assert lines["packages"].startswith("-") and lines["torch"].startswith("-")
    assert not target.exists()  # a new prefix that could not be finished is removed


@pytest.mark.parametrize(
    "bad",
    [("--nproc", "0"), ("--timeout", "-1"), ("--master-port", "70000"), ("--min-gpus", "-1")],
    ids=lambda b: " ".join(b),
)
def test_bad_options_are_usage_errors(lab: Lab, bad: tuple[str, str]) -> None:
    code, out, err = lab.doctor(*bad)
    assert code == 2 and "Invalid value" in err and not out


def test_master_port_from_the_environment_is_checked(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MASTER_PORT", "70000")
    code, out, _ = lab.doctor("--prefix", str(lab.good), "--min-gpus", "0", "--no-ddp")
    assert code == 1
    line = _lines(out)["ports"]
    assert line.startswith("✗") and "MASTER_PORT='70000' is not a port" in line


def test_a_runtime_that_is_not_the_locked_one_fails(
    lab: Lab, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The H100 report: records lock python 3.9.18 and a CUDA 11.8 pytorch, bin/python runs
    this interpreter and its torch. doctor said "matches the lock"; now the torch step names
    the interpreter and its version beside the locked one, and the run fails."""
    base = tmp_path_factory.mktemp("not-what-runs")
    wrapper = build_channel(base / "channel", realistic_packages(python_exe=sys.executable))
    (base / "virtual-packages.yml").write_text(VIRTUAL_CUDA)
    (base / "environment.yml").write_text(NOT_WHAT_RUNS.format(channel=wrapper.as_uri()))
    cache = ("--cache-dir", str(base / "cache"))
    assert run_main(main, base, [], ("lock", *cache))[0] == 0
    prefix = base / "env"
    args = ("install", "--allow-insecure-url", "--prefix", str(prefix), *cache)
    assert run_main(main, base, [], args)[0] == 0
    code, out, _ = run_main(
        main, base, [], ("doctor", "--prefix", str(prefix), "--min-gpus", "0", *_ports())
    )
    assert code == 1
    lines = _lines(out)
    assert lines["packages"].startswith("✓")  # the records are as locked...
    torch_line = lines["torch"]  # ...what runs is not
    assert torch_line.startswith("✗"), out
    here = ".".join(str(n) for n in sys.version_info[:3])
    assert f"python {here}" in torch_line and "python=3.9.18" in torch_line
    assert "another interpreter" in torch_line and "fix: " in torch_line
    assert "matches the lock" not in out


def test_torch_on_pythonpath_fails_with_its_version_path_and_variable(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = other_torch(tmp_path / "src", "1.13.1")
    monkeypatch.setenv("PYTHONPATH", str(other))
    code, out, _ = lab.doctor("--prefix", str(lab.good), "--min-gpus", "0", "--no-ddp", *_ports())
    assert code == 1
    line = _lines(out)["torch"]
    assert line.startswith("✗") and "torch 1.13.1" in line and str(other) in line
    assert "PYTHONPATH" in line and "fix: unset PYTHONPATH" in line
    assert "matches the lock" not in out


def test_a_record_with_the_locked_name_but_another_hash_fails(lab: Lab, tmp_path: Path) -> None:
    """A rebuilt or re-uploaded artifact: same name-version-build, another sha256."""
    swapped = tmp_path / "swapped"
    shutil.copytree(lab.good, swapped, symlinks=True)
    (record,) = (swapped / "conda-meta").glob("nccl-*.json")
    doc = json.loads(record.read_text())
    doc["sha256"] = "0" * 64
    record.write_text(json.dumps(doc))
    code, out, _ = lab.doctor("--prefix", str(swapped), "--min-gpus", "0", "--no-ddp", *_ports())
    assert code == 1
    line = _lines(out)["packages"]
    assert line.startswith("✗") and "artifact-differs nccl" in line and "sha256 000000" in line


def test_doctor_runs_are_remembered_and_say_nothing_of_verify(lab: Lab, tmp_path: Path) -> None:
    """A failing doctor run (no environment) then a passing one, recorded with --history and
    --metrics-file: the environment step's failure first seen and cleared; a verify finding on
    this machine recorded before stays (a doctor run does not check it); metrics of the
    doctor's own steps, which promtool accepts."""
    from envtool.history import store
    from envtool.protocol.verify_report import FindingEntry, HostEntry, VerifyDocument

    history, prom, host = tmp_path / "h.sqlite", tmp_path / "doctor.prom", socket.gethostname()
    entry = HostEntry(host, True, None, 1.0, (), 9, None, None)
    verify = VerifyDocument(None, 1.0, False, (entry,),
                            (FindingEntry("version-differs", "error", "nccl", "2.18.3.1",
                                          "2.16.5.1", "install it", (host,)),))  # fmt: skip
    with store.opened(history) as db:
        store.record(db, verify, "verify", time.time() - 60)
    rec = ("--history", str(history), "--metrics-file", str(prom), "--no-ddp", "--min-gpus", "0")
    code, out, err = lab.doctor("--prefix", str(tmp_path / "nowhere"), *rec, *_ports())
    assert code == 1 and "history not recorded" not in err, out + err
    assert f'envtool_check_ok{{host="{host}",check="doctor-environment"}} 0' in prom.read_text()
    assert 'check="doctor-torch"' not in prom.read_text()  # skipped: not checked
    assert promtool.check(prom.read_text()).returncode == 0
    code, out, err = lab.doctor("--prefix", str(lab.good), *rec, *_ports())
    assert "history not recorded" not in err, out + err
    assert f'envtool_check_ok{{host="{host}",check="doctor-environment"}} 1' in prom.read_text()
    code, out, _ = run_main(main, lab.root, [], ("history", "--history", str(history),
                                                 "--format", "json"))  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert [r["command"] for r in doc["runs"]] == ["verify", "doctor", "doctor"]
    lives = {life["kind"]: life for life in doc["findings"]}
    assert lives["doctor-environment"]["cleared_at"] == doc["runs"][2]["at"]
    assert lives["version-differs"]["cleared_at"] is None  # the doctor did not look for it
