"""``envtool verify --transport local``: this machine through the same node script."""

from __future__ import annotations

import json
from pathlib import Path

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
    assert [(f["kind"], f["actual"]) for f in findings] == [("env-missing", f"none at {where}")]
    assert "envtool install" in findings[0]["hint"]
