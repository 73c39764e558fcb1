"""``envtool preflight``: verify at the top of a Slurm job script, inside the allocation."""

from __future__ import annotations

import os
from dataclasses import replace

from envtool.commands import verify
from envtool.errors import InputError
from envtool.report import console


def run(args: verify.VerifyArgs) -> int:
    """verify over ``--transport slurm`` on the allocation's nodes; a failure says the job
    stops before training starts."""
    if not os.environ.get("SLURM_JOB_ID"):
        raise InputError(
            "preflight runs inside a Slurm allocation (sbatch/salloc): SLURM_JOB_ID is not set"
        )
    args = replace(
        args, hosts_spec=None, fanout=replace(args.fanout, transport="slurm"), command="preflight"
    )
    code = verify.run(args)
    if code != 0:
        console.notice(
            "envtool preflight: this allocation's nodes are not ready for the job "
            "(see the findings above); stopping before training starts."
        )
    return code
