"""``--solver conda-lock``: the real conda-lock CLI, driven through the micromamba double."""

from __future__ import annotations

from pathlib import Path

from conftest import Project, require
from fixtures.fake_micromamba import make_fake_micromamba

from envtool.lock import lockfile


def _double(tmp_path: Path) -> Path:
    try:
        import conda_lock  # noqa: F401
    except ImportError:
        require(False, "conda-lock is not installed")
    return make_fake_micromamba(tmp_path / "bin")


def _entries(path: Path) -> set[tuple[str, str, str, str | None, str | None]]:
    return {(p.name, p.version, p.url, p.md5, p.sha256) for p in lockfile.read(path).packages}


def test_conda_lock_backend_agrees_with_rattler(project: Project, tmp_path: Path) -> None:
    exe = _double(tmp_path)
    assert project.run("lock")[0] == 0
    ours = _entries(project.lock)
    project.lock.unlink()
    code, out, err = project.run("lock", "--solver", "conda-lock", "--conda", str(exe))
    assert code == 0, err
    assert "linux-64: 9 conda packages" in out
    assert _entries(project.lock) == ours
    assert project.run("lock", "--check")[0] == 0


def test_conda_lock_backend_with_a_mirror(project: Project, tmp_path: Path) -> None:
    exe = _double(tmp_path)
    project.write_env(project.env.read_text().replace(project.channel.as_uri(), "conda-forge"))
    code, _, err = project.run(
        "lock",
        "--solver",
        "conda-lock",
        "--conda",
        str(exe),
        "--channel-mirror",
        f"conda-forge={project.channel.as_uri()}",
    )
    assert code == 0, err
    lock = lockfile.read(project.lock)
    assert lock.metadata.channels == ("conda-forge",)
    assert all(p.url.startswith("https://conda.anaconda.org/conda-forge/") for p in lock.packages)


def test_conda_lock_backend_unsolvable(project: Project, tmp_path: Path) -> None:
    exe = _double(tmp_path)
    project.env.write_text(project.env.read_text().replace("  - nccl\n", "  - nccl>=9\n"))
    code, _, err = project.run("lock", "--solver", "conda-lock", "--conda", str(exe))
    assert code == 2 and "conda-lock failed" in err and err.count("\n") == 1
    assert not project.lock.exists()


def test_conda_lock_backend_missing_executable(project: Project, tmp_path: Path) -> None:
    code, _, err = project.run("lock", "--solver", "conda-lock", "--conda", str(tmp_path / "nope"))
    assert code == 2 and "no such executable" in err
