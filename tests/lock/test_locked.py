"""Package entries as conda-lock >= 2 writes them: one entry per category, pip VCS commits."""

from __future__ import annotations

from pathlib import Path

import pytest

from envtool.environments import from_lock
from envtool.errors import InputError
from envtool.lock import lockfile

COMMIT = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"
HEAD = """\
version: 1
metadata:
  content_hash:
    linux-64: 5d2c1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d
  channels:
  - url: conda-forge
    used_env_vars: []
  platforms:
  - linux-64
  sources:
  - environment.yml
package:
"""
# libblas is in main (numpy needs it) and in dev (a dev tool needs it too): conda-lock >= 2
# writes it once per category, sorted, identical but for category and optional.
BLAS = """\
- name: libblas
  version: 3.9.0
  manager: conda
  platform: linux-64
  dependencies:
    libopenblas: '>=0.3.27,<1.0a0'
  url: https://conda.anaconda.org/conda-forge/linux-64/libblas-3.9.0-20_linux64_openblas.conda
  hash:
    md5: 2b7bb4f7562c8cf334fc2e20c2d28abc
    sha256: 8a0ee1de693a9b3da4a11b95ec81b40dd434bd01fa1f5f38f8268cd2146bf8f0
  category: {category}
  optional: {optional}
"""
# A pip dependency from git: conda-lock writes the resolved commit into the URL, into
# source.url and into hash.sha256.
GIT = f"""\
- name: mylib
  version: 0.3.1
  manager: pip
  platform: linux-64
  dependencies:
    numpy: '>=1.21'
  url: git+https://github.com/example/mylib.git@{COMMIT}
  hash:
    sha256: {COMMIT}
  source:
    type: url
    url: git+https://github.com/example/mylib.git@{COMMIT}
  category: main
  optional: false
"""


def _blas(category: str) -> str:
    return BLAS.format(category=category, optional=str(category != "main").lower())


def _read(tmp_path: Path, text: str) -> lockfile.Lockfile:
    path = tmp_path / "conda-lock.yml"
    path.write_text(text)
    return lockfile.read(path)


def _bad(tmp_path: Path, text: str) -> str:
    with pytest.raises(InputError) as info:
        _read(tmp_path, text)
    message = str(info.value)
    assert "\n" not in message and f"{tmp_path / 'conda-lock.yml'}:" in message
    return message


def test_one_entry_per_category_is_one_package(tmp_path: Path) -> None:
    lock = _read(tmp_path, HEAD + _blas("dev") + _blas("main") + _blas("test"))
    (blas,) = lock.packages
    assert blas.categories == ("dev", "main", "test")
    assert (blas.version, blas.build, blas.md5) == (
        "3.9.0",
        "20_linux64_openblas",
        "2b7bb4f7562c8cf334fc2e20c2d28abc",
    )
    env = from_lock(lock, "conda-lock.yml", "linux-64")
    assert [p.name for p in env.packages] == ["libblas"]


def test_categories_are_written_back_one_entry_each(tmp_path: Path) -> None:
    lock = _read(tmp_path, HEAD + _blas("dev") + _blas("main"))
    text = lockfile.dumps(lock)
    assert text.count("- name: libblas") == 2
    assert "category: dev\n  optional: true" in text
    assert "category: main\n  optional: false" in text
    assert _read(tmp_path, text) == lock


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("version: 3.9.0", "version: 3.9.1", "version '3.9.0' vs '3.9.1'"),
        ("20_linux64_openblas", "21_linux64_openblas", "url 'https://"),
        ("md5: 2b7b", "md5: 3b7b", "md5 '2b7b"),
        ("sha256: 8a0e", "sha256: 9a0e", "sha256 '8a0e"),
        ("'>=0.3.27,<1.0a0'", "'>=0.3.28'", "dependencies"),
    ],
)
def test_entries_that_differ_beyond_category_conflict(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    second = _blas("main").replace(old, new, 1)
    message = _bad(tmp_path, HEAD + _blas("dev") + second)
    assert "conda-lock.yml:25: conflicting entries for libblas (conda, linux-64): " in message
    assert expected in message and message.endswith("(first: line 13)")


def test_the_same_category_twice_is_a_duplicate(tmp_path: Path) -> None:
    message = _bad(tmp_path, HEAD + _blas("dev") + _blas("main") + _blas("dev"))
    assert "conda-lock.yml:37: duplicate entry for libblas (conda, linux-64)" in message


def test_pip_git_commit_is_a_revision_not_a_sha256(tmp_path: Path) -> None:
    lock = _read(tmp_path, HEAD + GIT)
    (pkg,) = lock.packages
    assert (pkg.revision, pkg.sha256, pkg.md5) == (COMMIT, None, None)
    assert pkg.is_vcs and pkg.source == pkg.url and pkg.url.endswith("@" + COMMIT)
    (package,) = from_lock(lock, "conda-lock.yml", "linux-64").packages
    assert package.sha256 == "" and package.url == pkg.url  # nothing compares it as a digest
    again = _read(tmp_path, lockfile.dumps(lock))
    assert again == lock
    assert f"sha256: {COMMIT}" in lockfile.dumps(lock)  # written back where conda-lock reads it


def test_pip_git_over_ssh_with_a_user(tmp_path: Path) -> None:
    url = f"git+ssh://git@github.com/example/mylib.git@{COMMIT}"
    (pkg,) = _read(
        tmp_path, HEAD + GIT.replace(f"git+https://github.com/example/mylib.git@{COMMIT}", url)
    ).packages
    assert (pkg.url, pkg.revision) == (url, COMMIT)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (f"sha256: {COMMIT}", "sha256: main", ":21: a pip VCS entry keeps its commit id"),
        (f"sha256: {COMMIT}", f"md5: {'a' * 32}", ":21: a pip VCS entry keeps its commit id"),
        (
            f"mylib.git@{COMMIT}\n  hash",
            f"mylib.git@{'0' * 40}\n  hash",
            f":21: the URL pins commit {'0' * 40} but sha256 says {COMMIT}",
        ),
        (  # a commit id where a wheel's sha256 belongs is still an error
            f"url: git+https://github.com/example/mylib.git@{COMMIT}\n  hash",
            "url: https://example.org/mylib-0.3.1-py3-none-any.whl\n  hash",
            ":21: sha256 must be 64 hex digits",
        ),
    ],
)
def test_bad_vcs_entries(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in GIT
    assert expected in _bad(tmp_path, HEAD + GIT.replace(old, new, 1))


def test_a_branch_in_the_url_is_resolved_by_the_commit(tmp_path: Path) -> None:
    text = GIT.replace(f"mylib.git@{COMMIT}\n  hash", "mylib.git@main\n  hash", 1)
    (pkg,) = _read(tmp_path, HEAD + text).packages
    assert pkg.revision == COMMIT and pkg.url.endswith("@main")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{type: path, url: x}", ":22: source must be {type: url, url: ...}"),
        ("{type: url}", ":22: source must be {type: url, url: ...}"),
        ("{type: url, url: x, y: 1}", ":22: unknown source field 'y'"),
    ],
)
def test_bad_source(tmp_path: Path, source: str, expected: str) -> None:
    block = f"source:\n    type: url\n    url: git+https://github.com/example/mylib.git@{COMMIT}"
    assert block in GIT
    assert expected in _bad(tmp_path, HEAD + GIT.replace(block, f"source: {source}", 1))


def test_source_null_as_conda_lock_1_wrote_it(tmp_path: Path) -> None:
    wheel = "https://files.example.org/tiny_dist-1.0.2-py3-none-any.whl"
    entry = (
        GIT.replace(f"git+https://github.com/example/mylib.git@{COMMIT}", wheel, 1)
        .replace(f"sha256: {COMMIT}", f"sha256: {'e' * 64}")
        .replace(
            f"source:\n    type: url\n    url: git+https://github.com/example/mylib.git@{COMMIT}",
            "source: null",
        )
    )
    (pkg,) = _read(tmp_path, HEAD + entry).packages
    assert (pkg.url, pkg.sha256, pkg.revision, pkg.source) == (wheel, "e" * 64, "", "")


def test_install_refuses_a_commit_before_it_installs_anything(tmp_path: Path) -> None:
    """pip's --require-hashes installs files only: a lock's git entry is refused by name,
    with the command that installs it, before the prefix is touched."""
    from conftest import run_main

    from envtool.cli import main

    lock = tmp_path / "conda-lock.yml"
    lock.write_text(HEAD + GIT)
    prefix = tmp_path / "env"
    argv = ("install", "--lockfile", str(lock), "--prefix", str(prefix), "--allow-stale")
    code, _, err = run_main(main, tmp_path, [], argv)
    assert code == 2 and err.count("\n") == 1
    assert "pip entry mylib is a commit of a repository" in err
    assert f"mylib @ git+https://github.com/example/mylib.git@{COMMIT}" in err
    assert not prefix.exists()
