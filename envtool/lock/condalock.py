"""The ``--solver conda-lock`` backend: the real conda-lock CLI with an explicit conda binary."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from envtool import private, proc, yamlio
from envtool.errors import InputError, SolveError
from envtool.lock import lockfile
from envtool.lock.lockfile import LockedPackage
from envtool.lock.solve import SolveRequest, canonical_url, source_channel

CONDA_LOCK_TIMEOUT = 900.0


def conda_lock_exe() -> str:
    """The ``conda-lock`` beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "conda-lock"
    found = str(beside) if beside.exists() else shutil.which("conda-lock")
    if not found:
        raise InputError(
            "--solver conda-lock: the conda-lock CLI is not installed (pip install conda-lock)"
        )
    return found


@dataclass(frozen=True)
class CondaLockSolver:
    """Writes a conda-only copy of the inputs, runs ``conda-lock lock``, reads its v1 file."""

    conda_exe: Path

    def solve(self, request: SolveRequest) -> list[LockedPackage]:
        """Solve with conda-lock; mirrors are read from and canonical URLs recorded."""
        if not self.conda_exe.is_file():
            raise InputError(f"--conda {self.conda_exe}: no such executable")
        with private.tempdir("envtool-conda-lock-") as work:
            argv = [
                conda_lock_exe(),
                "lock",
                "--conda",
                str(self.conda_exe.resolve()),
                "-f",
                str(self._write_env(request, work)),
                "--virtual-package-spec",
                str(self._write_virtual(request, work)),
                "--lockfile",
                str(work / "conda-lock.yml"),
            ]
            for platform in request.platforms:
                argv += ["-p", platform]
            try:
                proc.run(argv, timeout=CONDA_LOCK_TIMEOUT, cwd=str(work))
            except proc.ProcessError as exc:
                raise SolveError(f"{request.env.path}: conda-lock failed: {exc}") from None
            solved = lockfile.read(work / "conda-lock.yml")
        return [
            replace(p, url=canonical_url(p.url, request.env.channels, request.mirrors))
            for p in solved.packages
            if p.manager == "conda"
        ]

    @staticmethod
    def _write_env(request: SolveRequest, work: Path) -> Path:
        env = {
            "name": request.env.name,
            "channels": [source_channel(c, request.mirrors) for c in request.env.channels],
            "dependencies": [d.spec for d in request.env.conda],
        }
        path = work / "environment.yml"
        path.write_text(yamlio.dumps(env))
        return path

    @staticmethod
    def _write_virtual(request: SolveRequest, work: Path) -> Path:
        subdirs = {
            platform: {
                "packages": {
                    v.name: v.version if v.build == "0" else f"{v.version} {v.build}"
                    for v in request.virtual.get(platform, ())
                }
            }
            for platform in request.platforms
        }
        path = work / "virtual-packages.yml"
        path.write_text(yamlio.dumps({"subdirs": subdirs}))
        return path
