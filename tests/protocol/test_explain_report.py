"""``envtool.explain/1`` reads back into the document it was written from; anything else is
refused with one message."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest

from envtool.errors import InputError
from envtool.joblog.scan import scan
from envtool.joblog.stream import lines
from envtool.judge.explain import decide
from envtool.protocol import explain_report as er
from envtool.report.explain_text import document

LOG = (  # synthetic: a rank's shm failure, then another rank's timeout
    b"node02:77:78 [1] NCCL WARN Error: failed to extend /dev/shm/nccl-ab to 9637892 bytes\n"
    b"[rank0]:[E] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, "
    b"OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800100 milliseconds\n"
)


def _doc(text: bytes) -> er.ExplainDocument:
    scans = [scan("job.log", lines(io.BytesIO(text)))]
    return document(decide(scans), scans)


@pytest.mark.parametrize("text", [LOG, b"", LOG.split(b"\n")[1] + b"\n"])
def test_round_trip(text: bytes) -> None:
    doc = _doc(text)
    assert er.loads(er.dumps(doc), "x") == doc
    assert er.dumps(er.loads(er.dumps(doc), "x")) == er.dumps(doc)


def test_the_shm_cause_is_named_with_its_host() -> None:
    doc = _doc(LOG)
    assert doc.status == "cause" and doc.findings[0].finding.hosts == ("node02",)
    assert doc.verdict.startswith(
        "cause: shm-small on node02 (GPU 1) — NCCL could not create "
        "/dev/shm/nccl-ab (9.2 MiB) (job.log:1)"
    )
    assert doc.cascade == (("watchdog-timeout", 1),)


def test_the_reader_is_strict() -> None:
    body = json.loads(er.dumps(_doc(LOG)))
    for bad in (
        {**body, "extra": 1},
        {**body, "status": "maybe"},
        {**body, "line_cap": "1"},
        {**body, "schema": "envtool.verify/1"},
        {**body, "files": [{"path": "x"}]},
        {**body, "findings": [{**body["findings"][0], "lines": True}]},
    ):
        with pytest.raises(InputError, match="not an envtool explain JSON report"):
            er.loads(json.dumps(bad), "saved.json")
    with pytest.raises(InputError):
        er.loads("{", "saved.json")


def test_documents_compare_by_value() -> None:
    doc = _doc(LOG)
    assert replace(doc, verdict="x") != doc
