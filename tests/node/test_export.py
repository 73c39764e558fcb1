"""``envtool_node.export``: ``conda env export`` byte for byte, checked against conda itself.

The oracle is conda 24.7 as vendored by conda-lock (``from_environment(...).to_yaml()``),
run on prefixes that py-rattler really installed from a local channel.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, require
from fixtures.channel import Pkg, build_channel, realistic_packages
from fixtures.prefixes import SP, add_dist_info, add_egg_info, install_prefix

import envtool_node.export as probe
from envtool_node.site_packages import _simple_headers
from envtool_node.yaml_emit import render_yaml

SPECS = ["python 3.9.*", "pytorch=*=cuda118*", "pip", "numpy"]


@pytest.fixture(scope="module")
def oracle() -> Callable[..., str]:
    """conda's own ``conda env export`` text for a prefix (in-process, cache cleared)."""
    try:
        from conda_lock._vendor.conda.core.prefix_data import PrefixData
        from conda_lock._vendor.conda.env.env import from_environment
    except Exception as exc:
        require(False, f"conda-lock's vendored conda is not importable: {exc!r}")
        raise

    def export(prefix: Path, name: str | None = None, **kw: Any) -> str:
        PrefixData._cache_.clear()
        text: str = from_environment(name or str(prefix), str(prefix), **kw).to_yaml()
        return text

    return export


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    extra = [
        Pkg(
            "tzdata",
            "2024a",
            "h0c530f3_0",
            subdir="noarch",
            noarch="generic",
            files={"share/zoneinfo/UTC": b"TZif"},
        ),
        # a conda package that ships a .dist-info without depending on python
        Pkg(
            "attrs-blob",
            "1.0",
            "0",
            files={
                f"{SP}/attrs_blob-1.0.dist-info/RECORD": b"",
                f"{SP}/attrs_blob-1.0.dist-info/METADATA": b"Name: attrs-blob\nVersion: 1.0\n",
            },
        ),
    ]
    return build_channel(tmp_path_factory.mktemp("channel"), realistic_packages() + extra)


@pytest.fixture(scope="module")
def base_prefix(channel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(importlib.util.find_spec("rattler") is not None, "py-rattler is not installed")
    root = tmp_path_factory.mktemp("base")
    return install_prefix(channel, [*SPECS, "tzdata"], root / "env", root / "cache")


@pytest.fixture
def prefix(base_prefix: Path, tmp_path: Path) -> Path:
    """A private copy of the installed prefix, free to edit."""
    dest = tmp_path / "env"
    shutil.copytree(base_prefix, dest, symlinks=True)
    return dest


def run_probe(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-B", "-m", "envtool_node.export", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO)


def assert_same(prefix: Path, oracle: Callable[..., str], *flags: str, **kw: Any) -> str:
    """The probe's YAML (subprocess and in-process) equals conda's, byte for byte."""
    proc = run_probe("--prefix", str(prefix), "--name", str(prefix), *flags)
    assert proc.returncode == 0, proc.stderr
    inproc = probe.export_prefix(
        str(prefix), str(prefix), no_builds="--no-builds" in flags, with_yaml=True
    )
    want = oracle(prefix, **kw)
    assert proc.stdout == want
    assert inproc["yaml"] == want
    return want


def _edit_meta(prefix: Path, name: str, **changes: Any) -> None:
    path = next((prefix / "conda-meta").glob(f"{name}-*.json"))
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


# ---------------------------------------------------------------- byte-identical exports


def test_plain_prefix_without_pip_packages(prefix: Path, oracle: Callable[..., str]) -> None:
    text = assert_same(prefix, oracle)
    assert "- pip:" not in text and "pytorch=2.1.0=cuda118" in text


def test_no_builds(prefix: Path, oracle: Callable[..., str]) -> None:
    text = assert_same(prefix, oracle, "--no-builds", no_builds=True)
    assert "  - numpy=1.26.4\n" in text


def test_pip_packages_dist_info_and_egg_info(prefix: Path, oracle: Callable[..., str]) -> None:
    add_dist_info(
        prefix, "Requests", "2.31.0", requires=["idna>=2.5", 'pywin32; sys_platform == "win32"']
    )
    add_dist_info(prefix, "zope.interface", "6.1")
    add_dist_info(prefix, "Typing_Extensions", "4.9.0")
    add_dist_info(prefix, "graphviz", "0.20")
    add_dist_info(prefix, "no-record", "1.0", record=False)  # conda needs RECORD to see it
    add_egg_info(prefix, "legacy-egg", "0.3")
    add_egg_info(prefix, "single-file-egg", "0.4", as_file=True)
    text = assert_same(prefix, oracle)
    assert "  - pip:\n      - graphviz" not in text  # renamed python-graphviz, sorted
    assert "      - python-graphviz==0.20\n" in text
    assert "      - zope-interface==6.1\n" in text and "no-record" not in text
    assert "      - legacy-egg==0.3\n" in text and "      - single-file-egg==0.4\n" in text


def test_real_pip_install_target(prefix: Path, oracle: Callable[..., str], tmp_path: Path) -> None:
    from fixtures.wheels import make_wheel

    wheel = make_wheel(tmp_path / "wheels", "tiny-pkg", "0.1.2")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
            str(prefix / SP),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    require(proc.returncode == 0, f"pip install --target failed: {proc.stderr[-300:]}")
    assert "      - tiny-pkg==0.1.2\n" in assert_same(prefix, oracle)


def test_channel_with_and_without_subdir(prefix: Path, oracle: Callable[..., str]) -> None:
    _edit_meta(prefix, "numpy", channel="https://conda.anaconda.org/conda-forge/linux-64")
    _edit_meta(prefix, "nccl", channel="https://conda.anaconda.org/nvidia")
    _edit_meta(prefix, "tzdata", channel="https://repo.anaconda.com/pkgs/main/noarch")
    _edit_meta(prefix, "cudatoolkit", channel=None)  # conda falls back to the url
    _edit_meta(prefix, "python_abi", channel="conda-forge")
    text = assert_same(prefix, oracle)
    assert text.index("  - conda-forge\n") < text.index("  - nvidia\n")  # last inserted first
    assert text.count("  - defaults\n") == 1


def test_conda_package_with_dist_info_but_no_python_dependency(
    channel: Path, oracle: Callable[..., str], tmp_path: Path
) -> None:
    prefix = install_prefix(
        channel, ["python 3.9.*", "attrs-blob"], tmp_path / "env", tmp_path / "c"
    )
    text = assert_same(prefix, oracle)
    assert "  - attrs-blob=1.0=0\n" not in text  # conda sees a pip package of the same name
    assert "      - attrs-blob==1.0\n" in text


def test_clobbered_conda_python_package_is_dropped(
    prefix: Path, oracle: Callable[..., str]
) -> None:
    shutil.rmtree(prefix / SP / "numpy-1.26.4.dist-info")
    add_dist_info(prefix, "numpy", "1.26.0")  # e.g. pip install --force over conda's numpy
    text = assert_same(prefix, oracle)  # (conda then deletes numpy's conda-meta file)
    assert "numpy=1.26.4" not in text and "      - numpy==1.26.0\n" in text


def test_env_vars_and_odd_names(prefix: Path, oracle: Callable[..., str], tmp_path: Path) -> None:
    state = {
        "env_vars": {
            "OMP_NUM_THREADS": "8",
            "FLAG": "yes",
            "EMPTY": "",
            "GONE": "***unset***",
            "PATHS": "a: b #c",
            "LONG": "x " * 60,
        }
    }
    (prefix / "conda-meta" / "state").write_text(json.dumps(state))
    long_prefix = tmp_path / ("deep-" * 18) / "env"
    long_prefix.parent.mkdir(parents=True)
    shutil.move(str(prefix), long_prefix)
    text = assert_same(long_prefix, oracle)
    assert "variables:\n" in text and "GONE" not in text


def test_empty_prefix(tmp_path: Path, oracle: Callable[..., str]) -> None:
    (tmp_path / "conda-meta").mkdir()
    assert (
        assert_same(tmp_path, oracle)
        == f"name: {tmp_path}\nchannels:\n  - defaults\nprefix: {tmp_path}\n"
    )


def test_malformed_record_name_is_ignored(prefix: Path, oracle: Callable[..., str]) -> None:
    src = next((prefix / "conda-meta").glob("nccl-*.json"))
    src.rename(src.with_name("nccl-wrong-name.json"))
    proc = run_probe("--prefix", str(prefix), "--name", str(prefix))
    assert "nccl" not in proc.stdout and "malformed" in proc.stderr
    assert proc.stdout == oracle(prefix)


def test_a_record_conda_ignores_is_listed_in_the_document(prefix: Path) -> None:
    """A version holding '-' (no conda version) makes a file name conda cannot split: the YAML
    leaves it out as conda does, the document names the file and why (never an absence)."""
    src = next((prefix / "conda-meta").glob("nccl-*.json"))
    record = json.loads(src.read_text())
    record["version"] = "2.18-3"
    bad = src.with_name(f"nccl-2.18-3-{record['build']}.json")
    bad.write_text(json.dumps(record))
    src.unlink()
    doc = probe.export_prefix(str(prefix), with_yaml=True)
    assert "nccl" not in doc["yaml"] and "nccl" not in {p["name"] for p in doc["packages"]}
    (item,) = doc["unreadable"]
    assert item["path"] == str(bad) and item["name"] == "nccl"
    assert "'2.18-3' is no conda version" in item["why"]


def test_json_format(prefix: Path) -> None:
    add_dist_info(prefix, "tiny", "1.0")
    proc = run_probe("--prefix", str(prefix), "--format", "json")
    assert proc.returncode == 0
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "envtool.export/1" and doc["prefix"] == str(prefix)
    by_name = {p["name"]: p for p in doc["packages"]}
    assert by_name["tiny"]["manager"] == "pip" and by_name["tiny"]["channel"] == "pypi"
    numpy = by_name["numpy"]
    assert numpy["manager"] == "conda" and numpy["subdir"] == "linux-64"
    assert (
        numpy["url"].endswith(".tar.bz2") and len(numpy["md5"]) == 32 and len(numpy["sha256"]) == 64
    )
    assert doc["yaml"] == probe.export_prefix(str(prefix), with_yaml=True)["yaml"]


# ---------------------------------------------------------------- bad inputs


def _assert_one_line_error(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


def test_missing_prefix(tmp_path: Path) -> None:
    _assert_one_line_error(run_probe("--prefix", str(tmp_path / "nope")), str(tmp_path / "nope"))


def test_truncated_conda_meta_json(prefix: Path) -> None:
    path = next((prefix / "conda-meta").glob("numpy-*.json"))
    path.write_text(path.read_text()[:50])
    _assert_one_line_error(run_probe("--prefix", str(prefix)), str(path))


def test_record_without_version(prefix: Path) -> None:
    _edit_meta(prefix, "numpy", version=None)
    _assert_one_line_error(run_probe("--prefix", str(prefix)), "numpy-1.26.4-py39h474f0d3_0.json")


def test_non_utf8_metadata_fails_like_conda(prefix: Path, oracle: Callable[..., str]) -> None:
    info = add_dist_info(
        prefix, "latin", "1.0", metadata=b"Name: latin\nVersion: 1.0\nSummary: caf\xe9\n"
    )
    _assert_one_line_error(run_probe("--prefix", str(prefix)), str(info / "METADATA"))
    with pytest.raises(UnicodeDecodeError):  # conda itself cannot export this prefix
        oracle(prefix)


def test_yaml_emitter_matches_ruamel_on_random_documents() -> None:
    import random

    from conda_lock._vendor.conda.common.serialize import yaml_safe_dump

    pieces = [*list("ab:#'\"-?[]{}!&*|>%@`,=~ \t\n\\é"), "\u2028", "\x85", "\ufeff", "😀"]
    specials = [
        "",
        "null",
        "true",
        "yes",
        "1",
        "1.0",
        "0x1F",
        "2024-01-01",
        "- a",
        "a: b",
        "---",
        "=",
        "~",
    ]
    rng = random.Random(7)

    def text() -> str:
        if rng.random() < 0.25:
            return rng.choice(specials)
        if rng.random() < 0.4:
            return " ".join("w" * rng.randint(1, 30) for _ in range(rng.randint(1, 15)))
        return "".join(rng.choice(pieces) for _ in range(rng.choice([1, 3, 40, 90, 130])))

    for _ in range(400):
        env: dict[str, Any] = {
            "name": text(),
            "channels": [text(), "defaults"],
            "dependencies": [text(), {"pip": [text(), text()]}],
            "variables": {text(): text(), "K" * rng.randint(100, 130): text()},
            "prefix": text(),
        }
        assert render_yaml(env) == yaml_safe_dump(env), env


def test_egg_link_hides_a_conda_package_of_that_name(
    prefix: Path, oracle: Callable[..., str], tmp_path: Path
) -> None:
    src = tmp_path / "src"
    (src / "numpy.egg-info").mkdir(parents=True)
    (src / "numpy.egg-info" / "PKG-INFO").write_text("Name: numpy\nVersion: 9.9.dev0\n")
    (prefix / SP / "numpy.egg-link").write_text(f"{src}\n.\n")
    text = assert_same(prefix, oracle)
    assert "numpy" not in text  # conda drops develop installs and the conda record they shadow


def test_metadata_fast_path_reads_headers_like_email_parser() -> None:
    import random
    from email.parser import HeaderParser

    parts = ["Name", "Version", "From ", " ", "\t", ":", ": ", "x", "1.0", "\n", "\n\n", "é", "#"]
    rng = random.Random(3)
    for _ in range(3000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 25)))
        fast = _simple_headers(text)
        if fast is not None:
            assert fast == list(HeaderParser().parsestr(text, headersonly=True).items()), text


def _limited() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))  # an unbounded read dies


def test_a_conda_meta_record_that_is_dev_zero_is_refused(prefix: Path) -> None:
    # it was read whole: on a node (and on the controller, in-process) until memory ran out
    path = next((prefix / "conda-meta").glob("numpy-*.json"))
    path.unlink()
    path.symlink_to("/dev/zero")
    argv = [sys.executable, "-B", "-m", "envtool_node.export", "--prefix", str(prefix)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=REPO,
                          preexec_fn=_limited, check=False)  # fmt: skip
    _assert_one_line_error(proc, f"{path}: not a regular file")


def test_a_conda_meta_record_larger_than_the_bound_is_refused(prefix: Path) -> None:
    from envtool_node.conda_meta import MAX_RECORD, ExportError

    path = next((prefix / "conda-meta").glob("numpy-*.json"))
    with path.open("r+b") as fh:
        fh.truncate(MAX_RECORD + 1)  # sparse: nothing to write, as much to read
    with pytest.raises(ExportError, match=f"{path} is larger than {MAX_RECORD} bytes"):
        probe.export_prefix(str(prefix))
