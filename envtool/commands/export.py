"""``envtool export``: a prefix's environment exactly as ``conda env export`` prints it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from envtool import environments
from envtool.errors import EXIT_OK
from envtool.report import results


def default_prefix(prefix: Path | None) -> Path:
    """``--prefix``, else ``$CONDA_PREFIX``, else this interpreter's prefix."""
    if prefix is not None:
        return prefix
    if os.environ.get("CONDA_PREFIX"):
        return Path(os.environ["CONDA_PREFIX"])
    return Path(sys.prefix)


def run(prefix: Path | None, name: str | None, no_builds: bool, fmt: str) -> int:
    """Print the export (YAML text, or the JSON document with the text in it)."""
    doc = environments.export_prefix(
        default_prefix(prefix), name=name, no_builds=no_builds, with_yaml=True
    )
    results.export_document(doc, fmt)
    return EXIT_OK
