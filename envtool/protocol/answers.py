"""A host's answer (exit code, streams, document) → its typed HostReport.

The node script's own exit codes and its marker line say why a node gave no document; a
document is read once, by protocol/documents.py.
"""

from __future__ import annotations

from envtool.protocol import schemas
from envtool.protocol.documents import NodeDocument, Unreadable, read_node
from envtool.protocol.limit_types import clock_offset
from envtool.protocol.types import Answer, Failure, HostReport, Outcome, Problem, ProblemKind

_BY_EXIT = {
    schemas.EXIT_SSH: Outcome.SSH_FAILED,
    schemas.EXIT_TIMEOUT: Outcome.TIMED_OUT_ON_NODE,
    schemas.EXIT_KILLED: Outcome.KILLED,
    schemas.EXIT_NO_TEMP_DIR: Outcome.NO_TEMP_DIR,
    schemas.EXIT_NO_BUNDLE: Outcome.NO_BUNDLE,
    schemas.EXIT_BUNDLE_UNTRUSTED: Outcome.BUNDLE_UNTRUSTED,
    schemas.EXIT_NO_PYTHON: Outcome.NO_PYTHON,
    schemas.EXIT_ENV_MISSING: Outcome.ENV_MISSING,
}


# what docker's CLI prints after its error (exit 125): never the line that says why
_TRAILERS = ("Run 'docker ", "See 'docker ", "Usage:  docker ")


def _marker(stderr: str, kind: str) -> str:
    """The argument of the node script's ``envtool-node: KIND ARG`` line on stderr."""
    for line in stderr.splitlines():
        word, _, rest = line.partition(" ")
        if word == schemas.MARKER:
            found, _, arg = rest.partition(" ")
            if found == kind:
                return arg.strip()[:1000]
    return ""


def failure(answer: Answer) -> Failure | None:
    """Why ``answer`` carries no document, or None when the node exited 0."""
    if answer.outcome is not None and answer.outcome is not Outcome.ANSWERED:
        return Failure(answer.outcome, answer.detail, answer.returncode)
    if answer.returncode == 0:
        return None
    code = answer.returncode
    outcome = _BY_EXIT.get(code, Outcome.EXITED) if code is not None else Outcome.EXITED
    lines = [
        ln.strip()
        for ln in answer.stderr.splitlines()
        if ln.strip() and not ln.startswith((schemas.MARKER, *_TRAILERS))
    ]
    detail = lines[-1][:300] if lines else "no message"
    prefix = _marker(answer.stderr, outcome.value) if outcome is Outcome.ENV_MISSING else ""
    return Failure(outcome, detail, code, prefix)


def from_document(host: str, doc: NodeDocument, seconds: float, started: float = 0.0) -> HostReport:
    """The report of a host whose document was read; ``started``: when its transport started
    (time.time()), which bounds the node's clock offset (limit_types.clock_offset)."""
    offset = clock_offset(doc.clock, started, seconds) if doc.clock is not None else None
    return HostReport(
        host, None, doc.env, doc.facts, doc.allreduce, seconds, doc.problems, doc.node,
        doc.prefix, doc.gpus, network=doc.network, limits=doc.limits, clock_offset=offset,
        rendezvous=doc.rendezvous, started=started,
    )  # fmt: skip


def host_report(answer: Answer) -> HostReport:
    """A node's answer (untrusted) validated into a HostReport; garbage becomes a problem."""
    why = failure(answer)
    if why is not None:
        return HostReport(answer.host, why, seconds=answer.seconds)
    try:
        doc = read_node(answer.stdout, answer.host)
    except Unreadable as exc:  # it answered, but with garbage: a finding, not a crash
        problem = Problem("answer", ProblemKind.UNREADABLE, exc.detail)
        return HostReport(answer.host, seconds=answer.seconds, problems=(problem,))
    return from_document(answer.host, doc, answer.seconds, answer.started)
