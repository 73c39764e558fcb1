"""How verify reaches its hosts and how long it waits: one value every transport reads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TRANSPORTS = ("ssh", "local", "docker", "slurm")
MAX_OUTPUT = 16 * 2**20  # default read bound; a node document of 100,000 packages is ~15 MiB
MAX_STDERR = 2**20  # only its last line is shown


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
    # docker run's options: the user's --docker-run-arg, completed with the defaults by
    # verify's plan (cluster/docker_run.options) before any container starts
    docker_run_args: tuple[str, ...] = ()
    bundle_dir: str = ""  # a shared folder holding envtool_node/ instead of the bundle on stdin
    bundle_digest: str = ""  # the sha256 a node checks the shared copy against
    slurm_args: tuple[str, ...] = ()  # --partition/--time for an srun outside an allocation
    max_output: int = MAX_OUTPUT  # bytes read from a node's stdout before it is stopped
    max_stderr: int = MAX_STDERR  # and from its stderr
    rdzv_host: str = ""  # across nodes: the host (its name) that hosts the rendezvous store
