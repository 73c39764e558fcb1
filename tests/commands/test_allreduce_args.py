"""``--allreduce-args`` is checked here, by the parser the nodes run, before any node is
contacted: bad flags are the user's mistake (exit 2), never every node's failure."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import run_main

from envtool.cli import main


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ("-b banana", "argument -b/--minbytes: not a size: 'banana'"),
        ("--frobnicate", "unrecognized arguments: --frobnicate"),
        ("-b 8 '-e 16", "No closing quotation"),
        ("--rdzv-endpoint evil:1", "--rdzv-endpoint is set by envtool"),
        ("--nnodes=3", "--nnodes is set by envtool"),
    ],
)
def test_bad_allreduce_args_are_a_usage_error_before_any_node(
    tmp_path: Path, args: str, says: str
) -> None:
    # an ssh host that does not exist: were it contacted, the run would take the connect
    # timeout and end "unreachable", exit 1
    start = time.monotonic()
    code, out, err = run_main(
        main, tmp_path, [],
        ("verify", "--hosts", "no-such-host.invalid", "--no-lock", "--allreduce", "node",
         "--allreduce-args", args, "--connect-timeout", "20"),
    )  # fmt: skip
    assert code == 2, out + err
    assert says in err and "--allreduce-args" in err and len(err.strip().splitlines()) == 1
    assert time.monotonic() - start < 5 and "unreachable" not in out + err
