"""Honest figures with one rank: nothing crosses a link, so busbw is 0 by definition, the
in-place calls move no data and get no bandwidth, the text says so, and the plot draws algbw
(with why) rather than a flat line at 0. Runs with gloo on CPU, NCCL on one GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import require
from fixtures.gpu import cuda_devices
from fixtures.runtime import torch_version

from envtool.cluster import local
from envtool.report.nccl_text import ONE_RANK, format_allreduce, run_of
from envtool.report.plot import series


@pytest.fixture(scope="module")
def one_rank():  # type: ignore[no-untyped-def]
    require(torch_version() is not None, "torch is not installed (pip install torch==2.13.0)")
    args = ["--nproc", "1", "-b", "4K", "-e", "256K", "-f", "4", "-n", "3", "-w", "1"]
    *_, result = local.facts_and_allreduce(Path(sys.prefix), args, 120.0)
    assert not result.error and result.nranks == 1
    return result


def test_cuda_graph_mode_is_nccl_only_and_says_so_in_one_line() -> None:
    """-G N captures the calls of a size in a CUDA graph and times N replays: with NCCL on a
    GPU it measures (every figure per call); with gloo on the CPU it is one line of error."""
    require(torch_version() is not None, "torch is not installed (pip install torch==2.13.0)")
    args = ["--nproc", "1", "-b", "4K", "-e", "64K", "-f", "4", "-n", "5", "-w", "2", "-G", "3"]
    raw_facts, _, raw, result = local.facts_and_allreduce(Path(sys.prefix), args, 120.0)
    assert raw_facts["schema"] == "envtool.gpu-facts/1"  # the facts stand either way
    if cuda_devices():  # the GPU variant: NCCL, graphs captured and replayed
        assert not result.error and result.backend == "nccl", result.error
        assert raw["params"]["cudagraph"] == 3 and len(result.rows) == 3
        assert all(r.oop.time_us > 0 and r.oop.wrong == 0 for r in result.rows)
        return
    assert result.backend == "gloo" and not result.rows
    assert (
        result.error.startswith("-G (CUDA graphs) needs NCCL on GPUs") and "\n" not in result.error
    )


def test_one_rank_has_no_bus_and_no_in_place_bandwidth(one_rank) -> None:  # type: ignore[no-untyped-def]
    rows = one_rank.rows
    assert len(rows) == 4
    assert all(r.oop.busbw == 0 and r.ip.busbw == 0 for r in rows)  # nothing crosses a link
    assert all(r.ip.algbw == 0 and r.ip.time_us > 0 for r in rows)  # no data moved in place
    assert all(r.oop.algbw > 0 for r in rows)  # the out-of-place copy is real


def test_the_text_and_the_plot_say_why(one_rank) -> None:  # type: ignore[no-untyped-def]
    text = format_allreduce(one_rank)
    assert text.rstrip().endswith(ONE_RANK)
    what, oop, ip, note = series(run_of(one_rank, "probe"))
    assert what == "algbw" and "one rank" in note
    assert oop == [r.oop.algbw for r in one_rank.rows] and set(ip) == {0.0}
