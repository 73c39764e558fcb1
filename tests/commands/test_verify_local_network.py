"""The network and limits parts over ``--transport local`` (issue 28 item 5: verify on every
transport): this machine's own interfaces and /dev/shm, read by the node package as on any
node, judged and carried into the JSON report and JUnit. The node's python is this one,
linked into an empty prefix: no torch import, under a second."""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from conftest import require, run_main

from envtool.cli import main


def _prefix(tmp_path: Path) -> Path:
    prefix = tmp_path / "env"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").symlink_to(sys.executable)
    return prefix


def _verify(tmp_path: Path, policy: str, *extra: str) -> tuple[int, dict[str, Any], str]:
    (tmp_path / "policy.yml").write_text(policy)
    argv = ("verify", "--transport", "local", "--hosts", "localhost", "--no-lock",
            "--prefix", str(_prefix(tmp_path)), "--min-gpus", "0", "--format", "json",
            "--policy", str(tmp_path / "policy.yml"), *extra)  # fmt: skip
    code, out, err = run_main(main, tmp_path, [], argv)
    assert out, err
    return code, json.loads(out), err


def _ours(doc: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    kinds = ("socket-ifname-unmatched", "shm-small", "nofile-low", "mtu-differs")
    return sorted((f["kind"], f["subject"], f["hosts"]) for f in doc["findings"]
                  if f["kind"] in kinds)  # fmt: skip


def test_an_interface_variable_and_a_small_shm_are_judged_on_the_local_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require(os.path.isdir("/dev/shm"), "no /dev/shm on this machine")
    shm = os.statvfs("/dev/shm")
    bigger = shm.f_blocks * shm.f_frsize + 2**20  # the policy asks 1 MiB more than it has
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth9")  # the local node inherits it
    junit = tmp_path / "junit.xml"
    code, doc, _ = _verify(tmp_path, f"limits:\n  shm_min: {bigger}\n  nofile_min: 1\n",
                           "--junit", str(junit))  # fmt: skip
    assert code == 1
    assert _ours(doc) == [
        ("shm-small", "/dev/shm", ["localhost"]),
        ("socket-ifname-unmatched", "NCCL_SOCKET_IFNAME", ["localhost"]),
    ]
    (unmatched,) = [f for f in doc["findings"] if f["kind"] == "socket-ifname-unmatched"]
    assert "eth9" in unmatched["expected"]
    host = doc["hosts"][0]
    assert host["network"]["schema"] == "envtool.network/1"
    assert (host["network"]["nccl"]["value"], host["network"]["nccl"]["selected"]) == ("eth9", [])
    assert host["limits"]["shm_bytes"] == bigger - 2**20
    offset, bound = host["clock_offset"]
    assert bound >= 0 and abs(offset) <= bound + 1.0  # the same clock, within the round trip
    assert doc["unchecked"] == []  # one host: no rendezvous to leave unchecked
    cases = {c.get("name"): c for c in ET.parse(junit).iter("testcase")}
    for check, kind in (("network", "socket-ifname-unmatched"), ("limits", "shm-small")):
        failure = cases[check].find("failure")
        assert failure is not None and failure.get("type") == kind, check


def test_the_same_node_without_them_says_nothing_of_either(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    _, doc, _ = _verify(tmp_path, "limits:\n  shm_min: 1\n  nofile_min: 1\n")
    assert _ours(doc) == []
    host = doc["hosts"][0]
    assert host["network"]["nccl"]["how"] == "default" and host["limits"] is not None


def test_explain_joins_a_failed_jobs_log_with_this_nodes_verify_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 34 item 4: a job log (synthetic: a rank on localhost died of SIGBUS, its file
    says nothing of /dev/shm) is not established alone; joined with the real verify report of
    the node it ran on (its /dev/shm below the policy's), shm-small is named as the cause,
    from the report, and the node's other finding is shown beside it."""
    require(os.path.isdir("/dev/shm"), "no /dev/shm on this machine")
    shm = os.statvfs("/dev/shm")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth9")
    policy = f"limits:\n  shm_min: {shm.f_blocks * shm.f_frsize + 2**20}\n  nofile_min: 1\n"
    _, doc, _ = _verify(tmp_path, policy)
    report = tmp_path / "verify.json"
    report.write_text(json.dumps(doc))
    log = tmp_path / "job.log"
    log.write_text(
        "localhost:4100:4100 [0] NCCL INFO NCCL version 2.19.3+cuda11.8\n"
        "localhost:4100:4100 [0] NCCL INFO comm 0x55d0 rank 0 nranks 2 - Init COMPLETE\n"
        "[rank0]: localhost: Fatal Python error: Bus error\n"
    )
    code, out, err = run_main(main, tmp_path, [], ("explain", str(log)))
    assert code == 4, out + err  # alone: a SIGBUS whose file does not say /dev/shm
    code, out, err = run_main(main, tmp_path, [], ("explain", str(log), "--report", str(report),
                                                   "--format", "json"))  # fmt: skip
    assert code == 1, out + err
    got = json.loads(out)
    assert got["status"] == "cause"
    assert got["verdict"].startswith("cause: shm-small on localhost (from verify.json)")
    roles = [(j["role"], j["finding"]["kind"]) for j in got["joined"]]
    assert roles[0] == ("cause", "shm-small") and ("beside", "socket-ifname-unmatched") in roles
    # --hosts: the same verify run now, by explain itself
    argv = ("explain", str(log), "--hosts", "localhost", "--transport", "local", "--prefix",
            str(tmp_path / "env"), "--policy", str(tmp_path / "policy.yml"))  # fmt: skip
    code, out, err = run_main(main, tmp_path, [], argv)
    assert code == 1, out + err
    assert out.startswith("cause: shm-small on localhost (from verify --hosts localhost)"), out
