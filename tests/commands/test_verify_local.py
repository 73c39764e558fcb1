"""``envtool verify --transport local``: this machine through the same node script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_main

from envtool.cli import main


def test_a_prefix_that_does_not_exist_is_env_missing(tmp_path: Path) -> None:
    where = tmp_path / "no-such-env"
    code, out, err = run_main(
        main,
        tmp_path,
        [],
        (
            "verify", "--transport", "local", "--hosts", "localhost", "--no-lock",
            "--prefix", str(where), "--min-gpus", "0", "--format", "json",
        ),
    )  # fmt: skip
    assert code == 1, err
    findings = json.loads(out)["findings"]
    assert [(f["kind"], f["actual"]) for f in findings] == [
        ("env-missing", f"no bin/python in {where}")
    ]
    assert "envtool install" in findings[0]["hint"]


@pytest.mark.parametrize(
    "bad",
    [
        ("--timeout", "-5"),
        ("--connect-timeout", "0"),
        ("--min-gpus", "-1"),
        ("--fanout", "0"),
        ("--tolerance", "2"),
        ("--min-busbw", "-1"),
    ],
    ids=lambda b: " ".join(b),
)
def test_nonsense_limits_are_usage_errors(tmp_path: Path, bad: tuple[str, str]) -> None:
    argv = ("verify", "--transport", "local", "--hosts", "localhost", "--no-lock", *bad)
    code, out, err = run_main(main, tmp_path, [], argv)
    assert code == 2 and "Invalid value" in err and not out


def _quiet_node(tmp_path: Path) -> Path:
    """A prefix whose python answers with an export and nothing else: no GPU facts, no
    all-reduce, and no failed part saying why (what a stripped-down or lying node sends)."""
    prefix = tmp_path / "quiet"
    (prefix / "bin").mkdir(parents=True)
    doc = {"schema": "envtool.node/1", "prefix": str(prefix), "node": "quiet",
           "export": {"schema": "envtool.export/1", "packages": []}}  # fmt: skip
    python = prefix / "bin" / "python"
    python.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(doc)}\nEOF\n")
    python.chmod(0o755)
    return prefix


@pytest.mark.parametrize(
    ("extra", "subject"),
    [(("--min-gpus", "1"), "GPUs"), (("--min-gpus", "0", "--allreduce", "node"), "all-reduce")],
)
def test_a_check_that_did_not_run_is_never_all_good(
    tmp_path: Path, extra: tuple[str, ...], subject: str
) -> None:
    argv = ("verify", "--transport", "local", "--hosts", "localhost", "--no-lock", "--prefix",
            str(_quiet_node(tmp_path)), "--format", "json", *extra)  # fmt: skip
    code, out, err = run_main(main, tmp_path, [], argv)
    assert code == 1, out + err
    found = [(f["kind"], f["subject"]) for f in json.loads(out)["findings"]]
    assert found == [("not-checked", subject)]


def test_a_busbw_floor_without_an_all_reduce_is_said_beside_all_good(tmp_path: Path) -> None:
    argv = ("verify", "--transport", "local", "--hosts", "localhost", "--no-lock", "--prefix",
            str(_quiet_node(tmp_path)), "--min-gpus", "0", "--min-busbw", "5")  # fmt: skip
    code, out, err = run_main(main, tmp_path, [], argv)
    assert code == 0, out + err
    verdict = out.split("\n\n")[-1].replace("\n  ", " ")
    assert verdict.startswith("all good: ")
    assert "not checked: busbw (--min-busbw/--baseline need an --allreduce mode)" in verdict
