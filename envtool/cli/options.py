"""Options that several commands share, declared once."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


class Finite(click.FloatRange):
    """click's FloatRange without ``nan`` (it compares false with every bound, so click's
    range let it through) or an infinity (``1e400`` reads as one)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The number, or click's usage error (exit 2) naming the option."""
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


MAX_SECONDS = 7 * 86400.0  # a week: a deadline past it is a typo (and 1e12 s overflows time_t)
PathArg = click.Path(path_type=Path)
OutArg = click.Path(path_type=Path, dir_okay=False)  # a file written: a folder there is exit 2
SECONDS = Finite(min=1.0, max=MAX_SECONDS)
COUNT = click.IntRange(min=0)
GBPS = Finite(min=0.0)
FRACTION = Finite(0.0, 1.0)
PORT = click.IntRange(1, 65535)
ALLREDUCE_ARGS = "-b 8 -e 32M -f 4 -n 10 -w 2"


def stack(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several click decorators as one (applied in the order listed, top to bottom)."""

    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


def size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    """Callback: a byte count ``8``, ``64K``, ``16M``, ``1G`` (powers of two, as nccl-tests')."""
    from envtool_node.perf import parse_size

    try:
        count = parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None
    if count < 1:
        raise click.BadParameter("must be at least 1 byte", ctx, param)
    return count


def max_output(ctx: click.Context, param: click.Parameter, value: str) -> int:
    """Callback: a ``size`` no larger than the largest node document believed (64M)."""
    from envtool.protocol.schemas import MAX_DOCUMENT

    count = size(ctx, param, value)
    if count > MAX_DOCUMENT:
        raise click.BadParameter(f"at most {MAX_DOCUMENT >> 20}M", ctx, param)
    return count


def gpu_list(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...]:
    """Callback: ``0,3`` or GPU-UUIDs (judge/quick.parse_gpus); () when not given."""
    from envtool.judge.quick import parse_gpus

    if value is None:
        return ()
    try:
        return parse_gpus(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


lockfile = click.option(
    "--lockfile", type=PathArg, default=Path("conda-lock.yml"), show_default=True
)
platform = click.option("--platform", default="linux-64", show_default=True)
policy = click.option(
    "--policy",
    "policy_file",
    type=PathArg,
    metavar="FILE",
    help="The site's cluster policy (YAML: gpus:, limits:, accept:; docs/policy.example.yml).",
)


allow_insecure_url = click.option(
    "--allow-insecure-url",
    is_flag=True,
    help="Install from http:// URLs, or file:// URLs outside every --channel-mirror.",
)


def install_sources() -> Callable[[F], F]:
    """Where an install may fetch packages from (``install`` and ``doctor --install``)."""
    return stack(
        click.option(
            "--channel-mirror",
            "channel_mirror",
            multiple=True,
            metavar="NAME=URL",
            help="A local copy of channel NAME (file://): its packages may be installed.",
        ),
        allow_insecure_url,
    )


def mirrors(values: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """``NAME=URL`` options as pairs (exit 2 on a malformed one)."""
    from envtool.lock.pin import parse_mirrors

    return tuple(parse_mirrors(values).items())


def fmt(*choices: str) -> Callable[[F], F]:
    """``--format`` with these choices, the first the default."""
    return click.option(
        "--format", "fmt", type=click.Choice(choices), default=choices[0], show_default=True
    )


def show_all() -> Callable[[F], F]:
    """``--all``: list every finding, not only what decides a DDP run (the rest is counted)."""
    return click.option(
        "--all",
        "show_all",
        is_flag=True,
        help="List every finding; by default those about ordinary packages are counted.",
    )


def plot() -> Callable[[F], F]:
    """``--plot FILE.png``."""
    return click.option(
        "--plot", type=OutArg, help="Also draw busbw against message size into this PNG."
    )


@dataclass(frozen=True)
class ClusterChecks:
    """The values of the options ``cluster_checks`` declares."""

    lockfile: Path
    prefix: str | None
    allreduce: str
    allreduce_args: str
    rdzv_endpoint: str
    min_gpus: int
    min_busbw: float | None
    baseline: Path | None
    timeout: float
    junit_file: Path | None
    history: Path | None = None
    record: bool | None = None
    metrics_file: Path | None = None

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> ClusterChecks:
        """From the keyword arguments click passes."""
        return cls(**values)


def cluster_checks(allreduce: str, timeout: float) -> Callable[[F], F]:
    """What ``verify`` and ``preflight`` both take (their defaults differ): the command gets
    them as keyword arguments, read with ``ClusterChecks.of``."""
    return stack(
        lockfile,
        click.option(
            "--prefix",
            help="The environment's prefix on the nodes ({node}: the node name; default: the "
            "lock's env name under the usual conda env dirs, else $CONDA_PREFIX).",
        ),
        click.option(
            "--allreduce",
            type=click.Choice(["off", "node", "cluster", "pairs", "bisect"]),
            help="node: each node alone; cluster: all nodes in one job; pairs: every pair of "
            "nodes, round by round (names a slow node or link); bisect: which node, in two "
            "rounds.",
            default=allreduce,
            show_default=True,
        ),
        click.option(
            "--allreduce-args",
            default=ALLREDUCE_ARGS,
            show_default=True,
            help="all_reduce_perf-style flags for the all-reduce probe.",
        ),
        click.option(
            "--rdzv-endpoint",
            default="",
            metavar="HOST:PORT",
            help="--allreduce cluster: the c10d rendezvous (default: first host:29400); "
            "pairs/bisect: each pair meets on its first node at PORT, PORT+1, ... (HOST is "
            "used only when it is this machine: 127.0.0.1).",
        ),
        click.option("--min-gpus", type=COUNT, default=1, show_default=True),
        click.option(
            "--min-busbw", type=GBPS, help="Fail nodes whose all-reduce busbw (GB/s) is lower."
        ),
        click.option(
            "--baseline", type=PathArg, help="Earlier verify JSON report or nccl-tests log."
        ),
        click.option(
            "--timeout",
            type=SECONDS,
            default=timeout,
            show_default=True,
            help="Per-host deadline in seconds.",
        ),
        click.option(
            "--junit",
            "junit_file",
            type=OutArg,
            help="Also write a JUnit report here (whatever --format is).",
        ),
        recording(),
    )


def recording() -> Callable[[F], F]:
    """``--history``, ``--record/--no-record``, ``--metrics-file`` (verify, preflight, doctor):
    the command gets them as ``history``, ``record``, ``metrics_file``."""
    return stack(
        click.option(
            "--history",
            type=PathArg,
            metavar="PATH",
            help="Record the run in this history store (SQLite; default $ENVTOOL_HISTORY, else "
            "$XDG_STATE_HOME/envtool/history.sqlite with --record).",
        ),
        click.option(
            "--record/--no-record",
            default=None,
            help="Record the run in the history store (default: when --history or "
            "$ENVTOOL_HISTORY names one).",
        ),
        click.option(
            "--metrics-file",
            type=OutArg,
            metavar="FILE.prom",
            help="Also write the run's metrics here (node_exporter's textfile collector).",
        ),
    )
