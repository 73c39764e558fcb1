"""``envtool fix`` on the nodes: each node runs its own ``envtool fix --here`` (the node's
installer: envtool of this version, at ``--node-envtool``), the lock on its stdin, and answers
one ``envtool.fix-node/1`` line (protocol/fix_record.py). Over ssh (the argv verify's ssh
uses: BatchMode, host keys checked), ``local`` (``sh -c`` here) or Slurm (one ``srun`` step
on that node). Nodes run in parallel up to ``fanout``; one node's failure is that node's
answer, never another's, and never stops the others."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from envtool import proc
from envtool.cluster.hosts import Host
from envtool.cluster.nodescript import NODE_VAR, quote
from envtool.cluster.options import FanoutOptions
from envtool.cluster.transports import _ssh_argv
from envtool.errors import InputError
from envtool.protocol import fix_record
from envtool.protocol.fix_record import FixRecord

MAX_ANSWER = 16 * 1024 * 1024  # a node's answer: its plan, bounded
MAX_STDERR = 64 * 1024


@dataclass(frozen=True)
class NodeArgs:
    """What every node's ``envtool fix --here`` is given (its prefix, the plan's options)."""

    envtool: tuple[str, ...]  # the node's envtool: its argv words (a path, or a name on PATH)
    prefix: str
    platform: str
    apply: bool = False
    rollback: bool = False
    keep: int = 1
    allow_gap: bool = False
    cache_dir: str = ""
    cache: str = ""  # --cache DIR: the package cache the controller filled, read by the node
    push: int = 0  # --push: the bytes of the tar the node reads on stdin (lock and packages)
    mirrors: tuple[tuple[str, str], ...] = ()  # --channel-mirror NAME=URL, as install takes
    allow_insecure_url: bool = False


def script(args: NodeArgs) -> str:
    """The sh line a node runs (every value quoted; ``{node}`` in the prefix is the node's
    ``$SLURMD_NODENAME`` or hostname, as verify's --prefix takes it). With ``push`` the node
    reads a tar of exactly that many bytes into a private folder beside the prefix (its
    filesystem: the packages are hard-linked from it) and removes it however the fix ends."""
    argv = [*args.envtool, "fix", "--here", "--platform", args.platform,
            "--keep", str(args.keep), "--format", "json"]  # fmt: skip
    argv += ["--apply"] if args.apply else []
    argv += ["--rollback"] if args.rollback else []
    argv += ["--allow-gap"] if args.allow_gap else []
    argv += ["--cache-dir", args.cache_dir] if args.cache_dir else []
    argv += ["--cache", args.cache] if args.cache and not args.push else []
    for name, url in args.mirrors:
        argv += ["--channel-mirror", f"{name}={url}"]
    argv += ["--allow-insecure-url"] if args.allow_insecure_url else []
    prefix = NODE_VAR.join(quote(p) for p in args.prefix.split("{node}"))
    if not args.push:
        return f"exec {shlex.join(argv)} --lockfile - --prefix {prefix}"
    return (
        f'p={prefix}; d=$(mktemp -d "$(dirname -- "$p")/.envtool-push.XXXXXX") || exit 1; '
        "trap 'rm -rf \"$d\"' EXIT; trap 'exit 1' HUP INT TERM; "
        f'head -c {args.push} | tar -x -C "$d" -f - || exit 1; '
        f'{shlex.join(argv)} --lockfile "$d/conda-lock.yml" --cache "$d/pkgs" --cache-pushed '
        '--prefix "$p"'
    )


def argv_for(host: Host, fan: FanoutOptions, line: str) -> list[str]:
    """The command that runs ``line`` on ``host``."""
    if fan.transport == "ssh":
        return _ssh_argv(host, fan, line)
    if fan.transport == "local":
        return ["sh", "-c", line]
    if fan.transport == "slurm":
        return ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={host.target}", *fan.slurm_args,
                "sh", "-c", line]  # fmt: skip
    raise InputError(
        f"--transport {fan.transport}: envtool fix does not change a container or an image "
        "(rebuild it from the lock: envtool build)"
    )


def _one(host: Host, fan: FanoutOptions, args: NodeArgs, lock: bytes | Path) -> FixRecord:
    pushed, data = (lock, None) if isinstance(lock, Path) else (None, lock)
    try:
        ran = proc.run(argv_for(host, fan, script(args)), timeout=fan.timeout, check=False,
                       input=data, stdin_path=pushed,
                       limits=(MAX_ANSWER, MAX_STDERR))  # fmt: skip
    except proc.ProcessError as exc:
        return fix_record.failed(args.prefix, f"{host.label}: {exc}")
    lines = [line for line in ran.stdout.splitlines() if line.strip()]
    if not lines:
        said = (ran.stderr.strip().splitlines() or [f"exit {ran.returncode}, no answer"])[-1]
        return fix_record.failed(args.prefix, f"{host.label}: {said[:300]}")
    try:
        return fix_record.loads(lines[-1], host.label)
    except InputError as exc:
        return fix_record.failed(args.prefix, str(exc))


def run_all(
    hosts: Sequence[Host],
    fan: FanoutOptions,
    args: NodeArgs,
    lock: bytes | Path,  # the lock, or the tar --push sends (pkgcache.pack)
    done: Callable[[Host, FixRecord], None] = lambda h, r: None,
) -> dict[str, FixRecord]:
    """Each host's answer, by its label (in parallel, ``fan.fanout`` at once: 0 is 16)."""
    width = max(1, min(len(hosts), fan.fanout or 16))
    out: dict[str, FixRecord] = {}
    with ThreadPoolExecutor(max_workers=width) as pool:
        futures = {h.label: pool.submit(_one, h, fan, args, lock) for h in hosts}
        for host in hosts:
            out[host.label] = futures[host.label].result()
            done(host, out[host.label])
    return out
