"""The limits under the environment (issue 28 item 4) end to end: three namespaced sshd nodes
(tests/fixtures/netns.py), node2 with a private 64 MiB tmpfs on /dev/shm (its own mount
namespace) and node3 under ``ulimit -n 256`` (its sshd's, which its sessions inherit): each is
named on its own node, node1 says nothing. The docker transport (Docker's default /dev/shm of
64 MiB is shm-small, a container given --shm-size=2g is not) is checked on the image
tests/commands/test_build.py builds, with its engine. Clock skew cannot be
made here without changing the system clock: tests/judge/test_limit_checks.py shifts the
node's time in its answer instead."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import RuntimeLab as Rig
from conftest import runtime_lab

from envtool.judge.kinds import Check
from envtool.judge.rules_network import NETWORK_RULES

LIMITS = {k.value for k, rule in NETWORK_RULES.items() if rule.check is Check.LIMITS}
SETUP = {2: "mount -t tmpfs -o size=64m tmpfs /dev/shm", 3: "ulimit -n 256"}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory, python_channel: Path) -> Iterator[Rig]:
    """One lab for the module: three nodes whose sessions find a prefix with this torch."""
    with runtime_lab(tmp_path_factory.mktemp("limits"), python_channel, SETUP) as rig:
        yield rig


def _limits(findings: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return sorted((f["kind"], f["severity"], f["hosts"], " ".join(str(f["actual"]).split()))
                  for f in findings if f["kind"] in LIMITS)  # fmt: skip


def test_each_limit_is_named_on_its_own_node(rig: Rig) -> None:
    code, out, err = rig.project.run(
        "verify", "--hosts", "node[1-3]", "-F", str(rig.lab.cluster.ssh_config),
        "--min-gpus", "0", "--format", "json", "--timeout", "60",
    )  # fmt: skip
    assert out, err
    findings = json.loads(out)["findings"]
    assert _limits(findings) == [
        ("nofile-low", "warning", ["node3"], "256 (hard 256)"),
        ("shm-small", "error", ["node2"], "64 MiB"),
    ]
    assert code == 1  # the /dev/shm error


def test_the_table_names_the_fix(rig: Rig) -> None:
    code, out, _ = rig.project.run(
        "verify", "--hosts", "node[1-2]", "-F", str(rig.lab.cluster.ssh_config),
        "--min-gpus", "0", "--timeout", "60",
    )  # fmt: skip
    text = " ".join(out.split())
    assert code == 1 and "shm-small" in text and "--shm-size=8g" in text, text[-3000:]
