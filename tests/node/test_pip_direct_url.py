"""A prefix's pip distributions by where pip installed them from (``direct_url.json``,
PEP 610), and the export lines of every form diffed against them.

A VCS install is pinned by its commit (``git:<commit>``, never a sha256: that is a file's
hash), an archive by its version and file hash, a folder (editable or not) by its version.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import require, run_main
from fixtures.prefixes import SP, add_dist_info

from envtool import environments
from envtool.judge import packages
from envtool.report.labels import words
from envtool_node.export import export_prefix
from envtool_node.site_packages import direct_url

C1 = "4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70"
C2 = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"
REPO_URL = "https://github.com/org/vcs-demo.git"
WHL = "https://download.pytorch.org/whl/cu118/torch-2.1.0%2Bcu118-cp39-cp39-linux_x86_64.whl"
SHA = "9f" * 32


def vcs(commit: str, url: str = REPO_URL, requested: str | None = None) -> dict[str, Any]:
    info = {"vcs": "git", "commit_id": commit, "requested_revision": requested or commit}
    return {"url": url, "vcs_info": info}


def archive(url: str, sha256: str = SHA) -> dict[str, Any]:
    return {"url": url, "archive_info": {"hashes": {"sha256": sha256}}}


EDITABLE = {"url": "file:///home/me/src/myproj", "dir_info": {"editable": True}}


def make_prefix(root: Path) -> Path:
    """A conda prefix with python (one conda-meta record) and an empty site-packages."""
    prefix = root / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / SP).mkdir(parents=True)
    record = {"name": "python", "version": "3.9.18", "build": "h0755675_1_cpython",
              "build_number": 1, "channel": "https://conda.anaconda.org/conda-forge",
              "subdir": "linux-64", "depends": [], "files": []}  # fmt: skip
    (prefix / "conda-meta" / "python-3.9.18-h0755675_1_cpython.json").write_text(json.dumps(record))
    return prefix


def add_dist(prefix: Path, name: str, version: str, origin: dict[str, Any] | None) -> Path:
    info = add_dist_info(prefix, name, version)
    if origin is not None:
        (info / "direct_url.json").write_text(json.dumps(origin))
    return info


def export_file(root: Path, *lines: str) -> Path:
    """An export as conda writes one, with pip freeze's lines under ``- pip:``."""
    path = root / "export.yml"
    pip = "".join(f"      - {line}\n" for line in lines)
    path.write_text(
        "name: dl\nchannels:\n  - conda-forge\n  - defaults\ndependencies:\n"
        f"  - python=3.9.18=h0755675_1_cpython\n  - pip:\n{pip}prefix: /x/envs/dl\n"
    )
    return path


def pip_lines(text: str) -> list[str]:
    """The ``- pip:`` list of an export's YAML text."""
    (block,) = [d for d in yaml.safe_load(text)["dependencies"] if isinstance(d, dict)]
    return list(block["pip"])


# ---------------------------------------------------------------- the node's record


def test_direct_url_of_each_origin(tmp_path: Path) -> None:
    def read(doc: Any) -> tuple[str | None, str | None, str | None]:
        (tmp_path / "direct_url.json").write_text(json.dumps(doc))
        return direct_url(str(tmp_path))

    assert read(vcs(C1, requested="v0.3.0")) == (f"git+{REPO_URL}@{C1}", None, f"git:{C1}")
    assert read(archive(WHL)) == (WHL, SHA, None)
    legacy = {"url": WHL, "archive_info": {"hash": f"sha256={SHA}"}}
    assert read(legacy) == (WHL, SHA, None)
    assert read(EDITABLE) == ("file:///home/me/src/myproj", None, None)
    assert read({"url": "file:///src/x", "dir_info": {}}) == ("file:///src/x", None, None)
    # what could not be written back into a requirement line is not reported
    assert read(vcs("abc def")) == (None, None, None)
    assert read(vcs("abc@def")) == (None, None, None)
    assert read({"url": REPO_URL, "vcs_info": {"vcs": "cvs", "commit_id": C1}}) == (None,) * 3
    assert read({"url": "has space", "vcs_info": {"vcs": "git", "commit_id": C1}}) == (None,) * 3
    assert read([1, 2]) == (None, None, None)
    (tmp_path / "direct_url.json").write_text("{not json")
    assert direct_url(str(tmp_path)) == (None, None, None)


def test_the_export_reports_the_commit_as_the_version_never_as_a_hash(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path)
    add_dist(prefix, "vcs-demo", "0.3.0", vcs(C1))
    add_dist(prefix, "tiny-pkg", "0.1.2", archive("file:///w/tiny_pkg-0.1.2-py3-none-any.whl"))
    add_dist(prefix, "myproj", "0.1.0", EDITABLE)
    doc = export_prefix(str(prefix), with_yaml=True)
    by_name = {p["name"]: p for p in doc["packages"]}
    assert by_name["vcs-demo"] == {
        "name": "vcs-demo", "version": f"git:{C1}", "build": "pypi_0", "channel": "pypi",
        "subdir": "pypi", "manager": "pip", "url": f"git+{REPO_URL}@{C1}",
    }  # fmt: skip
    assert by_name["tiny-pkg"]["version"] == "0.1.2" and by_name["tiny-pkg"]["sha256"] == SHA
    assert by_name["myproj"]["version"] == "0.1.0" and "sha256" not in by_name["myproj"]
    assert by_name["myproj"]["url"] == "file:///home/me/src/myproj"
    assert pip_lines(doc["yaml"]) == [  # pip freeze's form for the VCS install, conda's else
        "myproj==0.1.0",
        "tiny-pkg==0.1.2",
        f"vcs-demo @ git+{REPO_URL}@{C1}",
    ]


def test_what_envtool_exports_it_reads_back(tmp_path: Path) -> None:
    prefix = make_prefix(tmp_path)
    add_dist(prefix, "vcs-demo", "0.3.0", vcs(C1))
    add_dist(prefix, "hg-thing", "1.0", {"url": "https://hg.example.org/t", "vcs_info":
                                         {"vcs": "hg", "commit_id": "4f2c9a"}})  # fmt: skip
    add_dist(prefix, "torch", "2.1.0+cu118", archive(WHL))
    add_dist(prefix, "myproj", "0.1.0", EDITABLE)
    add_dist(prefix, "numpy", "1.26.4", None)
    text = export_prefix(str(prefix), with_yaml=True)["yaml"]
    assert "hg-thing @ hg+https://hg.example.org/t@4f2c9a" in pip_lines(text)
    try:  # laid out as conda's own dumper lays out any line (long ones folded)
        from conda_lock._vendor.conda.common.serialize import yaml_safe_dump
    except Exception as exc:
        require(False, f"conda-lock's vendored conda is not importable: {exc!r}")
    assert yaml_safe_dump(yaml.safe_load(text)) == text
    (tmp_path / "export.yml").write_text(text)
    exported = environments.load(str(tmp_path / "export.yml"))
    assert {p.name: p.version for p in exported.packages if p.manager == "pip"} == {
        "hg-thing": "hg:4f2c9a", "myproj": "0.1.0", "numpy": "1.26.4",
        "torch": "2.1.0+cu118", "vcs-demo": f"git:{C1}",
    }  # fmt: skip
    assert packages.diff(exported, environments.load(str(prefix))) == []


# ---------------------------------------------------------------- every form against a prefix

TAGGED = vcs(C1, "https://github.com/org/tagged.git", requested="v1.0")
# fmt: off
FORMS = [  # export line, the prefix's dist (name, version, direct_url.json), the findings
    ("numpy==1.26.4", ("numpy", "1.26.4", None), []),
    ("numpy==1.26.4", ("numpy", "1.26.3", None), [("1.26.4", "1.26.3")]),
    ("legacy-thing===2013b", ("legacy-thing", "2013b", None), []),
    ("tiny-pkg @ file:///w/tiny_pkg-0.1.2-py3-none-any.whl",
     ("tiny-pkg", "0.1.2", archive("file:///w/tiny_pkg-0.1.2-py3-none-any.whl")), []),
    (WHL, ("torch", "2.1.0+cu118", archive(WHL)), []),
    (f"torch @ {WHL}#sha256={'0a' * 32}", ("torch", "2.1.0+cu118", archive(WHL)), ["artifact"]),
    (f"vcs-demo @ git+{REPO_URL}@{C1}", ("vcs-demo", "0.3.0", vcs(C1)), []),
    (f"vcs-demo @ git+{REPO_URL}@{C1}", ("vcs-demo", "0.3.0", vcs(C2)),
     [(f"git:{C1}", f"git:{C2}")]),
    (f"git+{REPO_URL}@{C1}#egg=vcs_demo", ("vcs-demo", "0.3.0", vcs(C1)), []),
    (f"git+{REPO_URL}@{C1}", ("vcs-demo", "0.3.0", vcs(C1)), []),  # named by the repository
    (f"git+{REPO_URL}", ("vcs-demo", "0.3.0", vcs(C1)), [("", f"git:{C1}")]),  # unpinned
    ("git+https://github.com/org/tagged.git@v1.0", ("tagged", "1.0", TAGGED),
     [("git:v1.0", f"git:{C1}")]),  # a tag is not resolved to its commit
    (f"-e git+{REPO_URL}@{C1}#egg=vcs-demo", ("vcs-demo", "0.3.0", vcs(C1)), []),
    (f"-e git+{REPO_URL}@{C1}#egg=myproj", ("myproj", "0.1.0", EDITABLE),
     [(f"git:{C1}", "0.1.0")]),  # an editable folder is reported by its version
    ("-e /home/me/src/myproj", ("myproj", "0.1.0", EDITABLE), [("", "0.1.0")]),
    ("vcs-demo==0.3.0", ("vcs-demo", "0.3.0", vcs(C1)), [("0.3.0", f"git:{C1}")]),
]
# fmt: on


@pytest.mark.parametrize(("line", "dist", "want"), FORMS)
def test_each_form_against_a_prefix(
    tmp_path: Path, line: str, dist: tuple[str, str, dict[str, Any] | None], want: list[Any]
) -> None:
    prefix = make_prefix(tmp_path)
    add_dist(prefix, *dist)
    export, installed = (
        environments.load(str(export_file(tmp_path, line))),
        environments.load(str(prefix)),
    )
    findings = packages.diff(export, installed, where=str(prefix))
    if want == ["artifact"]:
        assert [f.kind for f in findings] == ["artifact-differs"]
        return
    assert [(f.reference.version, f.found.version) for f in findings if f.reference and f.found] \
        == want  # fmt: skip
    assert all(f.kind == "version-differs" and f.subject == dist[0] for f in findings)
    for f, (expected, actual) in zip(findings, want, strict=True):
        assert words(f).expected.endswith(f"=={expected}")
        assert words(f).actual.endswith(f"=={actual}")


def test_diff_on_the_command_line(tmp_path: Path) -> None:
    from envtool.cli import main

    prefix = make_prefix(tmp_path)
    add_dist(prefix, "vcs-demo", "0.3.0", vcs(C2))
    same = export_file(tmp_path, f"vcs-demo @ git+{REPO_URL}@{C2}")
    assert run_main(main, tmp_path, [], ("diff", str(same), str(prefix)))[0] == 0
    other = export_file(tmp_path, f"-e git+{REPO_URL}@{C1}#egg=vcs-demo")
    code, out, _ = run_main(main, tmp_path, [], ("diff", str(other), str(prefix), "--format",
                                                 "json"))  # fmt: skip
    (f,) = json.loads(out)["findings"]
    assert code == 1 and f["kind"] == "version-differs" and f["subject"] == "vcs-demo"
    assert C1 in f["expected"] and C2 in f["actual"]


# ---------------------------------------------------------------- real git, real pip


def _git(repo: Path, *args: str) -> str:
    argv = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180)


def test_a_real_pip_install_from_git(tmp_path: Path) -> None:
    """pip installs a local git repository at a tag: its direct_url.json, our export line and
    ``pip freeze``'s line agree, and the export diffs clean against the prefix."""
    require(subprocess.run(["git", "--version"], capture_output=True).returncode == 0, "no git")
    repo = tmp_path / "repo"
    (repo / "vcs_demo").mkdir(parents=True)
    (repo / "vcs_demo" / "__init__.py").write_text("")
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "vcs-demo"\nversion = "0.3.0"\n'
    )
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "first")
    _git(repo, "tag", "v0.3.0")
    first = _git(repo, "rev-parse", "HEAD").strip()
    prefix = make_prefix(tmp_path)
    site = prefix / SP
    install = ("install", "--no-deps", "--no-index", "--no-build-isolation", "--quiet",
               "--target", str(site), f"git+{repo.as_uri()}@v0.3.0")  # fmt: skip
    proc = _pip(*install)
    require(proc.returncode == 0, f"pip cannot build from git here: {proc.stderr[-300:]}")
    info = json.loads(
        next(site.glob("vcs_demo-*.dist-info")).joinpath("direct_url.json").read_text()
    )
    assert info["vcs_info"]["commit_id"] == first
    freeze = _pip("freeze", "--path", str(site)).stdout.splitlines()
    assert freeze == [f"vcs-demo @ git+{repo.as_uri()}@{first}"]
    text = export_prefix(str(prefix), with_yaml=True)["yaml"]
    assert pip_lines(text) == freeze  # (a long line is folded, as conda's ruamel folds it)
    installed = environments.load(str(prefix))
    assert packages.diff(environments.load(str(export_file(tmp_path, *freeze))), installed) == []
    _git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    second = _git(repo, "rev-parse", "HEAD").strip()
    newer = export_file(tmp_path, f"vcs-demo @ git+{repo.as_uri()}@{second}")
    (f,) = packages.diff(environments.load(str(newer)), installed)
    assert f.kind == "version-differs" and words(f).expected.endswith(second)
    assert words(f).actual.endswith(first)
