"""This machine as a node: the node package's modules run here with a prefix's python, each
answer read by the node protocol (``envtool probe`` and ``envtool doctor``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from envtool import proc
from envtool.cluster import bundle
from envtool.errors import ProblemFound
from envtool.protocol import schemas
from envtool.protocol.documents import document, read_allreduce, read_ddp
from envtool.protocol.facts_fields import read_facts
from envtool.protocol.fields import Malformed, mapping
from envtool.protocol.types import AllReduceResult, DdpSmoke, NodeFacts

FACTS_TIMEOUT = 120.0


def facts(prefix: Path | None) -> tuple[dict[str, Any], NodeFacts]:
    """The GPU facts document of this machine, as printed and as read."""
    out = bundle.run_module("facts", [], prefix, FACTS_TIMEOUT).stdout
    raw = document(out, "envtool_node.facts", schemas.FACTS)
    try:
        return raw, read_facts(raw)
    except Malformed as exc:
        raise ProblemFound(f"envtool_node.facts: {exc}") from None


def facts_and_allreduce(
    prefix: Path | None, args: list[str], timeout: float
) -> tuple[dict[str, Any], NodeFacts, dict[str, Any], AllReduceResult]:
    """The GPU facts and the all-reduce test of this machine from one node run (its ranks
    started at once, the facts gathered by rank 0): each as printed and as read."""
    argv = ["--no-export", "--allreduce", *args]
    result = bundle.run_module("", argv, prefix, timeout + FACTS_TIMEOUT, check=False)
    if result.returncode != 0 and not result.stdout.strip():  # no document: why, in one line
        raise proc.ProcessError(
            f"envtool_node exited {result.returncode}: "
            f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}",
            result,
        )
    raw = document(result.stdout, "envtool_node", schemas.NODE)
    try:
        raw_facts = mapping(raw.get("facts"), "the gpu facts")
        raw_ar = mapping(raw.get("allreduce"), "the all-reduce")
        return raw_facts, read_facts(raw_facts), raw_ar, read_allreduce(raw_ar)
    except Malformed as exc:
        raise ProblemFound(f"envtool_node: {exc}") from None


def ddp_smoke(prefix: Path, nproc: int, timeout: float) -> DdpSmoke:
    """The DDP smoke test on this machine (torchrun --standalone, ``nproc`` ranks)."""
    args = ["--nproc", str(nproc), "--timeout", str(timeout)]
    result = bundle.run_module("ddp_smoke", args, prefix, timeout + 30.0, check=False)
    return read_ddp(result.stdout, "ddp_smoke")
