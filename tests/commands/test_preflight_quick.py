"""``envtool preflight --quick`` as a Slurm prolog runs it: a real ``envtool`` process on this
node, no SLURM_JOB_ID, a stand-in ``nvidia-smi`` on PATH replaying a real capture
(tests/fixtures/nvidia_smi.py, ../shared/data/real/nvidia-smi/), a real lock
(../shared/data/real/pangeo-pytorch.conda-lock.yml, 767 linux-64 packages) and a prefix
holding its records. ``torch``, ``rattler``, ``docker`` and ``matplotlib`` on PYTHONPATH end the
process with exit 97 if anything imports them. Faults change only the values each test names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, run_main
from fixtures.lock_records import real_prefix
from fixtures.nvidia_smi import Faults, install

from envtool.cli import main

POISONED = ("torch", "rattler", "docker", "matplotlib")
LOUD = 97
NO_NVML = "/nonexistent/libnvidia-ml.so.1"  # a machine with a driver replays the capture too
HOLDERS = "pid 11327,11328,11345"  # the H100 load capture's three compute apps


@dataclass(frozen=True)
class Node:
    root: Path
    shared: Path
    lock: Path
    prefix: Path
    poison: Path

    def smi(self, state: str = "idle", faults: Faults | None = None, name: str = "") -> Path:
        """A folder holding a stand-in nvidia-smi replaying the H100 capture."""
        folder = self.root / f"smi-{state}-{name or 'plain'}"
        if not folder.exists():
            install(folder, self.shared, "h100", state, faults)
        return folder

    def quick(self, smi: Path | None, *args: str) -> tuple[int, str, str]:
        """``envtool preflight --quick`` with only ``smi``'s nvidia-smi (None: no driver)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "CONDA_")) and k != "PYTHONPATH"}  # fmt: skip
        env.update(PYTHONPATH=str(self.poison), ENVTOOL_NVML_LIBRARY=NO_NVML, COLUMNS="200",
                   ENVTOOL_CACHE_DIR=str(self.root / "cache"),
                   PATH=str(smi) if smi else "/nonexistent")  # only the stand-in  # fmt: skip
        argv = [sys.executable, "-m", "envtool", "preflight", "--quick", "--lockfile",
                str(self.lock), "--prefix", str(self.prefix), *args]  # fmt: skip
        out = subprocess.run(argv, cwd=self.root, env=env, capture_output=True, text=True,
                             timeout=60, check=False)  # fmt: skip
        assert out.returncode != LOUD, f"a heavy module was imported: {out.stderr}"
        return out.returncode, out.stdout, out.stderr


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Node:
    root = tmp_path_factory.mktemp("quick")
    lock, prefix = real_prefix(root, shared_data)
    poison = root / "poison"
    for name in POISONED:
        (poison / name).mkdir(parents=True)
        loud = f"import os, sys\nsys.stderr.write('{name} imported\\n')\nos._exit({LOUD})\n"
        (poison / name / "__init__.py").write_text(loud)
    return Node(root, shared_data.parent, lock, prefix, poison)


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_healthy_idle_h100_passes_without_a_drain_reason(node: Node) -> None:
    code, out, err = node.quick(node.smi("idle"))
    assert code == 0, (out, err)
    assert _flat(out).startswith("1 host passes")
    assert "package records and their hashes" in _flat(out)  # the lock was compared
    code, out, err = node.quick(node.smi("idle"), "--drain-reason")
    assert (code, out) == (0, ""), err


def test_the_h100_under_load_names_the_busy_gpu_and_its_holders(node: Node) -> None:
    code, out, _ = node.quick(node.smi("load"))
    assert code == 1
    flat = _flat(out)
    assert "gpu-busy · GPU 0" in flat and "pid 11345 (./gpu_burn, 15690 MiB)" in flat
    code, out, _ = node.quick(node.smi("load"), "--drain-reason")
    assert code == 1 and out == f"envtool: gpu-busy GPU 0 {HOLDERS}\n"
    assert len(out.strip()) <= 80 and out.strip().isprintable()


def test_a_policy_allowing_the_foreign_memory_passes_the_loaded_h100(node: Node) -> None:
    policy = node.root / "policy.yml"
    policy.write_text("gpus:\n  foreign_memory_mib: 20000\n")  # the holders hold 19798 MiB
    code, out, err = node.quick(node.smi("load"), "--policy", str(policy), "--drain-reason")
    assert (code, out) == (0, ""), err


def test_an_ecc_fault_is_its_drain_reason(node: Node) -> None:
    # changed from the idle capture: the uncorrectable ECC counts, 0 -> 2 (nothing else)
    ecc = {"ecc.errors.uncorrected.volatile.total": "2",
           "ecc.errors.uncorrected.aggregate.total": "2"}  # fmt: skip
    smi = node.smi("idle", Faults(values=ecc), "ecc")
    code, out, _ = node.quick(smi, "--drain-reason")
    assert code == 1 and out == "envtool: gpu-ecc-uncorrectable GPU 0\n"
    code, out, _ = node.quick(smi)
    assert code == 1 and "volatile 2, aggregate 2" in _flat(out)


def test_a_record_missing_from_the_prefix_fails_the_node(node: Node, tmp_path: Path) -> None:
    drifted = tmp_path / "env"
    shutil.copytree(node.prefix, drifted)
    (removed,) = list((drifted / "conda-meta").glob("pytorch-2*.json"))
    removed.unlink()
    code, out, _ = node.quick(node.smi("idle"), "--prefix", str(drifted), "--drain-reason")
    assert code == 1 and out.startswith("envtool: ") and "pytorch" in out


def test_no_driver_is_a_reason_unless_no_gpu_is_required(node: Node) -> None:
    code, out, _ = node.quick(None, "--drain-reason")
    assert code == 1 and out == "envtool: not-checked GPU health\n"
    code, out, _ = node.quick(None)
    assert code == 1 and "no NVIDIA driver" in _flat(out)
    code, out, err = node.quick(None, "--min-gpus", "0", "--drain-reason")
    assert (code, out) == (0, ""), err


def test_two_gpus_asked_of_a_one_gpu_node(node: Node) -> None:
    code, out, _ = node.quick(node.smi("idle"), "--min-gpus", "2", "--drain-reason")
    assert code == 1 and out == "envtool: too-few-gpus: 1 GPUs, expected >= 2\n"


@pytest.mark.parametrize(
    "args", [("--allreduce", "node"), ("--min-busbw", "10"), ("--junit", "j.xml")]
)
def test_what_needs_an_all_reduce_is_refused(node: Node, args: tuple[str, ...]) -> None:
    code, _, err = node.quick(node.smi("idle"), *args)
    assert code == 2 and args[0] in err


def test_drain_reason_without_quick_is_a_usage_error(node: Node) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    out = subprocess.run([sys.executable, "-m", "envtool", "preflight", "--drain-reason"],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
                         check=False)  # fmt: skip
    assert out.returncode == 2 and "--quick" in out.stderr


ESCAPES = "\x1b]0;pwned\x07\x1b[2J"  # retitles the terminal, clears it


def _hostile_records(node: Node, root: Path) -> Path:
    """The node's prefix with numpy's record under a file name holding ESCAPES, and pytorch's
    whose ``name`` reads like a verdict (issue 33 item 5)."""
    prefix = root / "env"
    shutil.copytree(node.prefix, prefix)
    (numpy,) = (prefix / "conda-meta").glob("numpy-*.json")
    numpy.rename(numpy.with_name(numpy.stem + ESCAPES + ".json"))
    (torch,) = (prefix / "conda-meta").glob("pytorch-2*.json")
    text = torch.read_text()
    torch.write_text(text.replace('"name": "pytorch"', '"name": "all GPUs ok, keep"', 1))
    return prefix


def test_a_record_file_names_escapes_and_text_never_reach_the_terminal_or_reason(
    node: Node, tmp_path: Path
) -> None:
    """A conda-meta file name's ESC and BEL are shown as escapes by preflight --quick and
    doctor (the node code's warning went to stderr raw), and a record's own text is no drain
    reason (it was "envtool: record-unreadable all GPUs ok, keep")."""
    prefix = _hostile_records(node, tmp_path)
    seen = ""
    for args in ((), ("--drain-reason",)):
        code, out, err = node.quick(node.smi("idle"), "--prefix", str(prefix), *args)
        assert code == 1, (out, err)
        seen += out + err
    assert out.startswith("envtool: record-unreadable (not a package name) (+"), out
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CONDA_"))}
    env.update(ENVTOOL_NVML_LIBRARY=NO_NVML, ENVTOOL_CACHE_DIR=str(tmp_path / "cache"))
    argv = [sys.executable, "-m", "envtool", "doctor", "--lockfile", str(node.lock),
            "--prefix", str(prefix), "--no-ddp", "--min-gpus", "0"]  # fmt: skip
    doctor = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=120, check=False)  # fmt: skip
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    seen += doctor.stdout + doctor.stderr
    assert "\x1b" not in seen and "\x07" not in seen
    assert seen.count("\\x1b]0;pwned\\x07\\x1b[2J.json") >= 3, seen  # the file still named


def test_an_unreadable_ordinary_record_is_listed_never_folded_away(
    node: Node, tmp_path: Path
) -> None:
    """numpy decides no DDP run, but its unreadable record is an error: the report lists it,
    not "and 1 more about other packages: 1 record-unreadable (error)" (issue 33 item 5)."""
    prefix = tmp_path / "env"
    shutil.copytree(node.prefix, prefix)
    (numpy,) = (prefix / "conda-meta").glob("numpy-*.json")
    numpy.rename(numpy.with_name(numpy.stem + "~.json"))
    code, out, err = node.quick(node.smi("idle"), "--prefix", str(prefix))
    assert code == 1, (out, err)
    assert "· record-unreadable · numpy" in out, out
    assert "(error)" not in out  # no error among the counts


def test_the_install_stamp_is_said_never_trusted(node: Node) -> None:
    """Issue 35 item 3: the prefix's stamp (conda-meta/envtool-lock) is said beside the
    verdict; a stamp of another lock on a prefix whose records match still passes."""
    from envtool.lock import stamp

    code, out, _ = node.quick(node.smi("idle"))
    assert code == 0 and "installed from: no stamp on" in _flat(out), out
    path = stamp.write(node.prefix, node.lock, "linux-64")
    try:
        code, out, _ = node.quick(node.smi("idle"))
        assert code == 0 and "installed from: this lock on" in _flat(out), out
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({**doc, "lock_sha256": "0" * 64}))
        code, out, _ = node.quick(node.smi("idle"))
        assert code == 0 and f"installed from: another lock ({'0' * 12}) on" in _flat(out), out
    finally:
        path.unlink()


def test_a_prologs_runs_are_recorded_and_read_back_as_history(node: Node) -> None:
    """Three prologs on this node (the H100 idle, then under another job's load, then idle
    again), each recorded and its metrics written, as a prolog with --drain-reason runs."""
    store, prom = node.root / "prolog-history.sqlite", node.root / "tf" / "envtool.prom"
    record = ("--history", str(store), "--metrics-file", str(prom), "--drain-reason")
    for state in ("idle", "load", "idle"):
        code, out, err = node.quick(node.smi(state), *record)
        assert "not recorded" not in err and "not written" not in err, err
        if state == "load":
            assert 'kind="gpu-busy"' in prom.read_text()
    assert 'kind="gpu-busy"' not in prom.read_text()
    code, out, err = run_main(main, node.root, [], ("history", "--history", str(store),
                                                    "--format", "json"))  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    assert [r["command"] for r in doc["runs"]] == ["preflight --quick"] * 3
    [busy] = [f for f in doc["findings"] if f["kind"] == "gpu-busy"]
    at = [r["at"] for r in doc["runs"]]
    assert (busy["first_seen"], busy["cleared_at"], busy["runs"]) == (at[1], at[2], 1)
