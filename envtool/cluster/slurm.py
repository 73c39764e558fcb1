"""The Slurm transport: one ``srun`` step, one task per node, the bundle broadcast on stdin.

Each task's stdout is re-joined from srun's ``--label`` pieces and read once, by the node
protocol; the answer is bound to the node srun says it launched that task on (``--verbose``),
so a node cannot answer for another, and a document that names another node, or a second
answer from one task, is that node's problem.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Sequence
from dataclasses import replace

from envtool import proc
from envtool.cluster.hosts import Host
from envtool.cluster.nodescript import node_script
from envtool.cluster.options import FanoutOptions
from envtool.protocol import schemas
from envtool.protocol.answers import from_document, host_report
from envtool.protocol.documents import NodeDocument, Unreadable, read_node
from envtool.protocol.types import Answer, HostReport, Outcome, Problem, ProblemKind

SRUN_CHUNK = 1024  # srun --label cuts a task's long lines into labelled pieces of this size
# srun turns a SIGTERM into its tasks' SIGKILL ("forcing job termination"), which leaves each
# node script's folder behind; SIGUSR2 it passes on as it is: each task's trap cleans up and
# exits, then srun does (a step that has not within 5 s is killed).
SRUN_STOP = (signal.SIGUSR2, 5.0)


def srun_argv(hosts: Sequence[Host], options: FanoutOptions) -> list[str]:
    """The one srun step that runs the node script on every host."""
    from ClusterShell.NodeSet import NodeSet

    nodes = str(NodeSet.fromlist([h.name for h in hosts]))
    if options.rdzv_host:  # one command for every task: the node that hosts it knows itself
        options = replace(options, node_args=(*options.node_args, "--rdzv-host-node",
                                              options.rdzv_host))  # fmt: skip
    return [
        "srun",
        f"--nodes={len(hosts)}",
        "--ntasks-per-node=1",
        f"--nodelist={nodes}",
        "--input=all",
        "--label",
        "--verbose",  # "launching ... on host NODE, 1 tasks: T": which task ran where
        "--kill-on-bad-exit=0",
        "--job-name=envtool-verify",
        *options.slurm_args,
        "sh",
        "-c",
        node_script(options),
    ]


def task_texts(output: str) -> dict[str, str]:
    """Each task's stdout, re-joined from srun's ``--label`` pieces."""
    texts: dict[str, list[str]] = {}
    cut: dict[str, bool] = {}  # whether the task's last piece was cut at SRUN_CHUNK
    for line in output.splitlines():
        task, sep, text = line.partition(": ")
        if not sep or not task.strip().isdigit():
            continue
        task = task.strip()
        pieces = texts.setdefault(task, [])
        if pieces and cut.get(task):
            pieces[-1] += text
        else:
            pieces.append(text)
        cut[task] = len(text) >= SRUN_CHUNK
    return {task: "\n".join(pieces) for task, pieces in texts.items()}


# srun's own record, at the start of a line: a task's output reaches srun's stderr only behind
# its --label ("1: srun: launching ..."), so no task can print one (issue 24 M3).
_LAUNCH = re.compile(
    r"^srun: launching \S+ on host (\S+), \d+ tasks?: (\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)[ \t\r]*$",
    re.MULTILINE,
)
MAX_TASKS = 65536  # a range wider than any step: not a record of srun's


def _tasks(spec: str) -> list[str]:
    """The task ids of ``0-2,5``."""
    out: list[str] = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if last - first < MAX_TASKS:
            out += [str(task) for task in range(first, last + 1)]
    return out


def task_nodes(stderr: str) -> dict[str, str]:
    """Task id → the node srun itself launched it on (``srun -v``: "launching StepId=12.0 on
    host node3, 1 tasks: 2", a line of srun's own, printed before any task runs): the binding
    of an answer, never the node's own claim. The first record of a task wins."""
    found: dict[str, str] = {}
    for match in _LAUNCH.finditer(stderr):
        node, tasks = match.groups()
        for task in _tasks(tasks):
            found.setdefault(task, node)
    return found


def _documents(output: str, bound: dict[str, str]) -> dict[str, NodeDocument]:
    """Each node's document, read once, keyed by the node srun ran its task on (or, when srun
    did not say, by the name the document gives; then the first claim wins)."""
    found: dict[str, NodeDocument] = {}
    for task, text in task_texts(output).items():
        answers = [line for line in text.splitlines() if line.startswith("{")]
        node = bound.get(task)
        try:
            doc = read_node(answers[0], f"srun task {task}") if answers else None
        except Unreadable as exc:
            doc = NodeDocument(
                "", "", None, None, None, (_problem(ProblemKind.UNREADABLE, exc.detail),)
            )
        if doc is None or (node is None and (not doc.node or doc.node in found)):
            continue
        node = node or doc.node
        found[node] = _checked(doc, node, len(answers))
    return found


def _problem(kind: ProblemKind, detail: str) -> Problem:
    return Problem("answer", kind, detail)


def _checked(doc: NodeDocument, node: str, answers: int) -> NodeDocument:
    """``doc`` as the answer of ``node``: a claim to be another node, or a second answer,
    is a problem of this node's (one node must not answer for another)."""
    problems = list(doc.problems)
    if doc.node and doc.node != node:
        problems.append(
            _problem(ProblemKind.MALFORMED, f"the answer from {node}'s task says it is {doc.node}")
        )
    if answers > 1:
        problems.append(_problem(ProblemKind.MALFORMED, f"{node}'s task answered {answers} times"))
    return replace(doc, problems=tuple(problems))


def _envs_missing(stderr: str, bound: dict[str, str]) -> dict[str, str]:
    """Node → its task's stderr, where the node script said it found no environment (its
    marker line, labelled by srun with the task srun launched on that node)."""
    marker = f"{schemas.MARKER} {schemas.PART_ENV_MISSING} "
    return {
        bound[task]: text
        for task, text in task_texts(stderr).items()
        if task in bound and any(line.startswith(marker) for line in text.splitlines())
    }


def _last_words(stderr: str) -> list[str]:
    """srun's stderr without the lines -v adds (kept: errors and the job's own lines)."""
    keep = ("srun: error", "srun: fatal", "srun: Job", "srun: job")
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    return [ln for ln in lines if not ln.startswith("srun: ") or ln.startswith(keep)]


def run_slurm(hosts: Sequence[Host], options: FanoutOptions, bundle: bytes) -> list[HostReport]:
    """Every host's report from one srun step; a node without an answer is a failure."""
    start, started = time.monotonic(), time.time()  # the step's span bounds each node's clock
    deadline = options.timeout + options.connect_timeout + 30.0
    n = len(hosts)
    limits = (options.max_output * n, options.max_stderr * n)
    try:
        result = proc.run(
            srun_argv(hosts, options), input=bundle, timeout=deadline, check=False, limits=limits,
            stop=SRUN_STOP,
        )  # fmt: skip
        out, err, why = result.stdout, result.stderr, f"srun exited {result.returncode}"
        if result.overflow:
            why = f"srun printed more than {n} x --max-output on {result.overflow}: stopped"
    except proc.ProcessError as exc:
        out = exc.result.stdout if exc.result else ""
        err, why = (exc.result.stderr if exc.result else ""), str(exc)
    seconds = time.monotonic() - start
    docs = _documents(out, task_nodes(err))
    last = _last_words(err)
    detail = f"{why}: {last[-1][:300]}" if last else why
    missing = f"no answer from this node's srun task ({detail})"
    envs = _envs_missing(err, task_nodes(err))

    def report(h: Host) -> HostReport:
        if h.name in docs:
            return from_document(h.label, docs[h.name], seconds, started)
        if h.name in envs:  # the node script's own exit: no environment, and what it searched
            return host_report(Answer(h.label, schemas.EXIT_ENV_MISSING, "", envs[h.name], seconds))
        return host_report(Answer(h.label, None, "", "", seconds, Outcome.NO_ANSWER, missing))

    return [report(h) for h in hosts]
