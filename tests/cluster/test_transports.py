"""cluster/transports.py: the argv each transport runs (docker run, docker exec, ssh)."""

from __future__ import annotations

import pytest

from envtool.cluster import hosts, transports
from envtool.cluster.options import FanoutOptions


def test_docker_transport_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    host = hosts.Host("image")
    options = FanoutOptions(transport="docker", docker_target="lab/ddp:1", docker_run=True)
    monkeypatch.setattr(transports, "host_has_nvidia_gpus", lambda: False)
    argv = transports.argv_for(host, options)
    assert argv[:6] == ["docker", "run", "--rm", "-i", "--network", "none"]
    assert "--gpus" not in argv
    monkeypatch.setattr(transports, "host_has_nvidia_gpus", lambda: True)
    assert transports.argv_for(host, options)[6:8] == ["--gpus", "all"]
    ssh = transports.argv_for(hosts.Host("gpu01", "alice", 2222), FanoutOptions())
    assert ssh[:4] == ["ssh", "-oBatchMode=yes", "-oForwardAgent=no", "-oForwardX11=no"]
    assert ssh[-3] == "--" and ssh[-2] == "alice@gpu01" and "-p" in ssh
    assert "StrictHostKeyChecking=no" not in " ".join(ssh)
