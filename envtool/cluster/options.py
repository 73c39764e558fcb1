"""How verify reaches its hosts and how long it waits: one value every transport reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TRANSPORTS = ("ssh", "local", "docker", "slurm")


@dataclass(frozen=True)
class FanoutOptions:
    """How to reach the hosts and how long to wait."""

    transport: str = "ssh"
    fanout: int = 0  # hosts at once; 0: 64, or less where the open-files limit says so
    connect_timeout: float = 10.0
    timeout: float = 120.0
    ssh_config: Path | None = None
    ssh_options: tuple[str, ...] = ()
    strict_host_keys: bool = True
    prefix: str | None = None  # the env prefix on the nodes; None: search by env_name
    env_name: str = ""
    node_args: tuple[str, ...] = ()  # passed to python -m envtool_node
    docker_target: str = ""  # container name (docker exec) or image (docker run)
    docker_run: bool = False
    bundle_dir: str = ""  # a shared folder holding envtool_node/ instead of the bundle on stdin
    slurm_args: tuple[str, ...] = ()  # --partition/--time for an srun outside an allocation
