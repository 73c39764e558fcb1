"""``.ci/run``, which the README offers to users too, says what it needs when the sibling
test data is absent (before installing anything), instead of failing 60 tests under CI=true."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_ci_run_without_the_shared_data_says_what_it_needs(tmp_path: Path) -> None:
    checkout = tmp_path / "clone"
    (checkout / ".ci").mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "run", checkout / ".ci" / "run")
    run = subprocess.run(["bash", ".ci/run"], cwd=checkout, capture_output=True, text=True,
                         timeout=30)  # fmt: skip
    assert run.returncode == 2 and run.stdout == ""
    assert f"{tmp_path}/shared/data is absent" in run.stderr
    assert "make test" in run.stderr
