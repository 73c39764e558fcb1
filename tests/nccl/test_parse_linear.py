"""nccl-tests readers take time linear in their input (issue 24, M5)."""

from __future__ import annotations

import re
import time

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
