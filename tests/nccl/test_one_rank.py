"""Honest figures with one rank: nothing crosses a link, so busbw is 0 by definition, the
in-place calls move no data and get no bandwidth, the text says so, and the plot draws algbw
(with why) rather than a flat line at 0. Runs with gloo on CPU, NCCL on one GPU."""

from __future__ import annotations

import pytest
from conftest import require
from fixtures.runtime import torch_version

from envtool.cluster import local
from envtool.report.nccl_text import ONE_RANK, format_allreduce, run_of
from envtool.report.plot import series


@pytest.fixture(scope="module")
def one_rank():  # type: ignore[no-untyped-def]
    require(torch_version() is not None, "torch is not installed (pip install torch==2.13.0)")
    args = ["--nproc", "1", "-b", "4K", "-e", "256K", "-f", "4", "-n", "3", "-w", "1"]
    _, result = local.allreduce(None, args, 120.0)
    assert not result.error and result.nranks == 1
    return result


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
