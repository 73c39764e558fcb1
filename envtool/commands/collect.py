"""``envtool collect``: what a job leaves on this node and would lose when it dies (its
flight-recorder dumps, torchelastic's error files, the kernel log since it started, a quick
verify of the node) gathered into DEST/JOBID/HOST on a shared path, from a Slurm ``Epilog``
(root: the files are given to the job's user) or an ``srun`` step at the end of the job
(gather/node.py). Exit 0 gathered (what was left out is listed), 2 bad input, 1 the node's
folder could not be written (nothing left behind)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from envtool.errors import EXIT_OK, EnvtoolError
from envtool.gather import names, node
from envtool.gather.since import epoch


@dataclass(frozen=True)
class CollectArgs:
    """What ``envtool collect`` was asked to do."""

    dest: Path
    job_id: str | None
    since: str | None  # epoch seconds as given
    fr: tuple[str, ...]
    error_files: tuple[str, ...]
    kernel_log: str | None
    preflight: bool = True


@contextlib.contextmanager
def _kernel_log(path: str | None) -> Iterator[None]:
    """The node package's Xid reader reads its log from ENVTOOL_KERNEL_LOG: the log given to
    collect is the one the quick verify reads too, for the length of that call."""
    from envtool_node.xid import VARIABLE

    if path is None:
        yield
        return
    before = os.environ.get(VARIABLE)
    os.environ[VARIABLE] = path
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(VARIABLE, None)
        else:
            os.environ[VARIABLE] = before


def preflight_document(kernel_log: str | None) -> tuple[bytes | None, str | None]:
    """``preflight --quick --no-lock`` of this node as its verify document (JSON), whatever it
    found; or None and why it could not be made."""
    from envtool.commands import preflight_quick as quick
    from envtool.protocol import verify_report
    from envtool.report import verify

    try:
        with _kernel_log(kernel_log):
            result = quick.decide(quick.QuickArgs(None, None))
        return verify_report.dumps(verify.document(result)).encode(), None
    except EnvtoolError as exc:
        return None, str(exc)
    except Exception as exc:  # a node this broken is what the folder is for: say it, go on
        return None, f"{type(exc).__name__}: {exc}"


def run(args: CollectArgs) -> int:
    """0: gathered (what was left out or failed is listed, and in collect.json)."""
    from envtool.report import collect_text

    since = None if args.since is None else epoch(args.since, "--since")
    who = names.identify(args.job_id, os.environ)
    request = node.Request(args.dest, who, since, args.fr, args.error_files, args.kernel_log)
    made = (lambda: preflight_document(args.kernel_log)) if args.preflight else None
    collect_text.show(node.collect(request, os.environ, made))
    return EXIT_OK
