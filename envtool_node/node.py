"""Everything envtool asks of one node, as one JSON document: export + GPU facts (+ all-reduce).

    python -m envtool_node --prefix ENV_PREFIX [--no-torch] [--allreduce-only] [--allreduce ARGS...]

Run by ``envtool verify`` from a private temporary copy of this package on the node. Each
part that fails is reported inside the document (``{"error": ..., "kind": ...}``), so one
broken part never hides the others; the exit code is 0 whenever the document was printed.
"""

from __future__ import annotations

import json
import os
import socket
import sys

from . import facts, schema
from .torchrun import Terminated

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


class PartFailure(Exception):
    """A part of the document cannot be made, for a reason envtool tells apart (``kind``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, PartFailure):
        return {"error": str(exc), "kind": exc.kind}
    text = str(exc).strip().splitlines()
    message = "%s: %s" % (type(exc).__name__, text[0] if text else "")
    return {"error": message, "kind": schema.PART_FAILED}


def _export(prefix: str) -> dict[str, Any]:
    from .export import export_prefix

    if not os.path.isdir(os.path.join(prefix, "conda-meta")):
        message = "no conda environment at %s (no conda-meta/)" % prefix
        raise PartFailure(schema.PART_ENV_MISSING, message)
    if os.path.exists(os.path.join(prefix, schema.INCOMPLETE_MARKER)):
        message = "the install into %s did not finish (%s is there); re-run envtool install" % (
            prefix,
            schema.INCOMPLETE_MARKER,
        )
        raise PartFailure(schema.PART_INCOMPLETE, message)
    return export_prefix(prefix)


def _allreduce(args: list[str]) -> dict[str, Any]:
    from . import allreduce

    return allreduce.launch(allreduce.build_parser().parse_args(args))


def collect(
    prefix: str, use_torch: bool, allreduce_args: list[str] | None, only_allreduce: bool = False
) -> dict[str, Any]:
    """The node document; every part guarded (``only_allreduce``: no export, no facts, as
    ``--allreduce pairs`` asks once the rest is known)."""
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    doc: dict[str, Any] = {"schema": schema.NODE, "prefix": prefix, "node": node}
    parts: tuple[tuple[str, Callable[[], dict[str, Any]]], ...] = (
        ("export", lambda: _export(prefix)),
        ("facts", lambda: facts.collect(use_torch=use_torch)),
    )
    if only_allreduce:
        parts = ()
    for key, part in parts:
        try:
            doc[key] = part()
        except Exception as exc:  # a part's failure is data for the admin, not a crash
            doc[key] = _error(exc)
    doc["allreduce"] = None
    if allreduce_args is not None:
        try:
            doc["allreduce"] = _allreduce(allreduce_args)
        except (Exception, SystemExit) as exc:
            doc["allreduce"] = _error(exc)
    return doc


def main(argv: list[str] | None = None) -> int:
    """Parse the few options by hand (argparse would swallow the all-reduce's own flags)."""
    args = list(sys.argv[1:] if argv is None else argv)
    prefix, use_torch, allreduce_args, only_allreduce = sys.prefix, True, None, False
    while args:
        arg = args.pop(0)
        if arg == "--prefix" and args:
            prefix = args.pop(0)
        elif arg == "--no-torch":
            use_torch = False
        elif arg == "--allreduce-only":
            only_allreduce = True
        elif arg == "--allreduce":
            allreduce_args, args = args, []
        else:
            sys.stderr.write("envtool_node: unknown argument %r\n" % arg)
            return 2
    try:
        doc = collect(prefix, use_torch, allreduce_args, only_allreduce)
    except Terminated:  # SIGTERM during the all-reduce: torchrun already stopped
        sys.stderr.write("envtool_node: terminated\n")
        return 143
    print(json.dumps(doc, sort_keys=True))
    return 0
