"""Everything envtool asks of one node, as one JSON document: export + GPU facts (+ all-reduce).

    python node.py --prefix ENV_PREFIX [--no-torch] [--allreduce ARGS...]

Run by ``envtool verify`` from a temporary copy of ``probes/`` on the node. Each part that
fails is reported inside the document (``{"error": ...}``), so one broken part never hides
the others; the exit code is 0 whenever the document was printed.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List, Optional

SCHEMA = "envtool.node/1"
HERE = os.path.dirname(os.path.abspath(__file__))


def _error(exc: BaseException) -> Dict[str, Any]:
    text = str(exc).strip().splitlines()
    return {"error": "%s: %s" % (type(exc).__name__, text[0] if text else "")}


def _export(prefix: str) -> Dict[str, Any]:
    import export

    return export.export_document(prefix)


def _allreduce(args: List[str]) -> Dict[str, Any]:
    import allreduce

    parsed = allreduce.build_parser().parse_args(args)
    return allreduce.launch(parsed)


def collect(prefix: str, use_torch: bool, allreduce_args: Optional[List[str]]) -> Dict[str, Any]:
    """The node document; every part guarded."""
    import gpu_facts

    doc: Dict[str, Any] = {"schema": SCHEMA, "prefix": prefix}
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


def main(argv: Optional[List[str]] = None) -> int:
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
    sys.path.insert(0, HERE)
    print(json.dumps(collect(prefix, use_torch, allreduce_args), sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
