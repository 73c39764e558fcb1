"""One real sshd node reached under two names (two ``Host`` entries of the ssh_config for one
address and port) is one machine: one ``same-machine`` finding names both, and the summary
counts it once; a second node (its own hostname) stays a machine of its own (issue 24 L3)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import require, run_main
from fixtures import sshnodes

from envtool.cli import main


def _verify(root: Path, config: Path, prefix: Path, *extra: str) -> tuple[int, str, str]:
    argv = ("verify", "--hosts", "node1,node1-alias,node2", "-F", str(config), "--no-lock",
            "--prefix", str(prefix), "--min-gpus", "0", "--timeout", "60", *extra)  # fmt: skip
    return run_main(main, root, [], argv)


def test_one_node_under_two_names_is_one_machine(runtime_prefix: Path, tmp_path: Path) -> None:
    require(sshnodes.available(), "OpenSSH sshd is not installed (apt-get install openssh-server)")
    cluster = sshnodes.start_cluster(tmp_path / "ssh", [{}, {}])
    try:
        node1 = cluster.nodes[0]
        alias = f"Host node1-alias\n  HostName {node1.address}\n  Port {node1.port}\n"
        cluster.ssh_config.write_text(alias + cluster.ssh_config.read_text())
        code, out, err = _verify(tmp_path, cluster.ssh_config, runtime_prefix, "--format", "json")
        text_code, text, _ = _verify(tmp_path, cluster.ssh_config, runtime_prefix)
    finally:
        cluster.stop()
    assert code == 1 and text_code == 1, out + err
    doc = json.loads(out)
    named = {h["host"]: h["facts"]["hostname"] for h in doc["hosts"]}
    assert named == {"node1": "node1", "node1-alias": "node1", "node2": "node2"}
    same = [f for f in doc["findings"] if f["kind"] == "same-machine"]
    assert len(same) == 1, doc["findings"]
    assert same[0]["hosts"] == ["node1", "node1-alias"] and same[0]["severity"] == "error"
    assert "node1, node1-alias: one machine (hostname node1," in same[0]["actual"]
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    assert errors == same, errors  # the two names' answers agree: nothing else to report
    lines = text.splitlines()
    assert lines[0].startswith("1 of 2 hosts (3 names) fails: node1 = node1-alias ("), text
    assert lines[1].startswith("2 hosts (3 names), 3 answered"), text
    assert "list each machine once in --hosts" in text
