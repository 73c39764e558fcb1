"""The command line itself: help, version, module entry, usage errors, exit codes."""

from __future__ import annotations

import subprocess
import sys
import time

from conftest import REPO, Project


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envtool", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        check=False,
    )


def test_help_lists_every_command() -> None:
    out = _run("--help")
    assert out.returncode == 0
    for command in ("lock", "install"):
        assert command in out.stdout


def test_version() -> None:
    from envtool import __version__

    out = _run("--version")
    assert out.returncode == 0 and __version__ in out.stdout


def test_usage_error_exits_2() -> None:
    out = _run("lock", "--solver", "pip")
    assert out.returncode == 2 and "Invalid value" in out.stderr


def test_conda_lock_solver_without_conda_fails_at_once(project: Project) -> None:
    start = time.perf_counter()
    code, _, err = project.run("lock", "--solver", "conda-lock")
    assert code == 2 and "--conda PATH" in err
    assert time.perf_counter() - start < 5
    assert not project.lock.exists()


def test_missing_environment_file(project: Project) -> None:
    project.env.unlink()
    code, _, err = project.run("lock")
    assert code == 2 and "environment.yml: environment file not found" in err


def test_importing_the_cli_loads_no_heavy_dependency() -> None:
    code = (
        "import sys, envtool.cli; bad = [m for m in ('rattler', 'yaml', 'docker', 'torch', "
        "'rich') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_build_without_a_docker_engine_is_one_line(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from conftest import run_main

    from envtool.cli import main

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    code, _, err = run_main(main, REPO, [], ("build", "-t", "x/y:z"))
    assert code == 2 and "no Docker engine" in err and err.count("\n") == 1


def test_internal_error_is_exit_3_with_or_without_the_traceback(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from conftest import run_main

    from envtool.cli import main
    from envtool.judge import packages

    def broken(*_: object, **__: object) -> list[object]:
        raise TypeError("a bug")  # no real input reaches this path: it stands for a bug

    monkeypatch.setattr(packages, "differences", broken)
    lock = REPO / "conda-lock.yml"
    monkeypatch.delenv("ENVTOOL_DEBUG", raising=False)
    code, _, err = run_main(main, tmp_path, [], ("diff", str(lock), str(lock)))
    assert code == 3 and err.count("\n") == 1 and "internal error: TypeError: a bug" in err
    monkeypatch.setenv("ENVTOOL_DEBUG", "1")
    code, _, err = run_main(main, tmp_path, [], ("diff", str(lock), str(lock)))
    assert code == 3 and "Traceback (most recent call last)" in err and "a bug" in err


def test_diff_names_an_artifact_two_locks_disagree_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Two locks that pin the same name-version-build with another sha256 mean two files."""
    import json
    import re

    from conftest import run_main

    from envtool.cli import main

    text = (REPO / "conda-lock.yml").read_text()
    first = re.search(r"sha256: ([0-9a-f]{64})", text)
    assert first is not None
    other = tmp_path / "other.yml"
    other.write_text(text.replace(first.group(1), "e" * 64, 1))  # (all digits: a YAML int)
    argv = ("diff", str(REPO / "conda-lock.yml"), str(other), "--format", "json")
    code, out, _ = run_main(main, tmp_path, [], argv)
    assert code == 1
    (f,) = json.loads(out)["findings"]
    assert f["kind"] == "artifact-differs" and "sha256 eeeeeeeeeeee" in f["actual"]
    assert f"sha256 {first.group(1)[:12]}" in f["expected"]
    code, _, _ = run_main(main, tmp_path, [], ("diff", str(other), str(other)))
    assert code == 0


def test_a_docker_run_arg_off_the_allow_list_is_refused_before_any_container() -> None:
    """Issue 37: ``--docker-run-arg`` is one allow-listed option with its value, and only with
    ``--image`` (verify) or ``--verify`` (build): exit 2, one line, no docker started (none
    is reachable here: a started one would fail otherwise)."""
    image = ("verify", "--transport", "docker", "--image", "lab/ddp:1", "--hosts", "image")
    out = _run(*image, "--docker-run-arg", "--privileged")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "--docker-run-arg '--privileged'" in out.stderr and "--shm-size=" in out.stderr
    out = _run(*image, "--docker-run-arg=--volume=/:/host", "--no-lock")
    assert out.returncode == 2 and "--volume" in out.stderr
    out = _run("verify", "--transport", "docker", "--container", "c1", "--hosts", "image",
               "--docker-run-arg", "--shm-size=1g")  # fmt: skip
    assert out.returncode == 2 and "goes with --transport docker --image" in out.stderr
    out = _run("build", "--docker-run-arg", "--shm-size=1g")
    assert out.returncode == 2 and "goes with --verify" in out.stderr
    out = _run("build", "--verify", "--docker-run-arg", "--cap-add=SYS_ADMIN")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
