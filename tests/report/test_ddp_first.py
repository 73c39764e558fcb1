"""Reports lead with what decides a DDP run: ``envtool diff`` of two real 300+-package locks
lists python, torch, NCCL, CUDA, MPI first and counts the rest per kind; ``--all`` lists
every row; a differing ordinary package is a warning beside a differing nccl."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_main

from envtool.cli import main
from envtool.judge import critical, packages
from envtool.judge.findings import Severity
from envtool.models import Environment, Package


def _diff(tmp_path: Path, shared_data: Path, *extra: str) -> tuple[int, str]:
    real = shared_data / "real"
    argv = ("diff", str(real / "pangeo-pytorch.conda-lock.yml"),
            str(real / "drdmannturb.conda-lock.yml"), *extra)  # fmt: skip
    code, out, _ = run_main(main, tmp_path, [], argv)
    return code, out


def test_two_real_locks_show_the_ddp_rows_first(tmp_path: Path, shared_data: Path) -> None:
    code, out = _diff(tmp_path, shared_data, "--format", "json")
    assert code == 1
    findings = json.loads(out)["findings"]
    assert len(findings) > 700  # JSON lists every finding
    subjects = [f["subject"] for f in findings]
    first = subjects[: subjects.index("anyio")] if "anyio" in subjects else subjects
    for name in ("python", "pytorch", "nccl", "libtorch", "mpich"):
        assert name in first  # every DDP-critical row comes before the first ordinary one
    critical_rows = [f for f in findings if critical.package(f["subject"])]
    assert findings[: len(critical_rows)] == critical_rows
    assert next(f for f in findings if f["subject"] == "nccl")["severity"] == "error"
    ordinary = [
        f for f in findings if f["kind"] == "version-differs" and not critical.package(f["subject"])
    ]
    assert len(ordinary) > 10 and {f["severity"] for f in ordinary} == {"warning"}
    assert all("/" not in f["hint"] for f in findings)  # no path repeated in every row


def test_the_table_counts_what_it_folds(tmp_path: Path, shared_data: Path) -> None:
    code, out = _diff(tmp_path, shared_data)
    assert code == 1
    folded = next(line for line in out.splitlines() if line.startswith("and "))
    assert "more about other packages" in folded and "(--all lists them)" in folded
    assert "nccl" in out and "anyio" not in out
    code, everything = _diff(tmp_path, shared_data, "--all")
    assert "anyio" in everything and "more about other packages" not in everything


def test_ordinary_versions_are_warnings_and_missing_stays_an_error() -> None:
    anyio, nccl = Package("anyio", "4.3.0", "pyh_0"), Package("nccl", "2.21.5.1", "h0")
    a = Environment("a", "lock", (anyio, nccl, Package("six", "1", "0")))
    b = Environment(
        "b", "lock", (Package("anyio", "4.4.0", "pyh_0"), Package("nccl", "2.22.3.1", "h1"))
    )
    found = {f.subject: f.severity for f in packages.diff(a, b)}
    assert found == {"anyio": Severity.WARNING, "nccl": Severity.ERROR, "six": Severity.ERROR}
