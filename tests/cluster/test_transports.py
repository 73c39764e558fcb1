"""cluster/transports.py: the argv each transport runs (docker run, docker exec, ssh)."""

from __future__ import annotations

from pathlib import Path

from envtool.cluster import hosts, transports
from envtool.cluster.options import FanoutOptions


def test_docker_transport_argv() -> None:
    """docker run gets the options verify's plan completed, then ``--`` before the image (an
    image name cannot be read as an option); docker exec enters the container as it is."""
    host = hosts.Host("image")
    options = FanoutOptions(transport="docker", docker_target="lab/ddp:1", docker_run=True,
                            docker_run_args=("--shm-size=1g", "--network=none"))  # fmt: skip
    argv = transports.argv_for(host, options)
    assert argv[:6] == ["docker", "run", "--rm", "-i", "--shm-size=1g", "--network=none"]
    assert argv[6:10] == ["--entrypoint", "sh", "--", "lab/ddp:1"] and argv[10] == "-c"
    exec_argv = transports.argv_for(host, FanoutOptions(transport="docker", docker_target="c1"))
    assert exec_argv[:5] == ["docker", "exec", "-i", "c1", "sh"]


def test_the_nvidia_driver_is_read_where_told(tmp_path: Path) -> None:
    version = tmp_path / "version"
    assert not transports.host_has_nvidia_gpus(version)
    version.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
    assert transports.host_has_nvidia_gpus(version)


def test_ssh_transport_argv() -> None:
    ssh = transports.argv_for(hosts.Host("gpu01", "alice", 2222), FanoutOptions())
    assert ssh[:4] == ["ssh", "-oBatchMode=yes", "-oForwardAgent=no", "-oForwardX11=no"]
    assert ssh[-3] == "--" and ssh[-2] == "alice@gpu01" and "-p" in ssh
    assert "StrictHostKeyChecking=no" not in " ".join(ssh)
