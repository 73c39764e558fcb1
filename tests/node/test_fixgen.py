"""``envtool_node.fixgen``, what a node without envtool runs (the standard library alone), on
prefixes whose conda-meta records are written here, with installers that are small sh
scripts standing in for micromamba (one that fails, one that makes a prefix that is not the
lock, one that lays down exactly the lock's records). Its answer is read by envtool's own
strict fix-node/1 reader; what it refuses is refused before anything is made; what fails is
removed and ``P`` is left as it was. The real ssh run (micromamba's double installing from
the tests' channel) is tests/fix/test_fix_ssh.py."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from envtool.protocol import fix_record
from envtool_node import fixgen
from envtool_node.generations import PENDING

H1, H2 = "a" * 64, "b" * 64


def _pkg(name: str, version: str, build: str, sha: str = H1) -> dict[str, str]:
    return {"name": name, "version": version, "build": build, "manager": "conda",
            "md5": "", "sha256": sha}  # fmt: skip


def _records(prefix: Path, pkgs: list[dict[str, str]]) -> Path:
    meta = prefix / "conda-meta"
    meta.mkdir(parents=True)
    for p in pkgs:
        rec = {**p, "build_number": 0, "channel": "https://conda.anaconda.org/conda-forge",
               "subdir": "linux-64", "files": []}  # fmt: skip
        (meta / f"{p['name']}-{p['version']}-{p['build']}.json").write_text(json.dumps(rec))
    return prefix


WANTED = [_pkg("nccl", "2.18.3.1", "h12f7317_0"), _pkg("zlib", "1.3", "h0", H2)]


def _payload(folder: Path, wanted: list[dict[str, str]], **meta: object) -> Path:
    folder.mkdir()
    doc = {"lock_sha256": "c" * 64, "lock": "conda-lock.yml", "platform": "linux-64",
           "envtool": "0.1.0", "installed": "2026-12-03T00:00:00Z", "credentials": False,
           "mirrored": False, "packages": wanted, **meta}  # fmt: skip
    (folder / "wanted.json").write_text(json.dumps(doc))
    (folder / "explicit.txt").write_text("@EXPLICIT\n")
    return folder


def _installer(tmp_path: Path, body: str) -> Path:
    exe = tmp_path / "micromamba"
    exe.write_text(f'#!/bin/sh\n# create -y -q -p TARGET --file LIST\nt="$5"\n{body}\n')
    exe.chmod(0o755)
    return exe


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, fix_record.FixRecord]:
    code = fixgen.main(list(argv))
    return code, fix_record.loads(capsys.readouterr().out.strip(), "node")


@pytest.fixture
def drifted(tmp_path: Path) -> Path:
    """nccl older than the lock's, zlib missing, an extra package the lock does not hold."""
    return _records(tmp_path / "env", [_pkg("nccl", "2.16.5.1", "h0800d71_0"),
                                       _pkg("extra", "1.0", "h0")])  # fmt: skip


def test_the_plan_is_read_by_envtools_own_reader(
    drifted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = _payload(tmp_path / "d", WANTED)
    code, rec = _run(capsys, "--prefix", str(drifted), "--dir", str(d), "--installer", "mm")
    assert code == 0 and rec.error == "" and not rec.applied
    assert [(c.action, c.name, c.before, c.after) for c in rec.changes] == [
        ("remove", "extra", "extra=1.0=h0", ""),
        ("replace", "nccl", "nccl=2.16.5.1=h0800d71_0", "nccl=2.18.3.1=h12f7317_0"),
        ("add", "zlib", "", "zlib=1.3=h0"),
    ]


def test_a_record_whose_sha256_is_not_the_locks_is_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = _records(tmp_path / "env", [WANTED[0], _pkg("zlib", "1.3", "h0", H1)])
    d = _payload(tmp_path / "d", WANTED)
    _, rec = _run(capsys, "--prefix", str(prefix), "--dir", str(d), "--installer", "mm")
    assert [(c.action, c.name) for c in rec.changes] == [("replace", "zlib")]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            'echo "critical libmamba Download error (28) Timeout was reached" >&2; exit 3',
            "micromamba failed (exit 3): critical libmamba Download error",
        ),
        ('mkdir -p "$t/conda-meta"', "the new generation is not the lock (nccl, zlib)"),
    ],
    ids=["installer fails", "not the lock"],
)
def test_a_failed_generation_is_removed_and_p_is_as_it_was(
    drifted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, said: str
) -> None:
    d = _payload(tmp_path / "d", WANTED)
    exe = _installer(tmp_path, body)
    before = sorted(p.name for p in (drifted / "conda-meta").iterdir())
    code, rec = _run(capsys, "--prefix", str(drifted), "--dir", str(d), "--installer",
                     str(exe), "--apply")  # fmt: skip
    assert code == 1 and said in rec.error and not rec.applied
    assert not drifted.is_symlink()
    assert sorted(p.name for p in (drifted / "conda-meta").iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "env", "micromamba"]


@pytest.mark.parametrize(
    ("wanted", "meta", "said"),
    [
        (
            [*WANTED, {**_pkg("torch", "2.3.0", ""), "manager": "pip"}],
            {},
            "the lock holds 1 pip packages",
        ),
        (WANTED, {"credentials": True}, "the lock's channel takes a credential"),
        (WANTED, {"mirrored": True}, "--channel-mirror is applied by envtool's installer"),
    ],
    ids=["pip", "credentials", "mirror"],
)
def test_what_an_explicit_list_cannot_do_is_refused_before_anything_is_made(
    drifted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    wanted: list[dict[str, str]], meta: dict[str, object], said: str,
) -> None:  # fmt: skip
    d = _payload(tmp_path / "d", wanted, **meta)
    exe = _installer(tmp_path, 'touch "$t.ran"')
    code, rec = _run(capsys, "--prefix", str(drifted), "--dir", str(d), "--installer",
                     str(exe), "--apply")  # fmt: skip
    assert code == 1 and said in rec.error and "put envtool on the node" in rec.error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "env", "micromamba"]


def test_a_fix_removes_what_a_killed_install_left_switches_and_rolls_back(
    drifted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A generation without a stamp (an installer killed mid-install) is removed first; the
    installer's prefix is stamped, checked and exchanged into place; --rollback puts the
    directory back."""
    template = _records(tmp_path / "template", WANTED)
    left = _records(tmp_path / "env.envtool-gen-1", WANTED[:1])  # no stamp: never finished
    d = _payload(tmp_path / "d", WANTED)
    exe = _installer(tmp_path, f'cp -r {template} "$t"')
    code, rec = _run(capsys, "--prefix", str(drifted), "--dir", str(d), "--installer",
                     str(exe), "--apply")  # fmt: skip
    assert code == 0 and rec.error == "", rec
    assert rec.applied and rec.generation == "env.envtool-gen-1" and rec.switch == "exchange"
    assert rec.removed == ("env.envtool-gen-1",) and rec.stamp == "c" * 64
    assert "installed by micromamba from the lock's URLs" in rec.source
    assert os.readlink(drifted) == "env.envtool-gen-1" and not (left / PENDING).exists()
    assert (tmp_path / "env.envtool-gen-0" / "conda-meta" / "extra-1.0-h0.json").is_file()
    assert not list(tmp_path.glob(".env.envtool-fix.lock"))  # the fix's lock file is gone
    code, rec = _run(capsys, "--prefix", str(drifted), "--dir", str(d), "--installer",
                     str(exe), "--rollback")  # fmt: skip
    assert code == 0 and rec.generation == "env" and not drifted.is_symlink()
    shutil.rmtree(template)


def test_a_prefix_that_is_not_an_environment_is_an_answer_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "env").mkdir()
    d = _payload(tmp_path / "d", WANTED)
    code, rec = _run(capsys, "--prefix", str(tmp_path / "env"), "--dir", str(d),
                     "--installer", "mm")  # fmt: skip
    assert code == 1 and "not a conda environment (no conda-meta/)" in rec.error
