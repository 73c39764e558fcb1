"""Transports: for each host, the one argv that runs the node script there, stdin the bundle.

ssh (argv only, BatchMode, no agent or X forwarding, host keys checked unless told), local
(``sh -c``), docker (``docker exec`` into a container, ``docker run --rm`` of an image).
``srun`` is cluster/slurm.py: one step for every node.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from envtool.cluster.hosts import Host
from envtool.cluster.nodescript import node_script, remote_command
from envtool.cluster.options import TRANSPORTS, FanoutOptions
from envtool.errors import InputError

# ssh options that turn host-key checking off or run a local command: only with the explicit
# --insecure-no-host-key-check (the promise is "host keys checked unless you say so").
_INSECURE: dict[str, Callable[[str], bool]] = {
    "stricthostkeychecking": lambda v: v.lower() != "yes",
    "userknownhostsfile": lambda v: True,
    "globalknownhostsfile": lambda v: True,
    "knownhostscommand": lambda v: True,
    "hostkeyalias": lambda v: True,
    "proxycommand": lambda v: v.lower() != "none",
    "localcommand": lambda v: True,
    "permitlocalcommand": lambda v: v.lower() != "no",
}


def check_ssh_options(options: FanoutOptions) -> None:
    """Each ``--ssh-option KEY=VALUE`` is one ssh option; those that weaken host-key checks or
    run local commands are refused (exit 2) unless --insecure-no-host-key-check was given."""
    for option in options.ssh_options:
        key, sep, value = option.replace(" ", "=", 1).partition("=")
        if not sep or not key.isalnum() or "\n" in option or option.startswith("-"):
            raise InputError(f"--ssh-option {option!r}: expected KEY=VALUE (one ssh -o option)")
        weakens = _INSECURE.get(key.lower())
        if weakens is not None and weakens(value.strip()) and options.strict_host_keys:
            raise InputError(
                f"--ssh-option {option!r} turns host-key checking off or runs a local command: "
                "pass --insecure-no-host-key-check as well if that is what you want"
            )


def _ssh_argv(host: Host, options: FanoutOptions, script: str) -> list[str]:
    argv = [
        "ssh",
        "-oBatchMode=yes",
        "-oForwardAgent=no",
        "-oForwardX11=no",
        f"-oConnectTimeout={max(1, int(options.connect_timeout))}",
    ]
    if not options.strict_host_keys:  # an explicit, documented opt-out only
        argv += ["-oStrictHostKeyChecking=no", "-oUserKnownHostsFile=/dev/null"]
    if options.ssh_config is not None:
        argv += ["-F", str(options.ssh_config)]
    if host.port:
        argv += ["-p", str(host.port)]
    for opt in options.ssh_options:
        argv.append(f"-o{opt}")
    return [*argv, "--", host.target, remote_command(script)]


def host_has_nvidia_gpus(version: Path = Path("/proc/driver/nvidia/version")) -> bool:
    """An NVIDIA driver on this machine: containers then get ``--gpus=all``."""
    return version.exists()


def with_role(host: Host, options: FanoutOptions) -> FanoutOptions:
    """The node arguments for ``host``: across nodes, whether it hosts the rendezvous store
    (envtool_node/rendezvous.py: that node checks the port free; no node guesses)."""
    if not options.rdzv_host:
        return options
    role = "host" if host.label == options.rdzv_host else "member"
    return replace(options, node_args=(*options.node_args, "--rdzv-role", role))


def argv_for(host: Host, options: FanoutOptions) -> list[str]:
    """The command that runs the bundle on ``host`` through the chosen transport."""
    script = node_script(with_role(host, options))
    if options.transport == "ssh":
        return _ssh_argv(host, options, script)
    if options.transport == "local":
        return ["sh", "-c", script]
    if options.transport == "docker":
        if not options.docker_target:
            raise InputError("--transport docker needs --image IMAGE or --container NAME")
        if options.docker_run:  # the options checked and completed by cluster/docker_run.py
            run = ["docker", "run", "--rm", "-i", *options.docker_run_args, "--entrypoint", "sh"]
            return [*run, "--", options.docker_target, "-c", script]
        return ["docker", "exec", "-i", options.docker_target, "sh", "-c", script]
    raise InputError(f"unknown transport {options.transport!r} (known: {', '.join(TRANSPORTS)})")
