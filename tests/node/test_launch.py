"""How a node's probe starts its ranks (envtool_node.launch): directly and at once, one import
of torch per rank, the GPU count guessed without torch and corrected by the ranks."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
from conftest import require
from fixtures.gpu import cuda_devices, without_collected

from envtool_node import launch

SWEEP = ["-b", "8", "-e", "64", "-n", "2", "-w", "1", "--timeout", "90"]


def _torch() -> None:
    require(
        importlib.util.find_spec("torch") is not None,
        "torch is not installed (pip install torch==2.13.0)",
    )


@pytest.mark.parametrize(
    ("listed", "present", "expected"),
    [
        (None, 0, 0),
        (None, 8, 8),
        ("0,1", 8, 2),
        ("0,1", 0, 2),  # no driver list (a container without /proc/driver/nvidia): believed
        ("", 8, 0),
        ("-1", 8, 0),
        ("0,1,-1,3", 8, 2),  # CUDA reads up to the first invalid entry
        ("0,1,2,3", 2, 2),
    ],
)
def test_visible_gpus_reads_cuda_visible_devices_as_cuda_does(
    monkeypatch: pytest.MonkeyPatch, listed: str | None, present: int, expected: int
) -> None:
    monkeypatch.setattr(
        launch.os, "listdir", lambda path: [f"0000:{i:02x}:00.0" for i in range(present)]
    )
    if listed is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", listed)
    assert launch.visible_gpus() == expected


@pytest.mark.parametrize(
    ("asked", "gpus", "expected"),
    [
        (("auto", 0), 8, ("nccl", 8)),
        (("auto", 0), 0, ("gloo", 2)),
        (("auto", 3), 0, ("gloo", 3)),
        (("nccl", 4), 8, ("nccl", 4)),
        (("nccl", 4), 2, ("nccl", 2)),
        (("nccl", 0), 0, ("nccl", 0)),  # a rank says "no GPU"; the launcher still starts one
        (("gloo", 0), 8, ("gloo", 2)),
    ],
)
def test_one_rule_decides_backend_and_ranks(
    asked: tuple[str, int], gpus: int, expected: tuple[str, int]
) -> None:
    assert launch.choose(*asked, gpus) == expected


def _node(*args: str, env: dict[str, str] | None = None) -> tuple[dict, bool]:  # type: ignore[type-arg]
    """``envtool_node.node.collect`` in a fresh interpreter; its document and whether that
    interpreter (the launcher, not a rank) imported torch."""
    code = (
        "import json, sys\n"
        "from envtool_node import node\n"
        f"doc = node.collect(sys.prefix, True, {list(args)!r}, ('facts',))\n"
        "print(json.dumps({'doc': doc, 'torch': 'torch' in sys.modules}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-B", "-c", code],
        capture_output=True,
        text=True,
        timeout=180,
        env={**without_collected(dict(os.environ)), **(env or {})},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    return result["doc"], result["torch"] is True


def test_the_ranks_gather_the_facts_and_the_launcher_never_imports_torch() -> None:
    _torch()
    doc, launcher_imported = _node(*SWEEP, env={"NCCL_DEBUG": "WARN"})
    assert not launcher_imported
    facts, allreduce = doc["facts"], doc["allreduce"]
    assert facts["schema"] == "envtool.gpu-facts/1" and facts["torch"]  # torch seen by a rank
    assert facts["runtime"]["torch"]["file"].endswith("__init__.py")
    # the launcher's environment, not the rank's: no rendezvous variables it set for the rank
    assert facts["env"] == {"NCCL_DEBUG": "WARN"}
    assert allreduce["nranks"] == (cuda_devices() or 2) and allreduce["wrong_total"] == 0


def test_a_wrong_guess_is_corrected_by_the_ranks() -> None:
    """CUDA_VISIBLE_DEVICES lists two GPUs: without a driver list the launcher believes it
    and starts two NCCL ranks; on a machine where torch sees no GPU the ranks say so, and the
    run is started again as they planned (gloo, two ranks), not failed."""
    _torch()
    doc, _ = _node(*SWEEP, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    allreduce = doc["allreduce"]
    assert not allreduce.get("error"), allreduce
    gpus = min(cuda_devices(), 2)
    expected = ("nccl", gpus) if gpus else ("gloo", 2)
    assert (allreduce["backend"], allreduce["nranks"]) == expected
    assert doc["facts"]["env"] == {"CUDA_VISIBLE_DEVICES": "0,1"}


def test_facts_are_gathered_here_when_no_rank_could(tmp_path: object) -> None:
    """A sweep the ranks reject (a size that is no size) leaves no facts from a rank: the
    launcher gathers them itself, and the all-reduce's error stays one line."""
    _torch()
    doc, launcher_imported = _node("-b", "8", "-e", "4X", "--timeout", "60")
    assert doc["facts"]["schema"] == "envtool.gpu-facts/1" and doc["facts"]["torch"]
    assert launcher_imported  # it had to
    assert "4X" in doc["allreduce"]["error"] and "\n" not in doc["allreduce"]["error"]
