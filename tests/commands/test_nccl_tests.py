"""``envtool nccl-tests``: an all_reduce_perf log, or the node's all-reduce JSON document."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from conftest import SHARED, run_main

from envtool.cli import main

REAL_LOGS = sorted(
    p.name for p in (SHARED / "data" / "real" / "nccl-tests").glob("*.txt")
)  # every saved all_reduce_perf log (none when ../shared is absent: the test is not collected)
PART = {"time_us": 1000.0, "algbw": 268.44, "busbw": 469.77, "wrong": 0}
DOC = {
    "schema": "envtool.allreduce/1", "backend": "nccl", "nranks": 8,
    "params": {"minbytes": 268435456, "maxbytes": 268435456, "stepfactor": 2, "iters": 20,
               "warmup_iters": 5},
    "devices": [{"rank": r, "pid": 7, "host": "gpu01", "device": r, "name": "NVIDIA H100",
                 "bus": "0x1b"} for r in range(8)],
    "rows": [{"size": 268435456, "count": 67108864, "type": "float", "redop": "sum",
              "root": -1, "oop": PART, "ip": PART}],
    "wrong_total": 0, "avg_busbw": 469.77,
}  # fmt: skip


def test_the_node_all_reduce_document_is_read_like_a_log(tmp_path: Path) -> None:
    path = tmp_path / "allreduce.json"
    path.write_text(json.dumps(DOC))
    code, out, err = run_main(main, tmp_path, [], ("nccl-tests", str(path), "--format", "json"))
    assert code == 0, err
    doc = json.loads(out)
    assert doc["peak_busbw"] == 469.77 and doc["nranks"] == 8 and doc["large_sizes"] == 1
    failed = {**DOC, "rows": [], "error": "torchrun exited 1: NCCL error"}
    path.write_text(json.dumps(failed))
    code, _, err = run_main(main, tmp_path, [], ("nccl-tests", str(path)))
    assert code == 2 and "the all-reduce failed: torchrun exited 1" in err
    path.write_text('{"schema": "envtool.node/1"}')
    code, _, err = run_main(main, tmp_path, [], ("nccl-tests", str(path)))
    assert code == 2 and "not a envtool.allreduce/1 document" in err and err.count("\n") == 1


def _real_log(shared_data: Path, name: str = "autodl-2x2080ti-pcie-nop2p.txt") -> str:
    return (shared_data / "real" / "nccl-tests" / name).read_text()


def _rows_up_to(text: str, last: int) -> str:
    """The log without its rows above ``last`` bytes, header and trailer kept: a whole log of
    a sweep that stopped there (``-e``)."""
    return "".join(
        line
        for line in text.splitlines(keepends=True)
        if line.startswith("#") or int(line.split()[0]) <= last
    )


@pytest.mark.parametrize("name", REAL_LOGS)
def test_every_real_log_names_its_peak_and_the_size(shared_data: Path, name: str) -> None:
    path = shared_data / "real" / "nccl-tests" / name
    code, out, err = run_main(main, path.parent, [], ("nccl-tests", str(path)))
    assert code == 0 and err == "", err
    assert re.search(
        r"^peak busbw \d+\.\d\d GB/s at \d+[KMG] \(sizes >= 256M: bandwidth-bound\)$", out, re.M
    ), out


def test_a_short_sweep_names_its_peak_and_says_it_is_not_bandwidth_bound(
    shared_data: Path, tmp_path: Path
) -> None:
    path = tmp_path / "short.txt"  # 8 B .. 64M: busbw 4.00 in place at 32M, 3.99 elsewhere
    path.write_text(_rows_up_to(_real_log(shared_data), 64 << 20))
    code, out, err = run_main(main, tmp_path, [], ("nccl-tests", str(path)))
    assert code == 0, err
    assert (
        "peak busbw 4.00 GB/s at 32M (the sweep stops at 64M, below 256M: not bandwidth-bound)"
        in out.splitlines()
    )
    assert "no rows that large" not in out
    code, out, _ = run_main(main, tmp_path, [], ("nccl-tests", str(path), "--format", "json"))
    doc = json.loads(out)
    assert (doc["peak_busbw"], doc["peak_size"], doc["large_sizes"]) == (None, None, 0)
    assert doc["bandwidth_bound"] is False
    assert (doc["overall_peak_busbw"], doc["overall_peak_size"]) == (4.0, 32 << 20)
    code, out, _ = run_main(main, tmp_path, [], ("nccl-tests", str(path), "--large", "16M"))
    assert "peak busbw 4.00 GB/s at 32M (sizes >= 16M: bandwidth-bound)" in out.splitlines()


def _with_wrong(line: str, oop: int, ip: int) -> str:
    fields = line.split()
    fields[8], fields[12] = str(oop), str(ip)
    return " ".join(fields) + "\n"


def test_wrong_elements_are_said_in_one_line_on_stderr(shared_data: Path, tmp_path: Path) -> None:
    wrong = {1 << 20: (2, 0), 4 << 20: (0, 1)}
    lines = []
    for line in _real_log(shared_data).splitlines(keepends=True):
        size = None if line.startswith("#") else int(line.split()[0])
        lines.append(_with_wrong(line, *wrong[size]) if size in wrong else line)
    path = tmp_path / "wrong.txt"
    path.write_text("".join(lines).replace("values : 0 OK", "values : 2 FAILED"))
    code, out, err = run_main(main, tmp_path, [], ("nccl-tests", str(path)))
    assert code == 1 and "peak busbw 4.00 GB/s at 256M" in out
    assert err == (
        f"envtool nccl-tests: {path}: 3 wrong elements in 2 rows (sizes 1M, 4M) and 2 "
        "out-of-bounds values: the all-reduce computed wrong results\n"
    )
    code, out, err = run_main(main, tmp_path, [], ("nccl-tests", str(path), "--format", "json"))
    assert code == 1 and json.loads(out)["wrong_total"] == 3 and err.count("\n") == 1


def test_the_probe_text_names_its_peak_with_the_size(tmp_path: Path) -> None:
    from envtool.protocol.documents import read_allreduce
    from envtool.protocol.types import NodeFacts
    from envtool.report import results

    path = tmp_path / "allreduce.json"
    path.write_text(json.dumps(DOC))
    code, out, _ = run_main(main, tmp_path, [], ("nccl-tests", str(path)))
    assert code == 0 and "peak busbw 469.77 GB/s at 256M (sizes >= 256M" in out
    small = {**DOC, "rows": [{**DOC["rows"][0], "size": 1 << 20, "count": 1 << 18}]}  # type: ignore[dict-item]
    result = read_allreduce(small)
    with contextlib.redirect_stdout(io.StringIO()) as text:
        results.probe_result({}, NodeFacts(python="3.9.18", torch=None), result, "table")
    assert (
        "peak busbw 469.77 GB/s at 1M (the sweep stops at 1M, below 256M: not bandwidth-bound)"
        in text.getvalue().splitlines()
    )
    with contextlib.redirect_stdout(io.StringIO()) as text:
        results.probe_result(
            {"facts": {}, "allreduce": small}, NodeFacts(python="3.9"), result, "json"
        )
    peak = json.loads(text.getvalue())["peak"]
    assert peak == {"busbw": 469.77, "size": 1 << 20, "bandwidth_bound": False,
                    "large_min_bytes": 256 << 20}  # fmt: skip
