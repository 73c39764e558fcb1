"""Starting the ranks of a probe (all-reduce, DDP smoke test) and waiting for them.

Standard library only: the launcher never imports torch, so a node's probe pays one
``import torch`` per rank, the ranks importing at once (issue 18: the facts probe, the
launcher, torchrun and the ranks used to pay it in turn).

- One node (``standalone``): the ranks are started directly, all at once, with the
  environment torchrun would give them (``MASTER_ADDR``/``MASTER_PORT`` on 127.0.0.1, ``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``...); no torchrun, whose own import would come first.
- Several nodes: ``torchrun`` with a c10d rendezvous, started through ``envtool_node.elastic``,
  which counts the GPUs with the torch torchrun imports anyway.

Each rank runs in its own session (a Ctrl-C in the node's terminal is not its business), so
SIGTERM to the launcher raises ``Terminated`` here and unwinding stops every rank. A rank
that fails stops the others (they would wait for it until the deadline); a deadline stops all.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from typing import IO, Any

# The folder holding this package: the ranks' working directory, so ``-m envtool_node.X``
# imports this very copy.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRACE = 2.0  # seconds the other ranks get to fail on their own once one has failed


class Terminated(BaseException):
    """SIGTERM reached the launcher (the node's connection is gone, or a deadline passed)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    # GNU timeout signals its child, then its whole group: the second must not cut stop short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def _on_sigterm(handler: Any) -> Any:
    """Set the SIGTERM handler; the previous one (None off the main thread, where it can't)."""
    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return None


def visible_gpus() -> int:
    """The GPUs a rank will see, guessed without torch: the driver's list
    (``/proc/driver/nvidia/gpus``), cut by ``CUDA_VISIBLE_DEVICES`` as CUDA reads it (up to
    the first invalid entry). Only a guess: each rank checks it with torch."""
    try:
        present = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        present = 0
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return present
    count = 0
    for item in listed.split(","):
        item = item.strip()
        if not item or item.startswith("-"):
            break
        count += 1
    return min(count, present) if present else count


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the rendezvous of the ranks of one node)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Launch:
    """Ranks (or torchrun) running: their processes, logs, result file and deadline."""

    procs: list[subprocess.Popen[bytes]]
    names: list[str]
    logs: list[IO[bytes]]
    out: str
    timeout: float
    deadline: float
    previous: Any = None
    stopped: bool = field(default=False)


def _popen(argv: list[str], env: dict[str, str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True, cwd=ROOT, env=env,
    )  # fmt: skip


def _result_file(module: str) -> str:
    """Where rank 0 writes its document: in a folder only this user can enter (mkdtemp), so
    neither the file nor the rank's ``.part`` beside it can be made or swapped by another."""
    folder = tempfile.mkdtemp(prefix="envtool-%s-" % module.rsplit(".", 1)[-1])
    return os.path.join(folder, "result.json")


def start(
    nproc: int,
    module: str,
    worker_args: list[str],
    timeout: float,
    rendezvous: list[str] | None = None,
    torchrun_args: list[str] | None = None,
) -> Launch:
    """Start ``module --worker`` on ``nproc`` ranks of this node, or, with ``rendezvous``,
    torchrun (``torchrun_args``: the options of envtool_node.elastic) across nodes."""
    out = _result_file(module)
    deadline = time.time() + timeout
    tail = ["--worker", "--out", out, "--deadline", repr(deadline), *worker_args]
    launch = Launch([], [], [], out, timeout, deadline, _on_sigterm(_raise_terminated))
    try:
        if rendezvous is not None:
            argv = [
                sys.executable, "-m", "%s.elastic" % __package__, *(torchrun_args or []),
                "--", *rendezvous, "-m", module, *tail,
            ]  # fmt: skip
            _add(launch, "torchrun", argv, dict(os.environ))
            return launch
        port = str(free_port())
        for rank in range(nproc):
            env = {
                **os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                "RANK": str(rank), "WORLD_SIZE": str(nproc), "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0",
            }  # fmt: skip
            _add(launch, "rank %d" % rank, [sys.executable, "-m", module, *tail], env)
    except BaseException:
        stop(launch)
        raise
    return launch


def _add(launch: Launch, name: str, argv: list[str], env: dict[str, str]) -> None:
    log = tempfile.TemporaryFile()  # noqa: SIM115 -- closed by wait()
    launch.logs.append(log)
    launch.procs.append(_popen(argv, env, log))
    launch.names.append(name)


def stop(launch: Launch) -> None:
    """SIGTERM every process still running (torchrun stops its workers), SIGKILL what lingers,
    and restore the SIGTERM handler."""
    if launch.stopped:
        return
    launch.stopped = True
    try:
        running = [p for p in launch.procs if p.poll() is None]
        for p in running:
            with contextlib.suppress(OSError):
                p.terminate()
        end = time.monotonic() + 10
        for p in running:
            try:
                p.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    finally:
        if launch.previous is not None:
            _on_sigterm(launch.previous)


def _log(launch: Launch, index: int) -> str:
    log = launch.logs[index]
    log.seek(0)
    return log.read(1 << 20).decode("utf-8", "replace")


def failure(output: str) -> str:
    """The most telling line of a rank's (or torchrun's) output: an exception (``[rank0]:``
    prefixed or bare, such as gloo's ``RuntimeError: ... Unable to find address for: ib9``),
    else the last line."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip().strip("=")]
    for pattern in (r"\[rank\d+\]: \w*(Error|Exception)", r"\w*(Error|Exception): "):
        for line in lines:
            if re.match(pattern, line) and "ChildFailedError" not in line:
                return line
    return lines[-1] if lines else "no output"


def _first_failed(launch: Launch) -> int | None:
    for index, p in enumerate(launch.procs):
        code = p.poll()
        if code is not None and code != 0:
            return index
    return None


def wait(launch: Launch) -> tuple[str, str]:
    """(rank 0's document text, "") or ("", why there is none); ("", "") is a run that
    succeeded without writing here (a multi-node run whose rank 0 was on another node)."""
    try:
        failed: int | None = None
        while any(p.poll() is None for p in launch.procs):
            if time.time() > launch.deadline:
                return "", "no result within the %g s deadline" % launch.timeout
            failed = _first_failed(launch)
            if failed is not None:
                end = time.monotonic() + GRACE  # the others may fail on their own, or finish
                while any(p.poll() is None for p in launch.procs) and time.monotonic() < end:
                    time.sleep(0.05)
                break
            time.sleep(0.02)
        failed = _first_failed(launch) if failed is None else failed
        if failed is not None:
            code = launch.procs[failed].returncode
            why = failure(_log(launch, failed))
            return "", "%s exited %d: %s" % (launch.names[failed], code, why)
        try:
            with open(launch.out, encoding="utf-8") as fh:
                return fh.read(), ""
        except FileNotFoundError:  # every rank left without a word: the caller says why
            return "", ""
    finally:
        stop(launch)
        for log in launch.logs:
            log.close()
        shutil.rmtree(os.path.dirname(launch.out), ignore_errors=True)


@dataclass(frozen=True)
class Job:
    """What to launch: ``module --worker`` with its arguments, the backend and ranks asked
    for (``auto``, 0: decided by the ranks' own torch), and, across nodes, the rendezvous."""

    module: str
    worker_args: tuple[str, ...]
    timeout: float
    backend: str = "auto"
    nproc: int = 0
    default_cpu: int = 2
    rendezvous: tuple[str, ...] | None = None


def choose(backend: str, nproc: int, gpus: int, default_cpu: int = 2) -> tuple[str, int]:
    """The backend (``auto``: NCCL where there are GPUs, else gloo) and the ranks of a node
    with ``gpus`` GPUs: one per GPU with NCCL (at most ``nproc`` when given), else ``nproc``
    or ``default_cpu``. The launcher's guess and every rank's plan are this one rule."""
    if backend == "auto":
        backend = "nccl" if gpus else "gloo"
    if backend == "nccl":
        return backend, min(nproc, gpus) if nproc else gpus
    return backend, nproc or default_cpu


def guess(job: Job) -> tuple[str, int]:
    """The backend and ranks of this node without torch (visible_gpus); each rank checks the
    guess with torch and asks for another launch when it was wrong (``replan``). At least one
    rank starts, to say so."""
    backend, nproc = choose(job.backend, job.nproc, visible_gpus(), job.default_cpu)
    return backend, max(1, nproc)


def begin(job: Job, planned: tuple[str, int] | None = None) -> Launch:
    """Start the job's ranks now (one node: as ``planned``, else as guessed) or torchrun
    (several nodes); wait with ``finish``. The ranks get the backend and ranks asked for and
    the ones started (``--started``) to check the one against the other."""
    if job.rendezvous is not None:  # elastic plans; torchrun's parser must not see --nproc
        elastic = ["--backend", job.backend, "--nproc", str(job.nproc)]
        asked = [*job.worker_args, "--backend", job.backend]
        return start(0, job.module, asked, job.timeout, list(job.rendezvous), elastic)
    backend, nproc = planned or guess(job)
    asked = [*job.worker_args, "--backend", job.backend, "--nproc", str(job.nproc)]
    return start(nproc, job.module, [*asked, "--started", "%s:%d" % (backend, nproc)], job.timeout)


def finish(job: Job, launch: Launch) -> tuple[str, str]:
    """``wait``; once more, as the ranks planned with torch, when the guess was wrong."""
    text, why = wait(launch)
    try:
        replan = json.loads(text).get("replan") if text else None
    except (ValueError, AttributeError):
        replan = None
    if not isinstance(replan, dict):
        return text, why
    backend, nproc = str(replan.get("backend")), int(replan.get("nproc") or 0)
    if nproc < 1:
        return "", "the %s backend has no GPU to run on: torch sees none" % backend
    left = max(1.0, launch.deadline - time.time())
    return wait(begin(replace(job, timeout=left), (backend, nproc)))
