"""Every real file in ../shared/data/real is read, or refused with a message that says what
the file is: locks, exports, nccl-tests logs, collect_env reports, a channel's repodata,
nvidia-smi captures; and every lock and export, each platform, is checked and diffed with
itself with the answers a person reading it gives (READINGS)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import SHARED, run_main

from envtool import environments
from envtool.cli import main
from envtool.judge import cuda, packages
from envtool.lock import lockfile

REAL = SHARED / "data" / "real"
FILES = sorted(
    p.relative_to(REAL).as_posix()
    for p in (REAL.rglob("*") if REAL.is_dir() else ())
    if p.is_file() and p.name != "SOURCES.md"
)
REFUSED = {
    "collect_env/": "PyTorch's collect_env report",
    "rattler-pytorch-channel/": "a conda channel's repodata.json",
    "nvidia-smi/": "an nvidia-smi capture",
    "failed-jobs/": "a job's log",  # failed DDP/NCCL jobs' logs (failed-jobs/SOURCES.md)
}


def test_the_corpus_is_there(shared_data: Path) -> None:
    assert len(FILES) >= 12, FILES


@pytest.mark.parametrize("name", FILES)
def test_each_real_file_is_read_or_named(shared_data: Path, tmp_path: Path, name: str) -> None:
    path = str(shared_data / "real" / name)
    if name.startswith("nccl-tests/"):
        code, out, err = run_main(main, tmp_path, [], ("nccl-tests", path, "--format", "json"))
        assert code == 0 and '"truncated": false' in out, err
        return
    code, out, err = run_main(main, tmp_path, [], ("check", path))
    refused = next((why for prefix, why in REFUSED.items() if name.startswith(prefix)), None)
    if refused is None:
        assert code == 0 and out.startswith("consistent: "), out + err
    else:
        assert code == 2 and err.count("\n") == 1 and refused in err, err


@dataclass(frozen=True)
class Reading:
    """What a person reading one platform of a real lock or export says of it (SOURCES.md):
    its package count, the torch that runs, the CUDA it is built for, and what is wrong
    inside it (nothing, for every file here: each is a working project's environment)."""

    packages: int
    torch: str | None  # the label of the torch ``import`` finds
    cuda: str | None
    findings: tuple[str, ...] = ()


# every lock and export in ../shared/data/real, each platform of a lock (issue 25 item 5)
READINGS = {
    ("pangeo-pytorch.conda-lock.yml", "linux-64"): Reading(
        767, "pytorch=2.3.0=cuda118_py311h6c9cb27_300", "11.8"
    ),
    ("drdmannturb.conda-lock.yml", "linux-64"): Reading(
        332, "pytorch=2.4.0=cuda118_py39hbf661d7_301", "11.8"
    ),
    # CPU builds on the other platforms (win-64's from repo.anaconda.com/pkgs/main): no CUDA
    ("drdmannturb.conda-lock.yml", "osx-64"): Reading(
        255, "pytorch=2.4.0=cpu_mkl_py39hd2dbf71_101", None
    ),
    ("drdmannturb.conda-lock.yml", "osx-arm64"): Reading(
        253, "pytorch=2.4.0=cpu_generic_py39he0e5f83_1", None
    ),
    ("drdmannturb.conda-lock.yml", "win-64"): Reading(
        274, "pytorch=2.3.0=cpu_py39h9432977_0", None
    ),
    ("breaching.env-export.yml", "linux-64"): Reading(
        317, "pytorch=1.10.1=py3.9_cuda11.3_cudnn8.2.0_0", "11.3"
    ),
    ("basenji.env-export.yml", "linux-64"): Reading(430, None, None),  # TensorFlow, no torch
    ("lanxiukai.env-export-nobuilds.yml", "linux-64"): Reading(196, "torch==2.9.1+cu130", "13.0"),
}


def test_every_real_lock_and_export_has_its_reading(shared_data: Path) -> None:
    """The table names every lock and export of the corpus, and every platform of each lock."""
    files = {n for n in FILES if "/" not in n and n.endswith((".yml", ".yaml", ".lock"))}
    assert {name for name, _ in READINGS} == files
    for name in files:
        text = (shared_data / "real" / name).read_text()
        if "conda-lock" in name:
            platforms = lockfile.parse(text, shared_data / "real" / name).metadata.platforms
            assert {p for n, p in READINGS if n == name} == set(platforms), name


@pytest.mark.parametrize(("name", "platform"), sorted(READINGS))
def test_each_real_environment_is_checked_as_a_reader_would(
    shared_data: Path, tmp_path: Path, name: str, platform: str
) -> None:
    """``envtool check`` per platform: the findings a reader agrees with (no "built for
    another python", no "CUDA stacks mixed" on CPU platforms); the torch that runs and its
    CUDA as the file says; and the file diffed against itself is identical (exit 0)."""
    want, path = READINGS[(name, platform)], str(shared_data / "real" / name)
    args = ("check", path, "--platform", platform, "--format", "json")
    code, out, err = run_main(main, tmp_path, [], args)
    (checked,) = json.loads(out)["environments"]
    assert checked["packages"] == want.packages, err
    assert tuple(f["kind"] for f in checked["findings"]) == want.findings
    assert code == (1 if want.findings else 0)
    env = environments.load(path, platform)
    torch = packages.by_key(env.packages).get("torch")
    assert (packages.effective(torch).label() if torch else None) == want.torch
    assert cuda.env_cuda(env) == want.cuda
    code, out, err = run_main(main, tmp_path, [], ("diff", path, path, "--platform", platform))
    assert code == 0 and out.startswith("identical: "), out + err
