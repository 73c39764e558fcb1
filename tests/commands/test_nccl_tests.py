"""``envtool nccl-tests``: an all_reduce_perf log, or the node's all-reduce JSON document."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_main

from envtool.cli import main

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
