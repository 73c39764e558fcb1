"""Declaration of ``envtool fix``: drifted nodes back to the lock (and ``--here``, what each
node runs)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from envtool.cli import options as opt
from envtool.cli.options import PathArg


@click.command()
@click.option("--hosts", "hosts_spec", metavar="FILE|NODESET|-",
              help="Hosts file or node set; default: SLURM_JOB_NODELIST.")  # fmt: skip
@opt.lockfile
@opt.platform
@click.option("--transport", type=click.Choice(["ssh", "local", "slurm", "docker"]),
              default="ssh", show_default=True)  # fmt: skip
@click.option("-F", "--ssh-config", type=PathArg, help="ssh configuration file.")
@click.option("--prefix", help="The environment's prefix on the nodes (required).")
@click.option("--report", type=PathArg, help="A saved `envtool verify --format json` report: "
              "the verify before the plan, instead of one run now.")  # fmt: skip
@click.option("--apply", is_flag=True, help="Carry the plan out (default: print it only).")
@click.option("--yes", is_flag=True, help="With --apply: do not ask (for scripts).")
@click.option("--rollback", is_flag=True, help="Switch each node back to its previous generation.")
@click.option("--keep", type=click.IntRange(0, 100), default=1, show_default=True,
              help="Older generations kept beside the one in use.")  # fmt: skip
@click.option("--canary", type=click.IntRange(0, 10_000), default=0,
              help="Fix this many nodes first; the rest only if they all succeed.")  # fmt: skip
@click.option("--fanout", type=click.IntRange(1, 4096), help="Nodes fixed at once (default 16).")
@click.option("--allow-gap", is_flag=True, help="Where the filesystem cannot exchange two paths "
              "atomically, rename the prefix away first (a moment without it).")  # fmt: skip
@click.option("--node-envtool", metavar="COMMAND", help="How the nodes run envtool (default: "
              "`envtool` on their PATH; --transport local: this one).")  # fmt: skip
@click.option("--cache", "cache", metavar="DIR", help="A package cache on a filesystem the nodes "
              "share: filled here from the lock's URLs (hash-checked), then read by every node "
              "(for nodes that cannot reach the channel).")  # fmt: skip
@click.option("--push", is_flag=True, help="With --cache: send the filled cache's packages for "
              "the lock to each node over the transport (no shared filesystem), into a folder "
              "beside its prefix, removed after.")  # fmt: skip
@click.option("--cache-pushed", is_flag=True, hidden=True, help="--here: --cache was pushed.")
@click.option("--cache-dir", help="The nodes' own package cache (default: theirs, "
              "~/.cache/envtool).")  # fmt: skip
@click.option("--timeout", type=float, default=1800.0, show_default=True, help="Per node.")
@opt.install_sources()
@click.option("--here", is_flag=True, hidden=True, help="What runs on a node.")
@opt.fmt("text", "json", "junit")
def fix(
    hosts_spec: str | None,
    lockfile: Path,
    platform: str,
    transport: str,
    ssh_config: Path | None,
    prefix: str | None,
    report: Path | None,
    apply: bool,
    yes: bool,
    rollback: bool,
    keep: int,
    canary: int,
    fanout: int | None,
    allow_gap: bool,
    node_envtool: str | None,
    cache: str | None,
    push: bool,
    cache_pushed: bool,
    cache_dir: str | None,
    timeout: float,
    channel_mirror: tuple[str, ...],
    allow_insecure_url: bool,
    here: bool,
    fmt: str,
) -> int:
    """Bring drifted nodes back to the lock: a verify, each node's plan (add, replace, remove;
    what an install cannot fix), and with --apply the whole lock installed beside each prefix
    as a new generation, checked, then switched to in one step. Exit 0 every node matches."""
    from envtool.cluster.options import FanoutOptions
    from envtool.cluster.remote_fix import NodeArgs
    from envtool.commands import fix as command
    from envtool.commands.verify import VerifyArgs
    from envtool.fix.apply import FixOptions

    if not prefix:
        raise click.UsageError("--prefix PREFIX: the environment to fix on the nodes")
    if push and not cache:
        raise click.UsageError("--push sends the cache --cache DIR fills: give --cache DIR")
    mirrors = opt.mirrors(channel_mirror)
    if here:
        options = FixOptions(Path(), Path(prefix), platform, apply or rollback, keep, allow_gap,
                             Path(cache_dir) if cache_dir else None,
                             Path(cache) if cache else None, mirrors,
                             allow_insecure_url)  # fmt: skip
        return command.here(str(lockfile), options, rollback, cache_pushed)
    words = tuple(shlex.split(node_envtool)) if node_envtool else ()
    if not words:
        words = (sys.executable, "-m", "envtool") if transport == "local" else ("envtool",)
    node = NodeArgs(words, prefix, platform, apply or rollback, rollback, keep, allow_gap,
                    cache_dir or "", cache or "", mirrors=mirrors,
                    allow_insecure_url=allow_insecure_url)  # fmt: skip
    fan = FanoutOptions(transport=transport, fanout=fanout or 0, timeout=timeout,
                        ssh_config=ssh_config, prefix=prefix)  # fmt: skip
    verify = VerifyArgs(hosts_spec, lockfile, fan, platform, min_gpus=0, fmt="json")
    return command.run(command.FixArgs(verify, node, report, yes, canary, fmt, push))


COMMANDS = (fix,)
