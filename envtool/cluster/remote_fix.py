"""``envtool fix`` on the nodes: each node runs its own ``envtool fix --here`` (the node's
installer: envtool of this version, at ``--node-envtool``), the lock on its stdin, and answers
one ``envtool.fix-node/1`` line (protocol/fix_record.py). Over ssh (the argv verify's ssh
uses: BatchMode, host keys checked), ``local`` (``sh -c`` here) or Slurm (one ``srun`` step
on that node). Nodes run in parallel up to ``fanout``; one node's failure is that node's
answer, never another's, and never stops the others."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from envtool import proc
from envtool.cluster.hosts import Host
from envtool.cluster.nodescript import NODE_VAR, TMP_CHECK, quote
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
    size: int = 0  # the bytes of the tar the node reads on stdin (cluster/fix_payload.py)
    push: bool = False  # --push: the tar carries the lock's packages (pkgs/), read as a cache
    mirrors: tuple[tuple[str, str], ...] = ()  # --channel-mirror NAME=URL, as install takes
    allow_insecure_url: bool = False


INSTALLERS = ("micromamba", "mamba", "conda")  # a node without envtool: the first it has


def script(args: NodeArgs) -> str:
    """The sh line a node runs (every value quoted; ``{node}`` in the prefix is the node's
    ``$SLURMD_NODENAME`` or hostname, as verify's --prefix takes it). It reads the payload, a
    tar of exactly ``args.size`` bytes (cluster/fix_payload.py), into a private folder (beside
    the prefix with ``--push``, its filesystem: the packages are hard-linked from it; else in
    ``$TMPDIR``) and removes it however the fix ends. The node's envtool fixes it where the
    node has one; else the node package's fixgen, with the first of micromamba, mamba and
    conda on its PATH (said in its answer)."""
    argv = [*args.envtool, "fix", "--here", "--platform", args.platform,
            "--keep", str(args.keep), "--format", "json"]  # fmt: skip
    flags = ["--apply"] if args.apply else []
    flags += ["--rollback"] if args.rollback else []
    flags += ["--allow-gap"] if args.allow_gap else []
    argv += flags
    argv += ["--cache-dir", args.cache_dir] if args.cache_dir else []
    for name, url in args.mirrors:
        argv += ["--channel-mirror", f"{name}={url}"]
    argv += ["--allow-insecure-url"] if args.allow_insecure_url else []
    prefix = NODE_VAR.join(quote(p) for p in args.prefix.split("{node}"))
    if args.push:  # the packages came with the payload
        argv += ["--cache", '"$d/pkgs"', "--cache-pushed"]
    elif args.cache:
        argv += ["--cache", args.cache]
    ours = " ".join(a if a.startswith('"$d') else quote(a) for a in argv)
    fallback = [*flags, "--keep", str(args.keep)] + (["--cache"] if args.cache else [])
    # pushed packages beside the prefix (its filesystem: hard-linked from there), else in a
    # TMPDIR no other user can swap the folder out of (checked as the probe's is)
    where, check = (('"$(dirname -- "$p")/.envtool-fix.XXXXXX"', "") if args.push
                    else ('"$tp/envtool-fix.XXXXXX"', TMP_CHECK))  # fmt: skip
    none = f"neither {args.envtool[0]} nor {', '.join(INSTALLERS)} is on this node's PATH"
    return (
        f"p={prefix}; {check}d=$(mktemp -d {where}) || exit 1; "
        "trap 'rm -rf \"$d\"' EXIT; trap 'exit 1' HUP INT TERM; "
        f'head -c {args.size} | tar -x -C "$d" -f - || {{ echo "envtool: cannot unpack the '
        'payload of the fix into $d (is its filesystem full?)" >&2; exit 1; }; '
        f"if command -v {quote(args.envtool[0])} >/dev/null 2>&1; then "
        f'{ours} --lockfile "$d/conda-lock.yml" --prefix "$p"; '
        f"else i=; for c in {' '.join(INSTALLERS)}; do i=$(command -v $c) && break; done; "
        f'[ -n "$i" ] || {{ echo {quote("envtool: " + none)} >&2; exit 1; }}; '
        '[ -x "$p/bin/python" ] || { echo "envtool: $p: no bin/python to run the fix" >&2; '
        "exit 1; }; "
        'PYTHONPATH="$d" "$p/bin/python" -B -m envtool_node.fixgen --installer "$i" '
        f'--dir "$d" --prefix "$p" {" ".join(fallback)}; fi'
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


def _one(host: Host, fan: FanoutOptions, args: NodeArgs, payload: Path) -> FixRecord:
    try:
        ran = proc.run(argv_for(host, fan, script(args)), timeout=fan.timeout, check=False,
                       stdin_path=payload, limits=(MAX_ANSWER, MAX_STDERR))  # fmt: skip
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
    payload: Path,  # the tar every node reads (cluster/fix_payload.py; args.size its size)
    done: Callable[[Host, FixRecord], None] = lambda h, r: None,
) -> dict[str, FixRecord]:
    """Each host's answer, by its label (in parallel, ``fan.fanout`` at once: 0 is 16)."""
    width = max(1, min(len(hosts), fan.fanout or 16))
    out: dict[str, FixRecord] = {}
    with ThreadPoolExecutor(max_workers=width) as pool:
        futures = {h.label: pool.submit(_one, h, fan, args, payload) for h in hosts}
        for host in hosts:
            out[host.label] = futures[host.label].result()
            done(host, out[host.label])
    return out
