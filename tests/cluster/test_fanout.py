"""Faults on real sshd nodes: each faulty host gets its own finding, the healthy ones are
complete, the run ends within the per-host deadline, and nothing is left on the nodes."""

from __future__ import annotations

import glob
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import require, run_main
from fixtures import faulty, sshnodes

from envtool.cli import main

TIMEOUT, CONNECT = 15, 2  # a healthy node's torch import must fit, also beside another test
DEADLINE = (
    TIMEOUT + CONNECT + 5
)  # cluster/fanout.py: per-host deadline = timeout + connect + 5 s grace


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[faulty.FaultyLab]:
    require(sshnodes.available(), "OpenSSH sshd is not installed (apt-get install openssh-server)")
    lab = faulty.build(tmp_path_factory.mktemp("faults"))
    try:
        yield lab
    finally:
        lab.cluster.stop()


def _tmp_dirs(lab: faulty.FaultyLab) -> set[str]:
    """The run folders in the nodes' TMPDIR (their own: other tests' runs are elsewhere)."""
    return set(glob.glob(os.path.join(lab.node_tmp, "envtool.*")))


def test_every_fault_is_named_and_bounded(lab: faulty.FaultyLab, tmp_path: Path) -> None:
    before = _tmp_dirs(lab)
    start = time.monotonic()
    code, out, err = run_main(
        main,
        tmp_path,
        [],
        (
            "verify",
            "--no-lock",
            "--hosts",
            str(lab.hosts_file),
            "-F",
            str(lab.cluster.ssh_config),
            "--timeout",
            str(TIMEOUT),
            "--connect-timeout",
            str(CONNECT),
            "--min-gpus",
            "0",
            "--format",
            "json",
        ),
    )
    elapsed = time.monotonic() - start
    assert code == 1, err
    assert elapsed <= DEADLINE + 1, f"{elapsed:.1f} s"
    doc = json.loads(out)
    hosts = {h["host"]: h for h in doc["hosts"]}
    for name in lab.healthy:
        assert (
            hosts[name]["ok"]
            and hosts[name]["packages"] == lab.packages
            and not hosts[name]["problems"]
        ), hosts[name]
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    for host, fault in lab.faults.items():
        mine = [f for f in errors if host in f["hosts"]]
        assert mine, f"{host} ({fault}) has no finding"
        assert all(f["hosts"] == [host] for f in mine), f"{fault} folded with another host"
    assert not any(h in lab.healthy for f in errors for h in f["hosts"])
    time.sleep(0.5)
    assert _tmp_dirs(lab) <= before  # no bundle directory left on any node
