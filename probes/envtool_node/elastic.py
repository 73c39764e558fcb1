"""torchrun for a run across nodes, with the processes per node counted by its own torch.

    python -m envtool_node.elastic [--backend auto|nccl|gloo] [--nproc N] -- TORCHRUN_ARGS...

torchrun imports torch anyway; counting the GPUs here, in the same process, saves the
launcher an import of its own. ``--nproc-per-node`` is one per GPU with NCCL (``auto`` where
CUDA works), else ``--nproc`` or 2 on the CPU.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Parse the two options by hand, then run torchrun's own main with the rest."""
    args = list(sys.argv[1:] if argv is None else argv)
    backend, nproc = "auto", 0
    while args and args[0] != "--":
        option = args.pop(0)
        if option in ("--backend", "--nproc") and args:
            value = args.pop(0)
            if option == "--backend":
                backend = value
            else:
                nproc = int(value)
        else:
            sys.stderr.write("envtool_node.elastic: unknown argument %r\n" % option)
            return 2
    from torch.distributed import run

    from .rank import plan

    count = plan(backend, nproc)[2]
    if count < 1:
        sys.stderr.write("envtool_node.elastic: no GPU for the nccl backend on this node\n")
        return 2
    run.main(["--nproc-per-node", str(count), *args[1:]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
