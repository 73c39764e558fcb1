"""One rank of a probe (all-reduce, DDP smoke test), and the launcher's ``main``.

Standard library only; torch is imported inside the functions that need it. A rank starts a
watchdog first (it leaves at the deadline even if a collective hangs), then decides its
backend and its world with torch, and initialises the process group from the environment
its launcher gave it (envtool_node.launch: directly on one node, torchrun across nodes).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Callable

from .launch import Terminated, choose


def watchdog(deadline: float) -> None:
    """Leave at the deadline even if a collective hangs (a dead peer, a blocked port)."""
    if not deadline:
        return

    def run() -> None:
        time.sleep(max(0.0, deadline - time.time()))
        sys.stderr.write("%s: rank past its deadline, exiting\n" % os.path.basename(sys.argv[0]))
        os._exit(3)

    threading.Thread(target=run, daemon=True).start()


def plan(backend: str, nproc: int, default_cpu: int = 2) -> tuple[Any, str, int]:
    """torch, and the backend and ranks this node should run (launch.choose with the GPUs
    torch sees). Every rank of a node computes the same plan."""
    import torch

    gpus = int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    return (torch, *choose(backend, nproc, gpus, default_cpu))


def begin(args: Any, default_cpu: int = 2) -> tuple[Any, str] | None:
    """The watchdog, then torch and the backend; None when the launcher started another plan
    than this node's (``--started``, guessed without torch): rank 0 then writes the right one
    (``{"replan": ...}``) and every rank leaves without initialising the group."""
    watchdog(args.deadline)
    torch, backend, nproc = plan(args.backend, args.nproc, default_cpu)
    if args.started and args.started != "%s:%d" % (backend, nproc):
        if os.environ.get("RANK") == "0" and args.out:
            write(args.out, {"replan": {"backend": backend, "nproc": nproc}})
        return None
    return torch, backend


def init(torch: Any, backend: str) -> tuple[Any, Any]:
    """torch.distributed and this rank's device, the group initialised from the environment
    (NCCL: one GPU per local rank; gloo: the CPU)."""
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "nccl":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=backend)
    return dist, device


def write(path: str, doc: dict[str, Any]) -> None:
    """A document for the launcher (``--out``, ``--facts``), whole or not at all."""
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    os.replace(tmp, path)


def leave() -> None:
    """The work is done and written: leave without finalizing the interpreter. Tearing torch
    down costs a rank about half a second on these machines, and a DDP worker of torch 2.13
    with gloo aborted in about 1 of 20 such exits ("terminate called without an active
    exception") while C++ objects were destroyed."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(
    args: Any,
    worker: Callable[[Any], int],
    launch: Callable[[Any], dict[str, Any]],
    failed: Callable[[str], dict[str, Any]],
    name: str,
) -> int:
    """A launcher's main: a rank when ``--worker``, else rank 0's document (or ``failed``'s,
    with the exception's one line) on stdout; 1 when it carries an error or ``ok`` false, 143
    on SIGTERM (every rank stopped)."""
    if args.worker:
        return worker(args)
    try:
        doc = launch(args)
    except Terminated:
        sys.stderr.write("%s: terminated; its ranks stopped\n" % name)
        return 143
    except Exception as exc:  # torch missing, a rank not startable: data, not a traceback
        doc = failed("%s: %s" % (type(exc).__name__, str(exc).strip().split("\n")[0]))
    print(json.dumps(doc, sort_keys=True))
    return 1 if doc.get("error") or doc.get("ok") is False else 0
