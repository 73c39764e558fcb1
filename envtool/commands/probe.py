"""``envtool probe``: this machine's GPU facts and an all-reduce test."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envtool.cluster import local
from envtool.errors import EXIT_OK, EXIT_PROBLEMS, InputError, ProblemFound
from envtool.report import console, results


@dataclass(frozen=True)
class ProbeArgs:
    """What ``envtool probe`` was asked to do."""

    prefix: Path | None = None
    allreduce: bool = True
    nproc: int = 0
    minbytes: str = "8"
    maxbytes: str = "32M"
    stepfactor: int = 2
    iters: int = 20
    warmup: int = 5
    timeout: float = 300.0
    fmt: str = "table"
    plot: Path | None = None
    cudagraph: int = 0  # -G: CUDA graph replays (0: eager calls)

    def sweep(self) -> list[str]:
        """The all-reduce module's arguments."""
        return [
            "-b", self.minbytes, "-e", self.maxbytes, "-f", str(self.stepfactor),
            "-n", str(self.iters), "-w", str(self.warmup), "--timeout", str(self.timeout),
            "-G", str(self.cudagraph),
            *(["--nproc", str(self.nproc)] if self.nproc else []),
        ]  # fmt: skip


def run(args: ProbeArgs) -> int:
    """1 when the all-reduce failed or counted wrong elements."""
    if args.plot is not None and not args.allreduce:
        raise InputError("--plot draws the all-reduce: it cannot be used with --no-allreduce")
    raw_ar, allreduce = None, None
    if args.allreduce:  # one node run: the ranks gather the facts too
        raw_facts, facts, raw_ar, allreduce = local.facts_and_allreduce(
            args.prefix, args.sweep(), args.timeout
        )
    else:
        raw_facts, facts = local.facts(args.prefix)
    results.probe_result({"facts": raw_facts, "allreduce": raw_ar}, facts, allreduce, args.fmt)
    if args.plot is not None and allreduce is not None:
        from envtool.report.nccl_text import run_of
        from envtool.report.plot import busbw_png
        from envtool_node.perf import LARGE

        if not allreduce.rows:
            why = f": {allreduce.error}" if allreduce.error else ""
            raise ProblemFound(f"no all-reduce rows to plot{why}")
        busbw_png(run_of(allreduce, "envtool probe"), args.plot, LARGE)
        console.wrote(args.plot)
    failed = allreduce is not None and (bool(allreduce.error) or bool(allreduce.wrong_total))
    return EXIT_PROBLEMS if failed else EXIT_OK
