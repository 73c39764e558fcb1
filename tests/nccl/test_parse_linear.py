"""nccl-tests readers take time linear in their input (issue 24, M5)."""

from __future__ import annotations

import re
import time

import pytest

from envtool.errors import InputError
from envtool.nccl import parse

ROW = "  8  2  float  sum  -1  10.54  0.00  0.00  0  10.40  0.00  0.00  0"
REAL = (
    " nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 "
    "iters: 20 agg iters: 1 validation: 1 graph: 0"
)


def test_a_60_kb_header_line_is_read_in_linear_time() -> None:
    # the old lazy key regex retried from every letter: 60 KB without a value took 115 s
    for tail in ("x" * 60_000, "a " * 30_000, "ab :\t" * 12_000):
        text = f"# nThread 1 nGpus 1 {tail}\n{ROW}\n# Avg bus bandwidth    : 0.0\n"
        start = time.monotonic()
        run = parse.parse(text)
        assert time.monotonic() - start < 2, tail[:8]
        assert run.params[:2] == (("nThread", "1"), ("nGpus", "1"))


def test_param_pairs_find_what_the_old_regex_found() -> None:
    old = re.compile(r"([A-Za-z][A-Za-z ]*?):?\s+(-?[0-9]\S*)")
    samples = [REAL, "a 1", "a  : 1", "x-y 5", "foo:bar 5", "abc1 5", "warmup: iters: 5", "a\t1 b"]
    samples += ["k  :\t-3x z", "  : 1", "a:1", "a b  c 7 d", "aa bb", "x(factor) 2"]
    for text in samples:
        assert parse.param_pairs(text) == [(k.strip(), v) for k, v in old.findall(text)], text


def _run(name: str) -> str:
    """A small run as nccl-tests >= 2.17.6 prints it (src/util.cu): its name lines around it."""
    return (
        f"# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n"
        f"# Collective test starting: {name}\n#{REAL}\n{ROW}\n# Avg bus bandwidth    : 0 \n#\n"
        f"# Collective test concluded: {name}\n"
    )


def test_a_log_of_thousands_of_runs_is_read_in_linear_time() -> None:
    # issue 25: each run is cut and read once; the all_reduce one is found after 5,000 others
    runs = 5_000
    text = _run("all_gather_perf") * runs + _run("all_reduce_perf")
    start = time.monotonic()
    run = parse.parse(text)
    assert time.monotonic() - start < 20  # 0.4 s alone; a quadratic reader takes minutes
    assert run.program == "all_reduce_perf" and len(run.skipped) == runs
    assert run.lines == (7 * runs + 1, 7 * runs + 7)
    names = "# Collective test starting: all_reduce_perf\n" * 50_000  # 50,000 empty runs
    start = time.monotonic()
    with pytest.raises(InputError, match=r"^names\.txt:2: a second all_reduce run \(the first"):
        parse.parse(names, "names.txt")
    assert time.monotonic() - start < 20  # 0.4 s alone; a quadratic reader takes minutes
