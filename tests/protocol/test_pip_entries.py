"""``envtool/pip_entries.py``: every line a ``- pip:`` block of ``conda env export`` holds.

Old conda wrote ``pip freeze``'s lines there, so real exports carry each form pip writes:
``name==v``, ``name===v``, ``name @ URL``, VCS URLs with or without ``@rev`` and ``#egg=``,
editable ``-e ...`` lines and wheel URLs. Each is read into a pip Package, or refused with
one line naming the file and the line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envtool import environments
from envtool.errors import InputError
from envtool.judge import packages
from envtool.models import Environment, Package
from envtool.pip_entries import BadEntry, lock_version, parse, vcs_revision

C1 = "4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70"
C2 = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"
WHL = "https://download.pytorch.org/whl/cu118/torch-2.1.0%2Bcu118-cp39-cp39-linux_x86_64.whl"

# line, name, version (the pin: release, vcs:rev, or "" unpinned), url, sha256
# fmt: off
FORMS = [
    ("numpy==1.26.4", "numpy", "1.26.4", "", ""),
    ("Typing_Extensions==4.9.0", "Typing_Extensions", "4.9.0", "", ""),
    ("torch==2.1.0+cu118", "torch", "2.1.0+cu118", "", ""),
    ("legacy-thing===2013b", "legacy-thing", "2013b", "", ""),
    ("requests[socks]==2.31.0", "requests", "2.31.0", "", ""),
    (
        "tiny-pkg @ file:///tmp/wheels/tiny_pkg-0.1.2-py3-none-any.whl",
        "tiny-pkg",
        "0.1.2",
        "file:///tmp/wheels/tiny_pkg-0.1.2-py3-none-any.whl",
        "",
    ),
    (f"torch @ {WHL}", "torch", "2.1.0+cu118", WHL, ""),
    (f"torch @ {WHL}#sha256={'AB' * 32}", "torch", "2.1.0+cu118", WHL, "ab" * 32),
    (WHL, "torch", "2.1.0+cu118", WHL, ""),  # a bare wheel URL
    ("./dist/tiny_pkg-0.1.2-py3-none-any.whl", "tiny_pkg", "0.1.2",
     "./dist/tiny_pkg-0.1.2-py3-none-any.whl", ""),
    ("pkg @ https://example.org/dl/pkg-1.2.tar.gz", "pkg", "1.2",
     "https://example.org/dl/pkg-1.2.tar.gz", ""),
    (f"joblib @ https://github.com/joblib/joblib/archive/{C1}.zip", "joblib", "",
     f"https://github.com/joblib/joblib/archive/{C1}.zip", ""),
    (f"vcs-demo @ git+https://github.com/org/vcs-demo.git@{C1}", "vcs-demo", f"git:{C1}",
     f"git+https://github.com/org/vcs-demo.git@{C1}", ""),
    ("git+https://github.com/org/repo.git", "repo", "", "git+https://github.com/org/repo.git", ""),
    ("git+https://github.com/org/repo.git@v1.0", "repo", "git:v1.0",
     "git+https://github.com/org/repo.git@v1.0", ""),
    (f"git+https://github.com/org/repo.git@{C1}", "repo", f"git:{C1}",
     f"git+https://github.com/org/repo.git@{C1}", ""),
    (f"git+https://github.com/org/repo.git@{C1}#egg=My_Pkg", "My_Pkg", f"git:{C1}",
     f"git+https://github.com/org/repo.git@{C1}", ""),
    ("git+https://github.com/org/repo.git#egg=my-pkg&subdirectory=python", "my-pkg", "",
     "git+https://github.com/org/repo.git", ""),
    (f"git+ssh://git@github.com/org/repo.git@{C1}#egg=private", "private", f"git:{C1}",
     f"git+ssh://git@github.com/org/repo.git@{C1}", ""),
    ("git+git@github.com:org/repo.git@v2#egg=scp", "scp", "git:v2",
     "git+git@github.com:org/repo.git@v2", ""),
    ("hg+https://hg.example.org/proj@4f2c9a#egg=proj", "proj", "hg:4f2c9a",
     "hg+https://hg.example.org/proj@4f2c9a", ""),
    (f"-e git+https://github.com/org/repo.git@{C1}#egg=dev_pkg", "dev_pkg", f"git:{C1}",
     f"git+https://github.com/org/repo.git@{C1}", ""),
    ("-e /home/me/src/myproj", "myproj", "", "/home/me/src/myproj", ""),
    ("--editable=file:///home/me/src/x#egg=myproj", "myproj", "", "file:///home/me/src/x", ""),
]
# fmt: on


@pytest.mark.parametrize(("line", "name", "version", "url", "sha256"), FORMS)
def test_each_form_pip_writes(line: str, name: str, version: str, url: str, sha256: str) -> None:
    assert parse(line) == Package(name, version, manager="pip", url=url, sha256=sha256)
    assert parse(f"  {line}  ") == parse(line)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("numpy>=1.0", "expected 'name==version', 'name @ URL'"),
        ("numpy==", "expected 'name==version'"),
        ("numpy==1.*", "'1.*' is not a pinned version"),
        ("numpy=1.26.4", "expected 'name==version'"),
        ("numpy==1.0 ; python_version < '3.8'", "expected 'name==version'"),
        ("pkg @ ./dist/pkg.tar.gz", "'pkg @' needs a URL"),
        ("https://github.com/joblib/joblib/archive/main.zip", "cannot tell the distribution's"),
        ("-e .", "cannot tell the distribution's name"),
        ("git+https://github.com/org/repo.git@", "'@' is not a revision"),
        ("cvs+https://example.org/repo#egg=x", "cvs+https:// is not a VCS URL"),
        ("other @ https://h/torch-2.1.0-py3-none-any.whl", "does not match the wheel's name"),
        ("https://h/torch-2.1.0.whl", "not a wheel file name"),
        ("https://h/torch-2.1.0-py3-none-any.whl#sha256=abc", "'#sha256=' needs the 64 hex"),
        ("   ", "an empty pip entry"),
    ],
)
def test_lines_pip_never_writes_are_refused(line: str, why: str) -> None:
    with pytest.raises(BadEntry, match=re.escape(why)):
        parse(line)


def test_a_bad_line_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    export = tmp_path / "env.yml"
    export.write_text(
        "name: x\ndependencies:\n  - python=3.9.18\n  - pip:\n      - numpy==1.26.4\n"
        "      - git+https://github.com/org/repo.git@\n"
    )
    with pytest.raises(InputError) as caught:
        environments.load(str(export))
    message = str(caught.value)
    assert message.startswith(f"{export}:6: '@' is not a revision, got ")
    assert "\n" not in message and "repo.git@'" in message
    export.write_text("name: x\ndependencies:\n  - pip:\n      - 3\n      - [a]\n")
    with pytest.raises(InputError, match=r"env\.yml:4: a pip entry must be a string, got 3$"):
        environments.load(str(export))


# conda env export as old conda wrote it: pip freeze's lines under '- pip:'
EXPORT = f"""\
name: dl
channels:
  - defaults
dependencies:
  - python=3.9.18=h0755675_1_cpython
  - pip=23.3.1=pyhd8ed1ab_0
  - pip:
      - numpy==1.26.4
      - legacy-thing===2013b
      - tiny-pkg @ file:///tmp/wheels/tiny_pkg-0.1.2-py3-none-any.whl
      - {WHL}
      - vcs-demo @ git+https://github.com/org/vcs-demo.git@{C1}
      - git+https://github.com/org/unpinned.git
      - git+https://github.com/org/tagged.git@v1.0#egg=tagged
      - -e git+https://github.com/org/dev.git@{C1}#egg=dev_pkg
      - -e /home/me/src/myproj
prefix: /home/me/miniconda3/envs/dl
"""


def test_an_export_with_every_form_reads(tmp_path: Path) -> None:
    path = tmp_path / "env.yml"
    path.write_text(EXPORT)
    env = environments.load(str(path))
    pins = {p.key: p.version for p in env.packages if p.manager == "pip"}
    assert pins == {
        "numpy": "1.26.4",
        "legacy-thing": "2013b",
        "tiny-pkg": "0.1.2",
        "torch": "2.1.0+cu118",
        "vcs-demo": f"git:{C1}",
        "unpinned": "",
        "tagged": "git:v1.0",
        "dev-pkg": f"git:{C1}",
        "myproj": "",
    }
    assert [p.name for p in env.packages if p.manager == "conda"] == ["python", "pip"]
    assert packages.diff(env, env) == []


def _one(version: str) -> Environment:
    return Environment("B", "probe", (Package("vcs-demo", version, manager="pip"),))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("", f"git:{C1}"),  # an unpinned VCS URL is not that commit
        ("", "0.3.0"),  # nor a release
        (f"git:{C1}", f"git:{C2}"),
        (f"git:{C1}", "0.3.0"),
        ("git:v1.0", f"git:{C1}"),  # a tag is not compared with a commit
    ],
)
def test_unpinned_and_other_pins_differ(a: str, b: str) -> None:
    (f,) = packages.diff(_one(a), _one(b))
    assert f.kind == "version-differs" and f.reference is not None and f.found is not None
    assert (f.reference.version, f.found.version) == (a, b)


def test_vcs_revision_of_lock_and_node_urls() -> None:
    assert vcs_revision(f"git+https://github.com/org/repo.git@{C1}") == f"git:{C1}"
    assert vcs_revision("git+ssh://git@github.com/org/repo.git") == ""
    assert vcs_revision(WHL) is None and vcs_revision("") is None
    assert vcs_revision("cvs+https://x/y") is None


def test_a_lock_entry_from_git_is_compared_by_its_commit() -> None:
    url = f"git+https://github.com/org/repo.git@{C1}"
    assert lock_version(url, "0.3.0", C1) == f"git:{C1}" == parse(f"repo @ {url}").version
    assert lock_version(WHL, "2.1.0+cu118", "") == "2.1.0+cu118"


def test_real_exports_keep_their_counts(shared_data: Path) -> None:
    """SOURCES.md: conda entries with builds (or not) and the pip entries of each export."""
    counts = {
        "breaching.env-export.yml": (278, 39),
        "basenji.env-export.yml": (393, 37),
        "lanxiukai.env-export-nobuilds.yml": (170, 26),
    }
    for name, (conda, pip) in counts.items():
        env = environments.load(str(shared_data / "real" / name))
        got = [p.manager for p in env.packages]
        assert (got.count("conda"), got.count("pip")) == (conda, pip), name
        assert all(p.version and not p.url for p in env.packages if p.manager == "pip")


@pytest.mark.parametrize(
    "line",
    [
        "six @ https://h/six-1.16.0-py2.py3-none-any.whl\nevil @ http://e/evil-1.0-py3-none-any.whl",
        "https://h/a\rb/six-1.16.0-py2.py3-none-any.whl",
        "six==1.16.0\x00",
        "https://h/x\u2028/six-1.16.0-py2.py3-none-any.whl",
        "--index-url=http://evil/simple",
        "-r /etc/requirements.txt",
    ],
)
def test_line_breaks_and_option_lines_are_refused(line: str) -> None:
    with pytest.raises(BadEntry, match=r"one line|pip option|expected"):
        parse(line)
