"""envtool/policy.py: the --policy file read strictly (bounded, line-numbered errors)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

from envtool import policy
from envtool.errors import InputError
from envtool.judge.cluster_policy import GpuExpect
from envtool.judge.kinds import Kind
from envtool.judge.limits import LimitsPolicy


def test_the_documented_example_loads() -> None:
    read = policy.read(REPO / "docs" / "policy.example.yml")
    assert read.gpus == GpuExpect("H100", 8, 81559, False, 512, True)
    assert read.accept == frozenset({Kind.GPU_PCIE_DEGRADED})
    assert read.limits == LimitsPolicy(1024**3, 65536, 1.0)
    assert read.baselines == (("NVIDIA H100 80GB HBM3 x8", 380.0, 300.0),)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("gpus:\n  modle: H100\n", ":2: unknown key gpus.modle"),
        ("gpu:\n  model: H100\n", ":1: unknown key 'gpu'"),
        ("gpus:\n  count: -1\n", ":2: gpus.count must be a whole number"),
        ("gpus:\n  mig_allowed: 1\n", ":2: gpus.mig_allowed must be true or false"),
        ("accept:\n  - gpu-busy\n  - gpu-bussy\n", ":3: accept: 'gpu-bussy' is no finding kind"),
        ("accept:\n  - gpu-busy\n  - not-checked\n", ":3: accept: not-checked cannot be"),
        ("accept:\n  - unreachable\n", ":2: accept: unreachable cannot be accepted"),
        ("accept:\n  - probe-failed\n", "it says a check did not run"),
        ("- gpus\n", "a policy file is a mapping"),
        ("gpus: [1\n", "invalid YAML"),
        ("limits:\n  shm_min: 1 gallon\n", ":2: limits.shm_min must be a size"),
        ("limits:\n  nofile: 1024\n", ":2: unknown key limits.nofile"),
        ("limits:\n  clock_skew_s: 0\n", ":2: limits.clock_skew_s must be seconds above 0"),
        ("limits:\n  nofile_min: 1e5\n", ":2: limits.nofile_min must be a whole number"),
        # issue 33 item 5: numbers no threshold can be (exit 3 before) and kinds no site may
        # accept (a failed all-reduce was "all good")
        (f"limits:\n  shm_min: {'9' * 400}t\n", ":2: limits.shm_min must be a size"),
        (f"limits:\n  shm_min: {'9' * 400}\n", ":2: limits.shm_min must be a size"),
        ("limits:\n  shm_min: 9999999999t\n", ":2: limits.shm_min must be a size"),
        (f"limits:\n  nofile_min: {'9' * 5000}\n", ":2: invalid YAML: a whole number of 5000"),
        (f"limits:\n  nofile_min: {'9' * 400}\n", ":2: limits.nofile_min must be a whole"),
        (f"gpus:\n  memory_mib: {'9' * 400}\n", ":2: gpus.memory_mib must be a whole number"),
        ("gpus:\n  model: H100\n  when: 2024-13-01\n", ":3: invalid YAML: '2024-13-01' cannot"),
        ("accept:\n  - gpu-busy\n  - allreduce-failed\n", ":3: accept: allreduce-failed cannot"),
        ("accept:\n  - allreduce-wrong\n", "it says DDP itself does not work here"),
        ("baselines:\n  H100 x8:\n    busbw: -1\n", ":3: baselines.H100 x8.busbw must be GB/s"),
        ("baselines:\n  H100 x8:\n    median: 3\n", ":3: unknown key baselines.H100 x8.median"),
        ("baselines:\n  - H100\n", ":2: 'baselines' must be a mapping of GPU model"),
    ],
)
def test_bad_input_names_the_line(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "policy.yml"
    path.write_text(text)
    with pytest.raises(InputError, match=None) as err:
        policy.read(path)
    assert said in str(err.value)


@pytest.mark.parametrize(
    ("text", "size"),
    [("1GiB", 1024**3), ("512M", 512 * 1024**2), ("8g", 8 * 1024**3), ("2 GB", 2 * 1024**3),
     ("1.5G", 3 * 1024**3 // 2), ("67108864", 67108864)],
)  # fmt: skip
def test_shm_min_reads_docker_s_sizes(tmp_path: Path, text: str, size: int) -> None:
    path = tmp_path / "policy.yml"
    path.write_text(f"limits:\n  shm_min: {text}\n  clock_skew_s: 5\n")
    assert policy.read(path).limits == LimitsPolicy(shm_min_bytes=size, clock_skew_s=5.0)


def test_an_empty_file_is_the_defaults(tmp_path: Path) -> None:
    (tmp_path / "p.yml").write_text("")
    assert policy.read(tmp_path / "p.yml").gpus == GpuExpect()
