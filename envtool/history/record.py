"""A run remembered: recorded in the history store and its metrics written, after its report.
Recording never fails the run: what could not be recorded is returned, to be said."""

from __future__ import annotations

import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from envtool.errors import EnvtoolError
from envtool.history import metrics, scope, store
from envtool.protocol.verify_report import VerifyDocument


@dataclass(frozen=True)
class Recording:
    """Where a run is remembered: the history store (None: not recorded), a metrics file."""

    history: Path | None = None
    metrics_file: Path | None = None

    @classmethod
    def of(cls, history: Path | None, record: bool | None, metrics: Path | None) -> Recording:
        """``--history``/``--record``: recorded when a store is named (the flag, or
        ``$ENVTOOL_HISTORY``) or ``--record`` asks for the default one; never on --no-record."""
        named = history is not None or bool(os.environ.get("ENVTOOL_HISTORY"))
        wanted = record if record is not None else named
        return cls((history or store.default_path()) if wanted else None, metrics)


def remember(
    recording: Recording,
    doc: VerifyDocument,
    command: str,
    allreduce: str = "",
    made: scope.Checks | None = None,
) -> str:
    """What could not be recorded, its parts joined by "; " (empty when everything was).
    ``made``: each host's checks (default: what the report shows; history/scope.py)."""
    at, said = time.time(), []
    made = scope.checks(doc) if made is None else made
    if recording.history is not None:
        try:
            with store.opened(recording.history) as db:
                store.record(db, doc, command, at, allreduce, made)
        except (EnvtoolError, sqlite3.Error, OSError) as exc:
            said.append(f"history not recorded: {exc}")
    if recording.metrics_file is not None:
        try:
            metrics.write(recording.metrics_file, metrics.text(metrics.snapshot(doc, at, made)))
        except (EnvtoolError, OSError) as exc:
            said.append(f"metrics not written: {exc}")
    return "; ".join(said)
