"""Where a locked environment lives: its name, conda's env dirs, the unfinished-install marker.

One home for what verify (the node script's search), doctor (this machine's search) and
install (the marker) share.
"""

from __future__ import annotations

import os
from pathlib import Path

from envtool.errors import InputError, ProblemFound
from envtool.lock.lockfile import Lockfile
from envtool_node.schema import INCOMPLETE_MARKER

__all__ = [
    "ENV_DIRS", "INCOMPLETE_MARKER", "candidates", "env_name", "incomplete", "locate",
    "source_env",
]  # fmt: skip

# Conda's usual env dirs, searched for the env named in environment.yml ($HOME expanded by the
# node's shell, or by os.path.expandvars on this machine).
ENV_DIRS = (
    "$HOME/miniforge3/envs",
    "$HOME/mambaforge/envs",
    "$HOME/miniconda3/envs",
    "$HOME/anaconda3/envs",
    "$HOME/.conda/envs",
    "/opt/conda/envs",
    "/opt/miniforge3/envs",
)


def source_env(lock_path: Path, data: Lockfile) -> Path | None:
    """The environment file the lock was solved from (its ``sources``), if it is there."""
    for source in data.metadata.sources:
        candidate = lock_path.parent / source
        if candidate.name.endswith((".yml", ".yaml")) and candidate.is_file():
            return candidate
    return None


def env_name(lock_path: Path | None, data: Lockfile | None = None) -> str:
    """The ``name`` of the environment.yml the lock was solved from; "" when unknown."""
    from envtool.lock import lockfile, spec

    if lock_path is None or not lock_path.is_file():
        return ""
    try:
        env_path = source_env(lock_path, data or lockfile.read(lock_path))
        return spec.read_env(env_path).name if env_path is not None else ""
    except InputError:
        return ""


def candidates(name: str) -> list[Path]:
    """Where conda keeps an env called ``name`` on this machine, then ``$CONDA_PREFIX``."""
    found = [Path(os.path.expandvars(d)) / name for d in ENV_DIRS]
    if os.environ.get("CONDA_PREFIX"):
        found.append(Path(os.environ["CONDA_PREFIX"]))
    return found


def incomplete(prefix: Path) -> bool:
    """The prefix carries the marker of an ``envtool install`` that did not finish."""
    return (prefix / INCOMPLETE_MARKER).exists()


def locate(prefix: Path | None, lock_path: Path = Path("conda-lock.yml")) -> Path:
    """The environment a command on this machine works on (probe, export): ``--prefix``, else
    the activated one (``$CONDA_PREFIX``), else the lock's env by name in conda's env dirs.
    Nothing else stands in for it (envtool's own venv would "load" its own torch):
    ProblemFound saying what was looked for."""
    if prefix is not None:
        return prefix
    if os.environ.get("CONDA_PREFIX"):
        return Path(os.environ["CONDA_PREFIX"])
    name = env_name(lock_path) if lock_path.is_file() else ""
    if name:
        for found in candidates(name):
            if (found / "conda-meta").is_dir():
                return found
    if not name:
        raise ProblemFound(
            f"no environment to look at: no --prefix, $CONDA_PREFIX is unset and no {lock_path} "
            "here names one: pass --prefix, or activate the environment"
        )
    dirs = ", ".join(os.path.expandvars(d) for d in ENV_DIRS)
    raise ProblemFound(
        f"no environment {name!r} (the lock's) in {dirs}, and $CONDA_PREFIX is unset: "
        "pass --prefix, or activate the environment"
    )
