"""Ask every host: the node arguments for the all-reduce mode, the bundle or a shared copy,
the transport's fan-out, and each answer read into a HostReport."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from envtool.cluster import bundle, fanout, slurm
from envtool.cluster.hosts import Host
from envtool.cluster.options import FanoutOptions
from envtool.protocol.answers import host_report
from envtool.protocol.types import Answer, HostReport

DEFAULT_RDZV_PORT = 29400  # torchrun's c10d default


def node_args(
    hosts: Sequence[Host],
    allreduce: str,
    allreduce_args: Sequence[str],
    timeout: float,
    rdzv_endpoint: str = "",
) -> tuple[str, ...]:
    """What ``python -m envtool_node`` is told: the all-reduce per node, or across nodes as
    torchrun launches a job (c10d rendezvous on the first host unless told)."""
    # the node's own time around the all-reduce (ssh, its facts and torch's import before,
    # torchrun's teardown after): 10 s was too little on a loaded 2-core machine, where a
    # failed rendezvous then ran the node past --timeout (CI, twice)
    limit = ("--timeout", str(max(1, int(timeout - 15))))
    if allreduce == "node":
        return ("--allreduce", *allreduce_args, *limit)
    if allreduce == "cluster":
        endpoint = rdzv_endpoint or f"{hosts[0].name}:{DEFAULT_RDZV_PORT}"
        return (
            "--allreduce", *allreduce_args, *limit,
            "--nnodes", str(len(hosts)),
            "--rdzv-endpoint", endpoint,
            "--rdzv-id", f"envtool-{uuid.uuid4().hex[:12]}",
        )  # fmt: skip
    return ()


def survey(
    hosts: Sequence[Host],
    options: FanoutOptions,
    on_done: Callable[[Answer], None] | None = None,
) -> list[HostReport]:
    """Every host's report, in the hosts' order."""
    token = secrets.token_hex(16)  # this run's: only its nodes' greetings count (reach.py)
    payload = bundle.payload(token, shared=bool(options.bundle_dir))
    if options.bundle_dir:
        bundle.write_bundle(Path(options.bundle_dir))
        options = replace(options, bundle_digest=bundle.digest())
    if options.transport == "slurm":
        return slurm.run_slurm(hosts, options, payload)
    return [host_report(a) for a in fanout.run_all(hosts, options, payload, on_done)]
