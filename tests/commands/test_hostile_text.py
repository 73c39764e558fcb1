"""Hostile names in a real prefix's conda-meta/, through a real ``envtool verify`` process:
nothing a node holds can write to the terminal, hide a version, or take the report down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import RUNTIME_ENV, Project
from fixtures import runtime
from fixtures.prefixes import add_dist_info

ENVTOOL = str(Path(sys.executable).parent / "envtool")
SCREEN = "zz\x1b[2J\x1b[3J\x1b[H all good\x1b[8m"


def _record(prefix: Path, name: str, version: str, build: str = "0") -> None:
    """A conda-meta record conda itself would read (its file name matches its fields)."""
    meta = prefix / "conda-meta"
    data = {"name": name, "version": version, "build": build, "build_number": 0, "depends": [],
            "channel": "https://conda.anaconda.org/conda-forge", "files": []}  # fmt: skip
    (meta / f"{name}-{version}-{build}.json").write_text(json.dumps(data))


@pytest.fixture
def hostile(project: Project, python_channel: Path, tmp_path: Path) -> tuple[Project, Path]:
    prefix = tmp_path / "env"
    project.write_env(RUNTIME_ENV.format(channel=python_channel.as_uri()))
    assert project.run("lock")[0] == 0
    assert project.run("install", "--prefix", str(prefix))[0] == 0
    torch = next((prefix / "conda-meta").glob("pytorch-*.json"))
    data = json.loads(torch.read_text())
    data["version"] = "1.0.0"  # a drift of what decides a DDP run, the screen trick wants hidden
    torch.unlink()
    (prefix / "conda-meta" / f"pytorch-1.0.0-{data['build']}.json").write_text(json.dumps(data))
    _record(prefix, SCREEN, "1.0")
    for name, version in (("hidden", "[conceal]9.9.9[/conceal]"), ("markup", "[/bold]")):
        meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
        # pip's METADATA says the version
        add_dist_info(prefix, name, "0", metadata=meta, sp=runtime.SP)
    _record(prefix, "bytes\udcff", "1.0")  # a file name that is not UTF-8
    return project, prefix


def _verify(project: Project, prefix: Path, *extra: str) -> subprocess.CompletedProcess[bytes]:
    argv = [ENVTOOL, "verify", "--transport", "local", "--hosts", "localhost",
            "--prefix", str(prefix), "--min-gpus", "0", *extra]  # fmt: skip
    wide = {**os.environ, "COLUMNS": "400"}  # no cell folded: each string whole on one line
    return subprocess.run(argv, cwd=project.root, capture_output=True, timeout=120, env=wide)


def test_the_table_shows_names_as_text(hostile: tuple[Project, Path]) -> None:
    project, prefix = hostile
    out = _verify(project, prefix, "--all")  # every finding listed, the hostile names too
    assert out.returncode == 1, out.stderr
    text = out.stdout.decode("utf-8")
    assert "\x1b" not in text and "\\x1b[2J" in text  # the escape is shown, not obeyed
    assert "[conceal]9.9.9[/conceal]" in text and "[/bold]" in text  # markup shown as text
    assert "bytes\\udcff" in text
    assert "pytorch=1.0.0" in text and "ERROR " in text  # the drift is still there
    assert all(ch.isprintable() or ch == "\n" for ch in text)


def test_json_and_junit_stay_valid(hostile: tuple[Project, Path], tmp_path: Path) -> None:
    project, prefix = hostile
    junit = tmp_path / "verify.xml"
    out = _verify(project, prefix, "--format", "json", "--junit", str(junit))
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    subjects = {f["subject"] for f in doc["findings"]}
    assert "zz\\x1b[2J\\x1b[3J\\x1b[H all good\\x1b[8m" in subjects
    ET.parse(junit)  # well-formed XML 1.0
    assert "\x1b" not in junit.read_text()
