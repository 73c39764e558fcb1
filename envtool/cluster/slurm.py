"""The Slurm transport: one ``srun`` step, one task per node, the bundle broadcast on stdin.

Each task's stdout is re-joined from srun's ``--label`` pieces and read once, by the node
protocol; the answer is keyed by the node name it reports (``SLURMD_NODENAME``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from envtool.cluster import proc
from envtool.cluster.hosts import Host
from envtool.cluster.nodescript import node_script
from envtool.cluster.options import FanoutOptions
from envtool.protocol.answers import from_document, host_report
from envtool.protocol.documents import NodeDocument, Unreadable, read_node
from envtool.protocol.types import Answer, HostReport, Outcome

SRUN_CHUNK = 1024  # srun --label cuts a task's long lines into labelled pieces of this size


def srun_argv(hosts: Sequence[Host], options: FanoutOptions) -> list[str]:
    """The one srun step that runs the node script on every host."""
    from ClusterShell.NodeSet import NodeSet

    nodes = str(NodeSet.fromlist([h.name for h in hosts]))
    return [
        "srun",
        f"--nodes={len(hosts)}",
        "--ntasks-per-node=1",
        f"--nodelist={nodes}",
        "--input=all",
        "--label",
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


def _documents(output: str) -> dict[str, NodeDocument]:
    """Each node's document, read once, keyed by the node name it reports."""
    found: dict[str, NodeDocument] = {}
    for text in task_texts(output).values():
        for line in text.splitlines():
            if not line.startswith("{"):
                continue
            try:
                doc = read_node(line, "srun task")
            except Unreadable:
                continue
            if doc.node and doc.node not in found:
                found[doc.node] = doc
    return found


def run_slurm(hosts: Sequence[Host], options: FanoutOptions, bundle: bytes) -> list[HostReport]:
    """Every host's report from one srun step; a node without an answer is a failure."""
    start = time.monotonic()
    deadline = options.timeout + options.connect_timeout + 30.0
    n = len(hosts)
    limits = (options.max_output * n, options.max_stderr * n)
    try:
        result = proc.run(
            srun_argv(hosts, options), input=bundle, timeout=deadline, check=False, limits=limits
        )
        out, err, why = result.stdout, result.stderr, f"srun exited {result.returncode}"
        if result.overflow:
            why = f"srun printed more than {n} x --max-output on {result.overflow}: stopped"
    except proc.ProcessError as exc:
        out = exc.result.stdout if exc.result else ""
        err, why = (exc.result.stderr if exc.result else ""), str(exc)
    seconds = time.monotonic() - start
    docs = _documents(out)
    last = [ln for ln in err.splitlines() if ln.strip()]
    detail = f"{why}: {last[-1][:300]}" if last else why
    missing = f"no answer from this node's srun task ({detail})"
    return [
        from_document(h.target, docs[h.name], seconds)
        if h.name in docs
        else host_report(Answer(h.target, None, "", "", seconds, Outcome.NO_ANSWER, missing))
        for h in hosts
    ]
