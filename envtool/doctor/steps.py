"""The steps of ``envtool doctor``: each one check of this machine, a ✓/✗ line and its fix."""

from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envtool import environments
from envtool.cluster import local
from envtool.errors import EnvtoolError, InputError
from envtool.judge import gpu
from envtool.judge.findings import Severity
from envtool.lock import prefixes
from envtool.lock.install import InstallOptions
from envtool.lock.lockfile import Lockfile
from envtool.lock.lockfile import read as read_lock
from envtool.models import Environment
from envtool.protocol.types import HostReport, NodeFacts
from envtool.report.labels import words

PASS, FAIL, WARN, SKIP = "pass", "fail", "warn", "skip"
TROUBLE = "docs/troubleshooting.md"


@dataclass(frozen=True)
class Step:
    """One line of the doctor's report."""

    name: str  # lockfile | environment | packages | consistency | torch | cuda | ddp | ports
    status: str  # pass | fail | warn | skip
    summary: str
    fix: str = ""


def _q(path: Path | str) -> str:
    return shlex.quote(str(path))


def _relock(lock_path: Path, env_path: Path) -> str:
    return f"envtool lock -f {_q(env_path)} --lockfile {_q(lock_path)}"


def lockfile(lock_path: Path, platform: str) -> tuple[Step, Lockfile | None]:
    """The lock exists, parses, has the platform, and is fresh against its environment.yml."""
    from envtool.lock import pin

    env_guess = lock_path.parent / "environment.yml"
    if not lock_path.is_file():
        fix = (
            _relock(lock_path, env_guess)
            if env_guess.is_file()
            else "get the lab's environment.yml and conda-lock.yml: git clone the lab's repo"
        )
        return Step("lockfile", FAIL, f"{lock_path} not found", fix), None
    try:
        data = read_lock(lock_path)
    except InputError as exc:
        return Step("lockfile", FAIL, str(exc), _relock(lock_path, env_guess)), None
    count = len(data.for_platform(platform))
    if not count:
        have = ", ".join(data.metadata.platforms) or "none"
        fix = f"{_relock(lock_path, env_guess)} -p {platform}"
        return Step("lockfile", FAIL, f"{lock_path} has no {platform} packages ({have})", fix), None
    env_path = prefixes.source_env(lock_path, data)
    if env_path is None:
        summary = f"{lock_path}: {count} packages for {platform}; no environment.yml to check"
        return Step("lockfile", WARN, summary, "keep environment.yml beside the lock"), data
    try:
        result = pin.check(env_path, lock_path)
    except InputError as exc:
        return Step("lockfile", FAIL, str(exc), f"fix {env_path}, then re-lock"), data
    if platform in result.stale:
        summary = f"{lock_path} is stale: {env_path} changed since it was locked"
        return Step("lockfile", FAIL, summary, _relock(lock_path, env_path)), data
    summary = f"{lock_path}: {count} packages for {platform}, fresh against {env_path}"
    return Step("lockfile", PASS, summary), data


def install_fix(lock_path: Path, prefix: Path) -> str:
    """``envtool install`` for this prefix, and the conda-lock equivalent."""
    return (
        f"envtool install --lockfile {_q(lock_path)} --prefix {_q(prefix)}"
        f"   (or: conda-lock install --prefix {_q(prefix)} {_q(lock_path)})"
    )


def environment(
    lock_path: Path,
    lock: Lockfile | None,
    prefix: Path | None,
    install: Callable[[Path], Step],
    offer_install: Callable[[Path], bool],
) -> tuple[Step, Path | None]:
    """The environment is installed where it is expected (offering to ``install`` it)."""
    name = prefixes.env_name(lock_path, lock) or "ddp"
    looked = [prefix] if prefix is not None else prefixes.candidates(name)
    found = next((p for p in looked if (p / "conda-meta").is_dir()), None)
    if found is not None and prefixes.incomplete(found):
        summary = f"{found}: an envtool install into it did not finish"
        return Step("environment", FAIL, summary, install_fix(lock_path, found)), found
    if found is not None:
        return Step("environment", PASS, f"{name} at {found}"), found
    target = prefix or Path(os.path.expanduser(f"~/.conda/envs/{name}"))
    where = ", ".join(str(p) for p in looked[:3]) + (", ..." if len(looked) > 3 else "")
    summary = f"no {name} environment (looked in {where})"
    if lock is None or not offer_install(target):
        return Step("environment", FAIL, summary, install_fix(lock_path, target)), None
    step = install(target)
    return step, (target if step.status == PASS else None)


def install_step(options: InstallOptions) -> Step:
    """``envtool install`` of the lock into a missing environment, as a step."""
    from envtool.lock.install import install

    lock_path, target = options.lock_path, options.prefix
    try:
        done = install(options)
    except EnvtoolError as exc:
        return Step("environment", FAIL, f"install failed: {exc}", install_fix(lock_path, target))
    summary = f"installed {done.conda + done.pip} packages into {target} ({done.seconds:.1f} s)"
    return Step("environment", PASS, summary)


def packages(lock_path: Path, lock: Lockfile, prefix: Path, platform: str) -> Step:
    """The installed packages against the lock (the drift engine), pip shadowing included."""
    from envtool.judge import packages as compare

    try:
        env = environments.from_prefix(prefix)
    except EnvtoolError as exc:
        return Step(
            "packages", FAIL, f"cannot read {prefix}: {exc}", install_fix(lock_path, prefix)
        )
    reference = environments.from_lock(lock, str(lock_path), platform)
    findings = compare.diff(reference, env)
    errors = [f for f in findings if f.severity is Severity.ERROR]
    shown = "; ".join(
        f"{f.kind.value} {f.subject} ({words(f).actual})" for f in (errors or findings)[:3]
    )
    more = f" and {len(errors or findings) - 3} more" if len(errors or findings) > 3 else ""
    if errors:
        shadow = [words(f).fix for f in errors if f.kind.value == "pip-shadowing"]
        fix = "; ".join(shadow) if len(shadow) == len(errors) else install_fix(lock_path, prefix)
        summary = f"{len(errors)} differences from the lock: {shown}{more}"
        return Step("packages", FAIL, summary, fix)
    if findings:
        summary = f"matches the lock, plus {len(findings)} not in it: {shown}{more}"
        fix = "remove them, or add them to environment.yml and re-lock"
        return Step("packages", WARN, summary, fix)
    return Step("packages", PASS, f"all {len(env.packages)} packages match the lock")


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


def consistency(prefix: Path) -> Step:
    """The installed environment on its own: two torches, CUDA majors mixed, two NCCLs, ...
    (judge/consistency.py, what ``envtool check PREFIX`` says)."""
    from envtool.judge import consistency as rules

    try:
        env = environments.from_prefix(prefix)
    except EnvtoolError as exc:
        return Step("consistency", FAIL, f"cannot read {prefix}: {exc}")
    found = rules.check(env)
    if not found:
        return Step("consistency", PASS, f"one torch, one CUDA major, one NCCL in {prefix}")
    said = [words(f) for f in found]
    summary = "; ".join(f"{f.kind.value}: {w.actual}" for f, w in zip(found, said, strict=True))
    return Step("consistency", FAIL, summary, said[0].fix)


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
        f"conda activate {_q(prefix)} (or run {_q(prefix / 'bin' / 'python')}); "
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
    """Nothing listens on ``port`` and this user may bind it (what torchrun will do)."""
    with socket.socket() as sock:
        sock.settimeout(0.5)
        if sock.connect_ex(("127.0.0.1", port)) == 0:
            return False
    with socket.socket() as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


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
