"""The rows of the findings table (rules.py) about packages: an environment against the lock
(records, artifacts, specs), and one environment on its own (``envtool check``). Same columns
as rules.py: check, severity, lenient; cause; fix line; docs' fix; what it explains away."""

from __future__ import annotations

from envtool.judge.kinds import Check, Kind, Rule, Severity

# fmt: off
LOCK_RULES: dict[Kind, Rule] = {
    Kind.MISSING: Rule(
        Check.LOCK, Severity.ERROR, None,
        "a locked package is not installed on the node",
        "",
        "`envtool install --lockfile conda-lock.yml --prefix PREFIX` on the node",
    ),
    Kind.RECORD_UNREADABLE: Rule(
        Check.LOCK, Severity.ERROR, None,
        "a `conda-meta/*.json` record conda ignores (its file name is not its "
        "`name-version-build`, e.g. a version holding `-`): the finding names the file, and the "
        "package is not also reported `missing`",
        "reinstall {subject} (conda ignores that record), or remove the file",
        "reinstall the package; remove the stray record",
        frozenset({Kind.MISSING, Kind.VERSION_DIFFERS, Kind.BUILD_DIFFERS}), True,
    ),
    Kind.EXTRA: Rule(
        Check.LOCK, Severity.WARNING, None,
        "installed on the node, not in the lock",
        "",
        "remove it, or add it to `environment.yml` and re-lock",
    ),
    Kind.VERSION_DIFFERS: Rule(
        Check.LOCK, Severity.ERROR, Severity.WARNING,
        "another version than the lock's",
        "",
        "re-install from the lock",
    ),
    Kind.BUILD_DIFFERS: Rule(
        Check.LOCK, Severity.ERROR, Severity.WARNING,
        "same version, another build — typically `cpu_*` instead of `cuda118_*` pytorch (a solve "
        "without `__cuda`, or a pip wheel)",
        "",
        "re-install from the lock; check the node's `CONDA_OVERRIDE_CUDA`",
    ),
    Kind.CHANNEL_DIFFERS: Rule(
        Check.LOCK, Severity.WARNING, None,
        "the same package from another channel (a mirror, `defaults`); for a package that "
        "decides a DDP run (pytorch, nccl, cudatoolkit, ...) also beside another version",
        "",
        "install from the lock's channel",
    ),
    Kind.MANAGER_DIFFERS: Rule(
        Check.LOCK, Severity.ERROR, Severity.WARNING,
        "conda on one side, pip on the other",
        "",
        "install it with the lock's manager",
    ),
    Kind.PIP_SHADOWING: Rule(
        Check.LOCK, Severity.ERROR, Severity.WARNING,
        "a pip distribution over the conda one (`pip install torch` over conda `pytorch`): "
        "`import torch` gets pip's",
        "pip uninstall {subject}",
        "`pip uninstall torch`",
    ),
    Kind.ARTIFACT_DIFFERS: Rule(
        Check.LOCK, Severity.ERROR, None,
        "the lock's name, version and build, but another file: its sha256 (md5 when that is all "
        "both sides carry) is not the lock's — a rebuilt or re-uploaded package, a mirror serving "
        "another file, a local build. Pip distributions are compared where pip recorded the "
        "file's hash (`direct_url.json`, as `envtool install` leaves it); one installed from an "
        "index carries none and is not compared",
        "",
        "reinstall it from the lock's URL (`envtool install`)",
    ),
    Kind.SPEC_UNMET: Rule(
        Check.LOCK, Severity.ERROR, Severity.WARNING,
        "a spec of a spec list (`conda env export --from-history`, an export edited to bare "
        "names: `numpy`, `python=3.9`, `pytorch::pytorch>=2`) that the other side's package "
        "does not meet: absent, another version, build or channel, or the other manager. A "
        "package no spec names is fine",
        "re-lock so that {subject} meets the spec (envtool lock), or change the spec",
        "re-lock from the specs (`envtool lock -f`), or change the spec",
    ),
}

CONSISTENCY_RULES: dict[Kind, Rule] = {
    Kind.TWO_TORCHES: Rule(
        Check.CONSISTENCY, Severity.ERROR, None,
        "conda's `pytorch` and pip's `torch` in one environment (`envtool check`; in verify the "
        "lock's `pip-shadowing` says it when the lock has the conda one)",
        "",
        "`pip uninstall torch`, or drop pytorch from conda",
    ),
    Kind.CUDA_MIXED: Rule(
        Check.CONSISTENCY, Severity.ERROR, None,
        "packages naming two CUDA majors in one environment: `cudatoolkit`, `cuda-version`, the "
        "split `cuda-*` packages, `pytorch-cuda`, the torch build (`cuda118_*`, `+cu121`), "
        "`nvidia-*-cuXX` wheels; one process cannot load libraries of both",
        "",
        "keep one major: re-lock, remove the other major's packages or wheels",
    ),
    Kind.CUDA_VERSION_MISMATCH: Rule(
        Check.CONSISTENCY, Severity.ERROR, None,
        "`cuda-version` X.Y beside CUDA runtime packages of another minor of that major "
        "(`cuda-version 12.9` with `cuda-runtime 12.4.1`): a mix conda would not solve",
        "",
        "install the CUDA packages of that `cuda-version`, or re-lock",
    ),
    Kind.TWO_NCCLS: Rule(
        Check.CONSISTENCY, Severity.ERROR, None,
        "conda's `nccl` and a `nvidia-nccl-cuXX` wheel (or two wheels): which one a rank loads "
        "depends on load order",
        "",
        "keep the one torch needs",
    ),
    Kind.CUDA_STACKS_MIXED: Rule(
        Check.CONSISTENCY, Severity.ERROR, None,
        "conda-forge's pytorch/CUDA packages beside the pytorch channel's `pytorch-cuda` / "
        "`pytorch-mutex` / nvidia-channel `cuda-*` (needs channels: locks and prefixes carry "
        "them, exports do not); CPU builds (`pytorch-mutex=*=cpu`, `cpu_*`) carry no CUDA stack",
        "",
        "install pytorch and CUDA from one channel",
    ),
    Kind.OTHER_PYTHON: Rule(
        Check.CONSISTENCY, Severity.ERROR, None,
        "conda packages whose build names another Python than the environment's (`py38` in a 3.9 "
        "environment, `py3.8_cuda...`, `cp38`); an abi3 build (depending on `cpython >=3.10`, "
        "`_python_abi3_support`) runs on every Python from its floor",
        "",
        "re-install them for the environment's Python (re-lock)",
    ),
}
# fmt: on
