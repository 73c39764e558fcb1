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
