"""Launcher prefixes off, and who they (or NCCL's header) say wrote the line."""

from __future__ import annotations

import pytest

from envtool.joblog.origin import NOBODY, Origin, strip

CASES = [
    ("  3: hello", "hello", Origin(task=3, via=("srun --label",))),
    ("[1,5]<stderr>:boom", "boom", Origin(rank=5, via=("mpirun --tag-output",))),
    (
        "[rank3]:[E ProcessGroupNCCL.cpp:1] x",
        "[E ProcessGroupNCCL.cpp:1] x",
        Origin(rank=3, via=("torchrun",)),
    ),
    ("[default0]:step 1", "step 1", Origin(local_rank=0, via=("torchrun",))),
    (
        "10.10.23.10: so-ucloud-10:13:15 [0] NCCL WARN x",
        "so-ucloud-10:13:15 [0] NCCL WARN x",
        Origin("10.10.23.10", gpu=0, pid=13, via=("host prefix", "nccl header")),
    ),
    (
        "node01: 0: [rank0]: ok",
        "ok",
        Origin("node01", rank=0, task=0, via=("host prefix", "srun --label", "torchrun")),
    ),
]


@pytest.mark.parametrize(("line", "text", "origin"), CASES)
def test_prefixes(line: str, text: str, origin: Origin) -> None:
    assert strip(line) == (text, origin)


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA error: x",
        "frame #0: c10::Error",
        "Last error:",
        "UserWarning: ",
        "NCCL version 2.7.8+cuda10.2",
    ],
)
def test_messages_are_not_prefixes(line: str) -> None:
    assert strip(line) == (line.lstrip(), NOBODY)
