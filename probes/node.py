"""Everything envtool asks of one node, as one JSON document: export + GPU facts (+ all-reduce).

    python node.py --prefix ENV_PREFIX [--no-torch] [--allreduce ARGS...]

Run by ``envtool verify`` from a temporary copy of ``probes/`` on the node. Each part that
fails is reported inside the document (``{"error": ...}``), so one broken part never hides
the others; the exit code is 0 whenever the document was printed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
from typing import Any

SCHEMA = "envtool.node/1"
HERE = os.path.dirname(os.path.abspath(__file__))
# What `envtool install` leaves in a prefix until the whole install succeeded (install.py).
INCOMPLETE_MARKER = os.path.join("conda-meta", "envtool-incomplete")


class IncompleteInstall(Exception):
    """The prefix carries envtool install's marker: an install into it did not finish."""


def _sibling(name: str) -> Any:
    """Load another probe of this bundle by path (the bundle is a folder, not a package)."""
    path = os.path.join(HERE, name + ".py")
    spec = importlib.util.spec_from_file_location("envtool_probe_" + name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load " + path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _error(exc: BaseException) -> dict[str, Any]:
    text = str(exc).strip().splitlines()
    return {"error": "%s: %s" % (type(exc).__name__, text[0] if text else "")}


def _export(prefix: str) -> dict[str, Any]:
    if not os.path.isdir(os.path.join(prefix, "conda-meta")):
        raise LookupError("no conda environment at %s (no conda-meta/)" % prefix)
    if os.path.exists(os.path.join(prefix, INCOMPLETE_MARKER)):
        raise IncompleteInstall(
            "the install into %s did not finish (%s is there); re-run envtool install"
            % (prefix, INCOMPLETE_MARKER)
        )
    return _sibling("export").export_prefix(prefix)


def _allreduce(args: list[str]) -> dict[str, Any]:
    allreduce = _sibling("allreduce")
    return allreduce.launch(allreduce.build_parser().parse_args(args))


def collect(prefix: str, use_torch: bool, allreduce_args: list[str] | None) -> dict[str, Any]:
    """The node document; every part guarded."""
    gpu_facts = _sibling("gpu_facts")
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    doc: dict[str, Any] = {"schema": SCHEMA, "prefix": prefix, "node": node}
    for key, part in (
        ("export", lambda: _export(prefix)),
        ("facts", lambda: gpu_facts.collect(use_torch=use_torch)),
    ):
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
    prefix, use_torch, allreduce_args = sys.prefix, True, None
    while args:
        arg = args.pop(0)
        if arg == "--prefix" and args:
            prefix = args.pop(0)
        elif arg == "--no-torch":
            use_torch = False
        elif arg == "--allreduce":
            allreduce_args, args = args, []
        else:
            sys.stderr.write("node.py: unknown argument %r\n" % arg)
            return 2
    try:
        doc = collect(prefix, use_torch, allreduce_args)
    except BaseException as exc:  # allreduce.Terminated: SIGTERM, torchrun already stopped
        if type(exc).__name__ != "Terminated":
            raise
        sys.stderr.write("node.py: terminated\n")
        return 143
    print(json.dumps(doc, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
