"""The doctor steps about what runs on this machine: the torch the environment's python
imports (and whether it is the locked runtime), CUDA and the driver, a DDP step, the ports."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from envtool import environments
from envtool.cluster import local
from envtool.doctor.steps import FAIL, PASS, TROUBLE, WARN, Step, quote
from envtool.errors import EnvtoolError
from envtool.judge import gpu
from envtool.judge.findings import Severity
from envtool.lock.lockfile import Lockfile
from envtool.models import Environment
from envtool.protocol.types import HostReport, NodeFacts
from envtool.report.labels import words


def _locked_env(lock: Lockfile | None, platform: str) -> Environment | None:
    if lock is None or not lock.for_platform(platform):
        return None
    return environments.from_lock(lock, "lock", platform)


def _imported(facts: NodeFacts) -> str:
    """What ``import torch`` loaded, and from where."""
    rt = facts.runtime
    build = f"CUDA {facts.cuda} build" if facts.cuda else "CPU-only build"
    where = os.path.dirname(rt.torch_file) if rt is not None and rt.torch_file else "?"
    python = f"python {facts.python}" + (f" ({rt.executable})" if rt is not None else "")
    return f"torch {facts.torch} ({build}) from {where}, {python}"


def torch(prefix: Path, lock: Lockfile | None, platform: str) -> tuple[Step, NodeFacts | None]:
    """``import torch`` with the environment's python (envtool_node.facts): what it loaded,
    from where, and whether that is the locked runtime (judge/runtime.py)."""
    from envtool.judge import runtime

    try:
        _, facts = local.facts(prefix)
    except EnvtoolError as exc:
        return Step(
            "torch", FAIL, f"the environment's python failed: {exc}", _activate(prefix)
        ), None
    if facts.torch is None:
        why = "; ".join(n for n in facts.notes if "torch" in n) or "torch cannot be imported"
        return Step("torch", FAIL, why, _activate(prefix)), facts
    locked = _locked_env(lock, platform)
    found = runtime.check(HostReport("localhost", facts=facts, prefix=str(prefix)), locked)
    if found:
        said = [(f.subject, words(f)) for f in found]
        differs = "; ".join(f"{s}: {w.actual}, expected {w.expected}" for s, w in said)
        return Step("torch", FAIL, f"{_imported(facts)}; {differs}", said[0][1].fix), facts
    if locked is None:
        return Step("torch", WARN, f"{_imported(facts)}; no lock to compare it with"), facts
    items = runtime.compared(facts, locked)
    same = ", ".join(i.subject for i in items if i.locked is not None and i.expected)
    summary = f"{_imported(facts)}; as locked: {same or 'nothing pinned'}"
    reasons: dict[str, list[str]] = {}  # what was not compared, and why
    for i in items:
        if i.locked is None or not i.expected:
            cpu = not facts.cuda and i.subject in ("NCCL", "cuDNN")
            why = "not loaded by a CPU-only build" if cpu else "not pinned in the lock"
            reasons.setdefault(why, []).append(i.subject)
    reasons_text = "; ".join(f"{', '.join(names)}: {why}" for why, names in reasons.items())
    return Step("torch", PASS, summary + (f" ({reasons_text})" if reasons_text else "")), facts


def _activate(prefix: Path) -> str:
    return (
        f"conda activate {quote(prefix)} (or run {quote(prefix / 'bin' / 'python')}); "
        f"see {TROUBLE}#module-not-found"
    )


def cuda(facts: NodeFacts, lock: Lockfile | None, platform: str, min_gpus: int) -> Step:
    """CUDA visible, enough devices, a driver new enough for the locked CUDA (judge/gpu.py)."""
    cuda_version = gpu.locked_cuda(_locked_env(lock, platform))
    policy = gpu.GpuPolicy(min_gpus, cuda_version)
    findings = gpu.check([HostReport("localhost", facts=facts)], policy)
    worst = [f for f in findings if f.severity is Severity.ERROR] or [
        f for f in findings if f.severity is Severity.WARNING
    ]
    if worst:
        status = FAIL if worst[0].severity is Severity.ERROR else WARN
        summary = "; ".join(f"{f.kind.value}: {words(f).actual}" for f in worst)
        fix = f"{words(worst[0]).fix}; see {TROUBLE}#cuda-not-available"
        return Step("cuda", status, summary, fix)
    if not facts.cuda_available:
        why = "; ".join(facts.notes) or "CUDA not available"
        return Step("cuda", PASS, f"no GPU required (--min-gpus {min_gpus}); {why}")
    names = sorted({d.name for d in facts.devices}) or ["?"]
    driver = f", driver {facts.driver}" if facts.driver else ""
    needs = f" (CUDA {cuda_version} needs >= {_driver_floor(cuda_version)})" if cuda_version else ""
    summary = f"{facts.device_count} x {', '.join(names)}{driver}{needs}"
    return Step("cuda", PASS, summary)


def _driver_floor(cuda_version: str) -> str:
    from envtool.judge.cuda import driver_floor

    floor = driver_floor(cuda_version)
    if floor is None:
        return "a driver this table does not know"
    return floor[1] or f"{floor[0]} (minor-version compatibility)"


def ddp(prefix: Path, nproc: int, timeout: float) -> Step:
    """A DDP training step across processes (envtool_node.ddp_smoke through torchrun)."""
    fix = f"see {TROUBLE} (blocked ports, NCCL, network interface); rerun with NCCL_DEBUG=INFO"
    try:
        result = local.ddp_smoke(prefix, nproc, timeout)
    except EnvtoolError as exc:
        return Step("ddp", FAIL, str(exc), fix)
    where = f"{result.nranks} ranks, {result.backend}"
    if result.error:
        return Step("ddp", FAIL, f"{where}: {result.error}", fix)
    failed = [name for name, ok in result.checks if not ok]
    if failed or not result.ok:
        return Step("ddp", FAIL, f"{where}: failed: {', '.join(failed) or 'no result'}", fix)
    summary = (
        f"forward/backward/all-reduce on {where}: gradients equal across ranks "
        f"(max diff {result.grad_max_diff:.1e}) and equal to the mean "
        f"of the ranks' gradients; parameters equal after a step"
    )
    return Step("ddp", PASS, summary)


def port_free(port: int) -> bool:
    """Nothing listens on ``port`` (what torchrun will bind): the node's own test, the one the
    store's node makes before torchrun (envtool_node.rendezvous.is_free: SO_REUSEADDR as
    TCPStore binds, so a finished run's connections in TIME_WAIT do not count)."""
    from envtool_node.rendezvous import is_free

    return is_free(port)


def free_port() -> int:
    """A port the kernel says is free now."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def ports(master_port: int | None, rdzv_port: int) -> Step:
    """MASTER_PORT (env, else 29500) and the c10d rendezvous port are free to bind."""
    if master_port is None:
        text = os.environ.get("MASTER_PORT", "29500")
        if not text.isdigit() or not 0 < int(text) < 65536:
            return Step(
                "ports", FAIL, f"MASTER_PORT={text!r} is not a port", "export MASTER_PORT=29500"
            )
        master_port = int(text)
    wanted = {"MASTER_PORT": master_port, "rendezvous port": rdzv_port}
    busy = [f"{label} {port}" for label, port in wanted.items() if not port_free(port)]
    if busy:
        fix = (
            f"export MASTER_PORT={free_port()} (torchrun: --master-port / --rdzv-endpoint "
            f"HOST:{free_port()}); see {TROUBLE}#blocked-master_port"
        )
        return Step("ports", FAIL, f"in use: {', '.join(busy)}", fix)
    return Step(
        "ports", PASS, f"MASTER_PORT {master_port} and rendezvous port {rdzv_port} are free"
    )
