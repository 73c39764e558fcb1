"""How a part of the node document is made: guarded (a part that fails is its own error, in
the document, never the end of the others), and the export part with the node's two refusals
(no environment, an unfinished install). Light on purpose: ``envtool_node.node`` and this
machine's in-process document (envtool/cluster/here.py, a Slurm prolog) both use it, and the
latter must not import the all-reduce launcher."""

from __future__ import annotations

import os

from . import schema

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


class PartFailure(Exception):
    """A part of the document cannot be made, for a reason envtool tells apart (``kind``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def error(exc: BaseException) -> dict[str, Any]:
    """The document's words for a part that failed: its kind, and its first line."""
    if isinstance(exc, PartFailure):
        return {"error": str(exc), "kind": exc.kind}
    text = str(exc).strip().splitlines()
    message = "%s: %s" % (type(exc).__name__, text[0] if text else "")
    return {"error": message, "kind": schema.PART_FAILED}


def guarded(doc: dict[str, Any], key: str, part: Callable[[], dict[str, Any]]) -> None:
    """``doc[key]`` made by ``part``, or its error."""
    try:
        doc[key] = part()
    except Exception as exc:  # a part's failure is data for the admin, not a crash
        doc[key] = error(exc)


def export(prefix: str) -> dict[str, Any]:
    """The export part of the environment at ``prefix``; PartFailure where there is none, or
    its install did not finish."""
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
