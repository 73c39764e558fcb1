"""Hostile input, property-based: every parser either accepts its input or raises envtool's
one-line InputError (never another exception, never a multi-line message)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envtool import environments as envread
from envtool.cluster import hosts
from envtool.errors import EnvtoolError
from envtool.lock import lockfile, spec
from envtool.nccl import parse as nccl
from envtool.protocol import schemas
from envtool.protocol.answers import host_report
from envtool.protocol.types import Answer
from envtool.report.labels import problem_text

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
yaml_ish = st.text(
    alphabet=st.sampled_from(list("abc:-[]{}'\"#\n =.,0123456789_@/|>!&*")), max_size=200
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4)
    ),
    max_leaves=30,
)


def _one_line(exc: EnvtoolError) -> None:
    assert "\n" not in str(exc) and str(exc)


@SETTINGS
@given(text=yaml_ish)
def test_environment_files(tmp_path: Path, text: str) -> None:
    path = tmp_path / "environment.yml"
    path.write_text(text)
    try:
        spec.read_env(path)
    except EnvtoolError as exc:
        _one_line(exc)


@SETTINGS
@given(text=yaml_ish)
def test_lockfiles(text: str) -> None:
    try:
        lockfile.parse("version: 1\n" + text, Path("conda-lock.yml"))
    except EnvtoolError as exc:
        _one_line(exc)


@SETTINGS
@given(doc=json_values)
def test_lockfile_shapes(doc: object) -> None:
    try:
        lockfile.parse(
            json.dumps({"version": 1, "metadata": doc, "package": [doc]}), Path("conda-lock.yml")
        )
    except EnvtoolError as exc:
        _one_line(exc)


@SETTINGS
@given(text=st.text(max_size=200))
def test_hosts_files(text: str) -> None:
    try:
        found = hosts.parse_text(text, "hosts.txt")
    except EnvtoolError as exc:
        _one_line(exc)
        return
    for host in found:  # whatever is accepted is safe on an ssh command line
        assert not host.name.startswith("-")
        assert not set(host.name) & set(" \t\n;$`'\"/\\|&<>()")


@SETTINGS
@given(doc=json_values)
def test_node_answers(doc: object) -> None:
    wrapped = {"schema": "envtool.node/1", "export": doc, "facts": doc, "allreduce": doc}
    for text in (json.dumps(doc), json.dumps(wrapped)):
        report = host_report(Answer("gpu01", 0, text, "", 0.1))
        assert report.ok and (report.env is not None or report.problems or report.facts)
        assert all("\n" not in problem_text(p) for p in report.problems)


@SETTINGS
@given(data=st.binary(max_size=300))
def test_node_garbage_bytes(data: bytes) -> None:
    text = data.decode("utf-8", errors="replace")
    report = host_report(Answer("gpu01", 0, text, "", 0.1))
    assert report.ok and report.env is None and report.facts is None
    assert [p.part for p in report.problems] == ["answer"]


@SETTINGS
@given(text=st.text(max_size=300))
def test_nccl_logs(text: str) -> None:
    try:
        nccl.parse(text, "log.txt")
    except EnvtoolError as exc:
        _one_line(exc)


@SETTINGS
@given(text=yaml_ish)
def test_export_yaml(tmp_path: Path, text: str) -> None:
    path = tmp_path / "export.yml"
    path.write_text(text)
    try:
        envread.load(str(path))
    except EnvtoolError as exc:
        _one_line(exc)


def test_oversized_node_answer() -> None:
    report = host_report(Answer("gpu01", 0, " " * (schemas.MAX_DOCUMENT + 1), "", 0.1))
    assert report.env is None and "too large" in report.problems[0].detail


@pytest.mark.parametrize("depth", [10, 5000])
def test_deeply_nested_answer(depth: int) -> None:
    text = "[" * depth + "]" * depth
    report = host_report(Answer("gpu01", 0, text, "", 0.1))
    assert report.env is None and report.problems


def test_deeply_nested_json_file(tmp_path: Path) -> None:
    from envtool.errors import InputError

    path = tmp_path / "probe.json"
    path.write_text('{"a": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(InputError, match="nested too deeply"):
        envread.load(str(path))
