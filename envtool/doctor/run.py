"""``envtool doctor``: the ordered checks of a user's own machine, each with its fix line.

Each step is composed from the modules that already do the work (lock freshness, install,
the export probe and the drift engine, the GPU facts probe and the GPU checks, a DDP smoke
test probe, the GPU layer and the network and limits read without torch); this module only
fixes their order, what a failed step skips, and the fixes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from envtool.doctor import hardware, machine, steps
from envtool.doctor.steps import FAIL, PASS, SKIP, WARN, Step
from envtool.lock.install import InstallOptions

__all__ = ["FAIL", "PASS", "SKIP", "WARN", "DoctorOptions", "Step", "exit_ok", "run"]


@dataclass(frozen=True)
class DoctorOptions:
    """What ``envtool doctor`` was asked to check."""

    lock_path: Path = Path("conda-lock.yml")
    prefix: Path | None = None
    platform: str = "linux-64"
    min_gpus: int = 1
    ddp: bool = True
    nproc: int = 2
    timeout: float = 180.0
    master_port: int | None = None  # default: $MASTER_PORT, else 29500
    rdzv_port: int = 29400
    mirrors: tuple[tuple[str, str], ...] = ()  # for --install: see lock/sources.py
    allow_insecure_url: bool = False


def _skipped(name: str, why: str) -> Step:
    return Step(name, SKIP, f"skipped: {why}")


def run(
    options: DoctorOptions,
    on_step: Callable[[Step], None],
    offer_install: Callable[[Path], bool],
    on_start: Callable[[str], None] = lambda what: None,
) -> list[Step]:
    """Every step in order; ``offer_install(prefix)`` says whether to install a missing env;
    ``on_start`` hears of each step that takes seconds before it starts."""
    done: list[Step] = []

    def emit(step: Step) -> None:
        done.append(step)
        on_step(step)

    lock_step, lock = steps.lockfile(options.lock_path, options.platform)
    emit(lock_step)

    def install(target: Path) -> Step:
        return steps.install_step(
            InstallOptions(options.lock_path, target, options.platform,
                           mirrors=options.mirrors, allow_insecure_url=options.allow_insecure_url)
        )  # fmt: skip

    env_step, prefix = steps.environment(
        options.lock_path, lock, options.prefix, install, offer_install
    )
    emit(env_step)
    if lock is None or prefix is None:
        emit(_skipped("packages", "needs the lock and the environment"))
    else:
        emit(steps.packages(options.lock_path, lock, prefix, options.platform))
    if prefix is None:
        emit(_skipped("consistency", "no environment to check"))
    else:
        emit(steps.consistency(prefix))
    facts = None
    if prefix is None:
        emit(_skipped("torch", "no environment to import it from"))
    else:
        on_start(f"torch: importing it with {prefix}/bin/python")
        torch_step, facts = machine.torch(prefix, lock, options.platform)
        emit(torch_step)
    if facts is None or facts.torch is None:
        emit(_skipped("cuda", "torch does not import"))
        emit(_skipped("ddp", "torch does not import"))
    else:
        emit(machine.cuda(facts, lock, options.platform, options.min_gpus))
        if not options.ddp:
            emit(_skipped("ddp", "--no-ddp"))
        else:
            assert prefix is not None
            on_start(f"ddp: a DDP step across processes (up to {options.timeout:.0f} s)")
            emit(machine.ddp(prefix, options.nproc, options.timeout))
    under = hardware.this_machine()  # the machine under the environment, without torch
    emit(hardware.gpus(under, options.min_gpus))
    emit(hardware.network(under))
    emit(machine.ports(options.master_port, options.rdzv_port))
    return done


def exit_ok(done: list[Step]) -> bool:
    """True when no step failed (warnings and skips after a pass do not fail the run)."""
    return not any(s.status == FAIL for s in done)
