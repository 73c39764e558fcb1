"""Hostile node answers, property-based, all the way to the printers: the table, JSON and
JUnit are rendered from node documents holding arbitrary unicode (lone surrogates included),
control characters, console markup, huge integers and NaN; never an exception, always a
valid document, and the honest host's results are always there."""

from __future__ import annotations

import contextlib
import io
import json
import xml.etree.ElementTree as ET
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envtool.judge import gpu, verdict
from envtool.protocol import verify_report as vr
from envtool.protocol.answers import host_report
from envtool.protocol.types import Answer
from envtool.report import junit
from envtool.report import verify as report

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NASTY = ["[/bold]", "[/]", "[conceal]x[/conceal]", "[link=http://x]y", "\x1b[2J\x1b[H", "\u202e",
         "\r", "\x00", "\x85", "\ud800", "\udcff", "/tmp/[old]/env", "all good\x1b[8m"]  # fmt: skip
text = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=()), max_size=30),
    st.sampled_from(NASTY),
)
number = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(10**400),
)
value = st.one_of(text, number, st.none(), st.booleans())


def _node(name: Any, version: Any, build: Any, fact: Any, busbw: Any, wrong: Any) -> str:
    part = {"time_us": 10.0, "algbw": 1.0, "busbw": busbw, "wrong": wrong}
    doc = {
        "schema": "envtool.node/1",
        "node": name,
        "prefix": fact,
        "export": {"schema": "envtool.export/1", "packages": [
            {"name": name, "version": version, "build": build, "channel": fact,
             "manager": "conda"}]},
        "facts": {"schema": "envtool.gpu-facts/1", "hostname": fact, "python": version,
                  "torch": fact, "nccl": fact, "driver": fact, "cuda_available": True,
                  "device_count": wrong, "devices": [{"index": 0, "name": fact}],
                  "env": {"NCCL_SOCKET_IFNAME": fact}, "notes": [fact]},
        "allreduce": {"schema": "envtool.allreduce/1", "backend": fact, "nranks": 2,
                      "rows": [{"size": 1024, "count": 256, "oop": part, "ip": part}],
                      "devices": [{"rank": 0, "host": fact, "name": fact}],
                      "wrong_total": wrong, "avg_busbw": busbw},
    }  # fmt: skip
    return json.dumps(doc)  # NaN and Infinity as JSON's non-standard tokens, as a node could


GOOD = json.dumps(
    {
        "schema": "envtool.node/1",
        "node": "good",
        "export": {"schema": "envtool.export/1", "packages": [{"name": "numpy", "version": "1"}]},
        "facts": {"schema": "envtool.gpu-facts/1", "python": "3.9.18", "device_count": 0},
    }
)


def _strict(token: str) -> None:
    raise AssertionError(f"not strict JSON: {token}")


@SETTINGS
@given(name=value, version=value, build=value, fact=value, busbw=number, wrong=number)
def test_any_node_answer_renders_in_every_format(
    name: Any, version: Any, build: Any, fact: Any, busbw: Any, wrong: Any
) -> None:
    answers = [
        Answer("bad", 0, _node(name, version, build, fact, busbw, wrong)),
        Answer("good", 0, GOOD),
    ]
    reports = [host_report(a) for a in answers]
    policy = verdict.Policy(gpu.GpuPolicy(min_gpus=0, min_busbw=1.0))
    findings = verdict.decide(reports, None, policy)
    result = verdict.Verdict(tuple(reports), tuple(findings), "", 0.1)
    doc = report.document(result)
    assert [h.host for h in doc.hosts] == ["bad", "good"] and doc.hosts[1].packages == 1
    parsed = json.loads(vr.dumps(doc), parse_constant=_strict)
    assert vr.loads(vr.dumps(doc), "r") == doc and parsed["hosts"][1]["host"] == "good"
    xml = junit.render(doc)
    ET.fromstring(xml)  # well-formed: no control character XML 1.0 forbids
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        report.show(result, "table", None)
    shown = out.getvalue()
    assert all(ch.isprintable() or ch == "\n" for ch in shown), repr(shown[:200])
    assert "good" not in shown or "bad" in shown or not findings
