"""torchrun plumbing shared by the probes that launch ranks (allreduce.py, ddp_smoke.py).

Standard library only, torch is imported inside the functions that need it. One side starts
``torchrun`` with a deadline and stops it (and its ranks) on SIGTERM; the other sets a rank
up with a watchdog. The ranks run this package's modules with ``-m`` from the folder that
holds the package (on a node: the private temporary copy envtool unpacked).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable

# The folder holding this package: the ranks' working directory, so ``-m envtool_node.X``
# imports this very copy.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _watchdog(deadline: float) -> None:
    """Leave at the deadline even if a collective hangs (a dead peer, a blocked port)."""

    def run() -> None:
        time.sleep(max(0.0, deadline - time.time()))
        sys.stderr.write("%s: rank past its deadline, exiting\n" % os.path.basename(sys.argv[0]))
        os._exit(3)

    threading.Thread(target=run, daemon=True).start()


def init_rank(backend: str, deadline: float) -> tuple[Any, Any, str, Any]:
    """torch, torch.distributed, the backend and this rank's device, the group initialised
    (NCCL: one GPU per local rank; gloo: the CPU); a watchdog ends the rank at ``deadline``."""
    import torch
    import torch.distributed as dist

    if deadline:
        _watchdog(deadline)
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=backend)
    return torch, dist, backend, device


def gpu_count() -> int:
    """CUDA devices torch sees; 0 without CUDA or without torch."""
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:
        return 0


class Terminated(BaseException):
    """SIGTERM reached the launcher (the node's connection is gone, or a deadline passed)."""


def _raise_terminated(signum: int, frame: Any) -> None:
    # GNU timeout signals its child, then its whole group: the second must not cut _stop short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def _on_sigterm(handler: Any) -> Any:
    """Set the SIGTERM handler; the previous one (None off the main thread, where it can't)."""
    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return None


def run_torchrun(argv: list[str], timeout: float) -> tuple[int | None, str]:
    """Run torchrun in its own session with a deadline: (its exit code, or None when the
    deadline passed and it was stopped; its output). SIGTERM to this process stops it too."""
    previous, proc = _on_sigterm(_raise_terminated), None
    try:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            cwd=ROOT,
        )
        stdout, stderr = proc.communicate(timeout=timeout)
        return proc.returncode, stdout + stderr
    except subprocess.TimeoutExpired:
        if proc is not None:
            stop(proc)
        return None, ""
    except BaseException:
        if proc is not None:
            stop(proc)
        raise
    finally:
        if previous is not None:
            _on_sigterm(previous)


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM torchrun (it stops its workers), then SIGKILL its group if it lingers."""
    proc.terminate()
    try:
        proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def failure(output: str) -> str:
    """The most telling line of torchrun's output: a rank's exception (``[rank0]:``-prefixed
    or bare, such as gloo's ``RuntimeError: ... Unable to find address for: ib9``), else the
    last line."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip().strip("=")]
    for pattern in (r"\[rank\d+\]: \w*(Error|Exception)", r"\w*(Error|Exception): "):
        for line in lines:
            if re.match(pattern, line) and "ChildFailedError" not in line:
                return line
    return lines[-1] if lines else "no output"


def run_ranks(
    rendezvous: list[str], nproc: int, module: str, worker_args: list[str], timeout: float
) -> tuple[str, str]:
    """torchrun ``-m module --worker`` on ``nproc`` ranks with a deadline: (rank 0's document
    text, "") or ("", why there is none). ("", "") is a run that succeeded without writing
    here (a multi-node run whose rank 0 was on another node).

    torchrun runs in its own session (a Ctrl-C in the node's terminal is not its business), so
    a signal to this process's group would not reach it: SIGTERM raises Terminated here, and
    unwinding stops torchrun, which stops its workers."""
    fd, out = tempfile.mkstemp(prefix="envtool-%s-" % module.rsplit(".", 1)[-1], suffix=".json")
    os.close(fd)
    argv = [
        sys.executable, "-m", "torch.distributed.run", *rendezvous,
        "--nproc-per-node", str(nproc),
        "-m", module,  # the workers import this module from ROOT
        "--worker", "--out", out, "--deadline", repr(time.time() + timeout), *worker_args,
    ]  # fmt: skip
    try:
        code, output = run_torchrun(argv, timeout)
        if code is None:
            return "", "no result within the %g s deadline" % timeout
        with open(out, encoding="utf-8") as fh:
            text = fh.read()
        if code != 0:
            return "", "torchrun exited %d: %s" % (code, failure(output))
        return text, ""
    finally:
        os.unlink(out)


def main(
    args: Any,
    worker: Callable[[Any], int],
    launch: Callable[[Any], dict[str, Any]],
    failed: Callable[[str], dict[str, Any]],
    name: str,
) -> int:
    """A launcher's main: a rank when ``--worker``, else rank 0's document (or ``failed``'s,
    with the exception's one line) on stdout; 1 when it carries an error or ``ok`` false, 143
    on SIGTERM (torchrun and its ranks stopped)."""
    if args.worker:
        return worker(args)
    try:
        doc = launch(args)
    except Terminated:
        sys.stderr.write("%s: terminated; torchrun and its workers stopped\n" % name)
        return 143
    except Exception as exc:  # torch missing, torchrun not startable: data, not a traceback
        doc = failed("%s: %s" % (type(exc).__name__, str(exc).strip().split("\n")[0]))
    print(json.dumps(doc, sort_keys=True))
    return 1 if doc.get("error") or doc.get("ok") is False else 0
