"""Everything envtool asks of one node, as one JSON document: export + GPU facts (+ all-reduce).

    python -m envtool_node --prefix ENV_PREFIX [--no-torch] [--no-export] [--no-gpus]
                           [--allreduce-only]
                           [--allreduce ARGS...]

Run by ``envtool verify`` from a private temporary copy of this package on the node. Each
part that fails is reported inside the document (``{"error": ..., "kind": ...}``), so one
broken part never hides the others; the exit code is 0 whenever the document was printed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time

from . import allreduce, facts, gpus, limits, network, reach, schema
from . import launch as ranks
from .launch import Terminated
from .parts import error, export, guarded
from .rendezvous import PortTaken

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _facts_of_rank(path: str) -> dict[str, Any] | None:
    """The facts the all-reduce's local rank 0 gathered, with this process's environment
    (the rank's has the rendezvous variables its launcher set); None when there are none."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != schema.FACTS:
        return None
    doc["env"] = facts.collected_env(dict(os.environ))
    doc["hostname"] = socket.gethostname()
    return doc


def _start(
    allreduce_args: list[str], facts_path: str, doc: dict[str, Any]
) -> tuple[Any, Any, bool] | None:
    """The all-reduce's ranks started (job, launch, across nodes?), or its error in ``doc``."""
    try:
        args = allreduce.parse(allreduce_args)
        job, launch = allreduce.start(args, facts_path)
        return job, launch, args.nnodes > 1
    except PortTaken as exc:  # the rendezvous is not envtool's: nothing started
        doc["allreduce"] = exc.document()
        return None
    except (Exception, SystemExit) as exc:
        doc["allreduce"] = error(exc)
        return None


def collect(
    prefix: str,
    use_torch: bool,
    allreduce_args: list[str] | None,
    parts: tuple[str, ...] = ("export", "facts", "gpus"),
    rdzv: reach.Ask | None = None,
    token: str = "",
) -> dict[str, Any]:
    """The node document; every part guarded (``--allreduce pairs`` asks for no part but the
    all-reduce once the rest is known; ``envtool probe`` for no export).

    With the all-reduce, its ranks start first and the node's local rank 0 gathers the GPU
    facts with the torch it imports anyway, while this process exports the environment: one
    import of torch per rank, not one more here (when rank 0 could not, this process gathers
    the facts itself)."""
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    doc: dict[str, Any] = {"schema": schema.NODE, "prefix": prefix, "node": node}
    doc["allreduce"], started = None, None
    folder = tempfile.mkdtemp(prefix="envtool-facts-")  # only this user can enter it
    facts_path = os.path.join(folder, "facts.json")  # the rank writes it whole, or not at all
    from_rank = use_torch and "facts" in parts
    try:
        # the rendezvous first, as every node starts: a GPU read that waits for its deadline
        # (NVML on a dead card) must not open the store's window late, or a node's greeting
        # late; its listener is closed before the all-reduce needs the port
        if rdzv is not None:
            guarded(doc, "rendezvous", lambda: reach.check(rdzv, node, token))
        if "gpus" in parts:  # before any rank starts: this run's own never hold a GPU
            guarded(doc, "gpus", gpus.collect)
        if allreduce_args is not None:
            started = _start(allreduce_args, facts_path if from_rank else "", doc)
        if "export" in parts:
            guarded(doc, "export", lambda: export(prefix))
        if started is not None:
            job, launch, multinode = started
            guarded(doc, "allreduce", lambda: allreduce.finish(job, launch, multinode))
        if "facts" in parts:
            ranked = _facts_of_rank(facts_path) if from_rank else None
            guarded(doc, "facts", lambda: ranked or facts.collect(use_torch=use_torch))
        if parts:  # the limits under the environment; none with --allreduce-only
            guarded(doc, "limits", limits.collect)
            guarded(doc, "network", lambda: network.collect(os.environ))
    finally:
        if started is not None:
            ranks.stop(started[1])
        shutil.rmtree(folder, ignore_errors=True)
    return doc


def main(argv: list[str] | None = None) -> int:
    """Parse the few options by hand (argparse would swallow the all-reduce's own flags)."""
    started = time.monotonic()  # the clock entry's elapsed: the controller bounds its offset
    args = list(sys.argv[1:] if argv is None else argv)
    token = os.environ.pop(schema.TOKEN_VAR, "")  # the run's: not for the ranks it starts
    token = token if re.fullmatch(r"[0-9a-f]{16,64}", token) else ""
    prefix, use_torch, allreduce_args = sys.prefix, True, None
    parts: tuple[str, ...] = ("export", "facts", "gpus")
    rdzv, args = reach.asked(args, dict(os.environ))
    while args:
        arg = args.pop(0)
        if arg == "--prefix" and args:
            prefix = args.pop(0)
        elif arg == "--no-torch":
            use_torch = False
        elif arg == "--allreduce-only":
            parts = ()
        elif arg == "--no-gpus":
            parts = tuple(p for p in parts if p != "gpus")
        elif arg == "--no-export":
            parts = tuple(p for p in parts if p != "export")
        elif arg == "--allreduce":
            allreduce_args, args = args, []
        else:
            sys.stderr.write("envtool_node: unknown argument %r\n" % arg)
            return 2
    try:
        doc = collect(prefix, use_torch, allreduce_args, parts, rdzv, token)
    except Terminated:  # SIGTERM during the all-reduce: its ranks already stopped
        sys.stderr.write("envtool_node: terminated\n")
        return 143
    # elapsed since the process began, its interpreter's start included: a node whose
    # python took long to start still bounds its clock as tightly as the others
    elapsed = limits.process_age(time.monotonic() - started)
    doc["clock"] = {"time": time.time(), "elapsed": elapsed}
    print(json.dumps(doc, sort_keys=True))
    return 0
