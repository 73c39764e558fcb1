"""``envtool export``: a prefix's environment exactly as ``conda env export`` prints it."""

from __future__ import annotations

from pathlib import Path

from envtool import environments
from envtool.errors import EXIT_OK
from envtool.report import results


def default_prefix(prefix: Path | None) -> Path:
    """``--prefix``, else ``$CONDA_PREFIX``, else the lock's env by name (prefixes.locate);
    never envtool's own interpreter's prefix in its place."""
    from envtool.lock.prefixes import locate

    return locate(prefix)


def run(prefix: Path | None, name: str | None, no_builds: bool, fmt: str) -> int:
    """Print the export (YAML text, or the JSON document with the text in it)."""
    doc = environments.export_prefix(
        default_prefix(prefix), name=name, no_builds=no_builds, with_yaml=True
    )
    results.export_document(doc, fmt)
    return EXIT_OK
