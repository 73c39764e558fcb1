"""Every kind of finding in one table (its package rows in rules_packages.py): its check,
when it is an error or a warning, what it explains away, its fix line and its docs row
(docs/findings.md is generated from it by ``python -m envtool.report.findings_doc``; a test
keeps them equal).

``severity`` is the one function for a kind's exceptions (an ordinary package, ``--min-gpus 0``);
findings.explain applies the table's ``explains`` column: one cause, one finding.
"""

from __future__ import annotations

from dataclasses import replace

from envtool.judge.kinds import EVERYTHING, Check, Kind, Rule, Severity
from envtool.judge.rules_gpu import GPU_RULES
from envtool.judge.rules_history import HISTORY_RULES
from envtool.judge.rules_joblog import JOBLOG_RULES
from envtool.judge.rules_network import NETWORK_RULES
from envtool.judge.rules_packages import CONSISTENCY_RULES, LOCK_RULES

__all__ = ["EVERYTHING", "MACHINE", "RULES", "Rule", "check_of", "explains_check", "severity"]

# Each entry: check, severity, lenient; cause; fix line; docs' fix; what it explains away.
# fmt: off
RULES: dict[Kind, Rule] = {
    **LOCK_RULES,  # records, artifacts, specs: rules_packages.py
    Kind.DIFFERS_FROM_MAJORITY: Rule(
        Check.MAJORITY, Severity.ERROR, Severity.WARNING,
        "where the lock is silent: a node unlike the majority (more than half of the nodes agree)",
        "make {subject} match the other nodes",
        "make it match the others",
    ),
    Kind.DIFFERS_BETWEEN_NODES: Rule(
        Check.MAJORITY, Severity.ERROR, Severity.WARNING,
        "where the lock is silent and no majority exists (two nodes that differ, a 2–2 split): "
        "one finding lists each value with its nodes",
        "make {subject} the same on every node (or pin it in the lock)",
        "make it the same everywhere, or pin it in `environment.yml`",
    ),
    Kind.VERSION_MISMATCH: Rule(
        Check.MAJORITY, Severity.ERROR, None,
        "torch, torch's CUDA, cuDNN, NCCL or Python (as the node's python reports them), or the "
        "NCCL network plugins it would load (`libnccl-net*.so` on `LD_LIBRARY_PATH`, "
        "`NCCL_NET_PLUGIN`), unlike the other nodes; not reported for a node whose package or "
        "runtime finding already explains it (one cause, one finding); without a majority, one "
        "finding lists each value",
        "make {subject} match the other nodes",
        "re-install the node from the lock; install or remove the plugin on every node alike",
    ),
    Kind.SAME_MACHINE: Rule(
        Check.MAJORITY, Severity.ERROR, None,
        "two or more names of the host list reach one machine (an alias, a name and its "
        "address): their answers give one hostname and boot id (and one machine-id where both "
        "send one). A job launched on that list puts two nodes' ranks on one machine's GPUs; "
        "the comparisons between nodes and the counts count that machine once. Containers "
        "have their own hostname and stay apart; a node claiming another's ids only makes "
        "this finding, each node is still judged on its own answer",
        "list each machine once in --hosts",
        "list each machine once",
    ),
    Kind.GPU_COUNT_DIFFERS: Rule(
        Check.MAJORITY, Severity.WARNING, None,
        "fewer/more GPUs than the other nodes",
        "make {subject} match the other nodes",
        "check `CUDA_VISIBLE_DEVICES`, `nvidia-smi`",
    ),
    Kind.NCCL_ENV_DIFFERS: Rule(
        Check.MAJORITY, Severity.WARNING, None,
        "an `NCCL_*` variable differs across nodes (`NCCL_SOCKET_IFNAME`, `NCCL_IB_HCA`, ...)",
        "make {subject} match the other nodes",
        "set it the same everywhere",
    ),
    Kind.LOADER_ENV_DIFFERS: Rule(
        Check.MAJORITY, Severity.WARNING, None,
        "`LD_LIBRARY_PATH` or `LD_PRELOAD` differs between nodes: the loader may pick another "
        "NCCL, cuBLAS or libtorch on some of them (torch's `RUNPATH $ORIGIN` loses to "
        "`LD_LIBRARY_PATH`); where that changes what a rank loads, the runtime findings name "
        "the file",
        "set {subject} the same on every node (or unset it)",
        "set it the same everywhere, or unset it",
    ),
    Kind.CUDA_UNAVAILABLE: Rule(
        Check.GPU, Severity.ERROR, Severity.INFO,
        "`torch.cuda.is_available()` is false; the notes say why (no driver, CPU-only build, "
        "driver too old)",
        "see docs: CUDA not available (driver, CUDA_VISIBLE_DEVICES, build)",
        "see troubleshooting",
        frozenset({Kind.GPU_COUNT_DIFFERS, Kind.TOO_FEW_GPUS}),
    ),
    Kind.TOO_FEW_GPUS: Rule(
        Check.GPU, Severity.ERROR, None,
        "fewer GPUs than `--min-gpus`; under `preflight --quick --job-gpus LIST`, a GPU of the "
        "job's list that the node does not have (actual: how many of the job's GPUs it read)",
        "check CUDA_VISIBLE_DEVICES and nvidia-smi",
        "as above",
    ),
    Kind.DRIVER_TOO_OLD: Rule(
        Check.GPU, Severity.ERROR, None,
        "driver below the minimum of the locked CUDA (11.8: 450.80.02)",
        "upgrade the NVIDIA driver",
        "upgrade the NVIDIA driver",
    ),
    Kind.DRIVER_MINOR_COMPAT: Rule(
        Check.GPU, Severity.WARNING, None,
        "driver between the minimum and full support (11.8: 520.61.05)",
        "works through minor-version compatibility; upgrade for full support",
        "works with limited features; upgrade for full support",
    ),
    Kind.ALLREDUCE_FAILED: Rule(
        Check.ALLREDUCE, Severity.ERROR, None,
        "the all-reduce did not complete: rendezvous unreachable, port blocked, NCCL error, "
        "deadline",
        "see docs: blocked MASTER_PORT, wrong interface (NCCL_SOCKET_IFNAME)",
        "check `MASTER_PORT`/rendezvous port, firewall, `NCCL_SOCKET_IFNAME`",
    ),
    Kind.RDZV_PORT_TAKEN: Rule(
        Check.ALLREDUCE, Severity.ERROR, None,
        "the rendezvous port on the node that hosts envtool's store (the first host; a pair's "
        "first node) is held by another process, named with its user and, where visible, pid: "
        "envtool does not run its all-reduce through a store it does not own. The other nodes' "
        "failures follow from it",
        "pick a free port: --rdzv-endpoint HOST:PORT (or stop the process holding it)",
        "choose a free port with `--rdzv-endpoint HOST:PORT`, or stop the holder",
        frozenset({Kind.ALLREDUCE_FAILED}),
        by_subject=True,  # the run's ("all-reduce") or the pair's ("a <-> b") failures
        whole_run=True,
    ),
    Kind.ALLREDUCE_WRONG: Rule(
        Check.ALLREDUCE, Severity.ERROR, None,
        "the all-reduce returned wrong elements (`#wrong` > 0)",
        "results are corrupted: check GPUs, NCCL version and P2P",
        "check GPUs, NCCL versions, `NCCL_P2P_DISABLE`",
    ),
    Kind.BUSBW_LOW: Rule(
        Check.ALLREDUCE, Severity.ERROR, None,
        "busbw below `--min-busbw` or more than `--tolerance` below `--baseline`",
        "check NVLink/IB, NCCL_* variables",
        "check NVLink/InfiniBand, `NCCL_*` variables, topology",
    ),
    Kind.SLOW_NODE: Rule(
        Check.ALLREDUCE, Severity.ERROR, None,
        "`--allreduce pairs`: every pair this node is part of is slow (below a third of the other "
        "pairs' median busbw, `--min-busbw`, or the `--baseline` tolerance); the finding lists "
        "its pairs' figures",
        "check that node's NIC, cable and switch port (ethtool, ibstat), and its NCCL_* variables",
        "check that node's NIC, cable, switch port (`ethtool`, `ibstat`) and its `NCCL_*` "
        "variables",
    ),
    Kind.SLOW_LINK: Rule(
        Check.ALLREDUCE, Severity.ERROR, None,
        "`--allreduce pairs`: one pair is slow while neither of its nodes is: the path between "
        "those two",
        "check the path between those two nodes: cables, switch ports, routes",
        "check the cables, switch ports and routes between them",
    ),
    Kind.UNREACHABLE: Rule(
        Check.REACHABLE, Severity.ERROR, None,
        "ssh failed, timed out, or the node could not run the bundle (no temp dir, a refused "
        "`--bundle-dir`, no python), or it printed more than `--max-output` and was stopped; a "
        "host's own name in the message reads `<host>`, so identical failures fold",
        "check ssh access, the node and --timeout",
        "check ssh access and `--timeout`; the message says which",
        EVERYTHING,
    ),
    Kind.PROBE_FAILED: Rule(
        Check.REACHABLE, Severity.ERROR, None,
        "the node answered, but a part of its answer failed or was garbage (not JSON, a NaN or an "
        "integer too large to be a measurement, a wrong type), or, on Slurm, its answer names "
        "another node or came twice",
        "run the probe on the node by hand (envtool probe)",
        "run `envtool probe` on the node by hand",
    ),
    Kind.ENV_MISSING: Rule(
        Check.REACHABLE, Severity.ERROR, None,
        "no conda environment where envtool looked: with `--prefix`, that prefix has no "
        "`bin/python` (or no `conda-meta/`); else no environment of the lock's name (its "
        "`environment.yml`'s `name`) in conda's env dirs nor at `$CONDA_PREFIX`. The finding "
        "lists what was searched; no other python is probed in its place. What the node read "
        "of its machine without the environment (the GPUs, the network, the limits) is still "
        "judged and listed beside it: a held or lost GPU does not follow from a missing "
        "environment",
        "envtool install --lockfile conda-lock.yml --prefix PREFIX on the node (or pass --prefix)",
        "`envtool install ... --prefix PREFIX` on the node, or pass `--prefix`",
        EVERYTHING,  # less the machine's kinds (MACHINE, below)
    ),
    Kind.NOT_CHECKED: Rule(
        Check.REACHABLE, Severity.ERROR, None,
        "a check that was asked for could not run on that node: its answer holds no GPU facts "
        "under `--min-gpus N`, or no all-reduce result under `--allreduce node`, and no part of "
        "it failed to say why; \"all good\" never rests on a check that did not happen",
        "run envtool probe on the node by hand: its answer lacks what was asked",
        "run `envtool probe` on the node by hand",
    ),
    Kind.RUNTIME_DIFFERS: Rule(
        Check.RUNTIME, Severity.ERROR, None,
        "what the environment's python really runs is not what the lock pins: the interpreter's "
        "version vs the locked `python`; `torch.__version__` vs the locked `pytorch`/pip `torch`; "
        "`torch.version.cuda` vs the CUDA the locked build names (`cuda118_*` → 11.8, `+cu121` → "
        "12.1, `cpu_*` → none); the NCCL library mapped into the process (its own "
        "`ncclGetVersion`) vs the locked `nccl` or `nvidia-nccl-cuXX`; cuDNN vs the locked "
        "`cudnn`; a mapped cuBLAS (`cublasGetProperty`) vs the locked `libcublas` or "
        "`nvidia-cublas-cuXX` (cuBLAS loads on first use: not mapped says nothing). Not "
        "reported where a package finding on that node already explains it, or where the file "
        "came from outside the prefix (that finding says why)",
        "",
        "install the locked environment (`envtool install`) and run its own `bin/python`",
    ),
    Kind.LOADED_OUTSIDE: Rule(
        Check.RUNTIME, Severity.ERROR, None,
        "the interpreter (its `sys.prefix`), torch, or a library a locked package ships (libtorch "
        "and libc10, cuBLAS, cuDNN and its parts, NCCL, the CUDA runtime) was loaded from "
        "outside the probed prefix; the finding names the file, its version and what put it "
        "there: another interpreter, `PYTHONPATH`, the user site (`~/.local`), another "
        "`sys.path` entry (a `.pth` file), `LD_PRELOAD`, `LD_LIBRARY_PATH`, or the loader itself "
        "(RPATH, `ld.so.conf`, system folders). A library beside a linked torch (the prefix's "
        "`torch` a symlink) or reached through the prefix's own softlink counts as the prefix's; "
        "torch from elsewhere explains the libtorch/libc10 beside it",
        "",
        "`unset PYTHONPATH`; `export PYTHONNOUSERSITE=1` or `pip uninstall --user torch`; remove "
        "the `.pth` entry; `unset LD_PRELOAD`; drop the folder from `LD_LIBRARY_PATH`",
    ),
    Kind.LOADED_TWICE: Rule(
        Check.RUNTIME, Severity.ERROR, None,
        "two copies of one library (NCCL, libc10, cuDNN, ...) mapped into one process, e.g. "
        "`LD_PRELOAD` beside the one torch links: the first wins symbol lookup; or cuDNN's parts "
        "(`libcudnn_ops`, ...) from another folder or version than its main `libcudnn` (two "
        "installs, e.g. a pip wheel's beside conda's)",
        "",
        "`unset LD_PRELOAD`, or drop the other copy's folder from `LD_LIBRARY_PATH`",
    ),
    **CONSISTENCY_RULES,  # one environment on its own: rules_packages.py
    **GPU_RULES,  # the cards: rules_gpu.py
    **NETWORK_RULES,  # the network and the limits: rules_network.py
    **JOBLOG_RULES,  # what only a failed job's log shows (envtool explain): rules_joblog.py
    **HISTORY_RULES,  # a node against the fleet's history (--history): rules_history.py
}
# fmt: on

# what a node reads of its machine without the environment (cluster/here, the node package's
# gpus, network and limits parts): a missing environment explains none of it
MACHINE = frozenset(
    {*GPU_RULES, *NETWORK_RULES} - {Kind.GPU_ARCH_UNSUPPORTED}  # torch's arch list: the env's
)
RULES[Kind.ENV_MISSING] = replace(RULES[Kind.ENV_MISSING], explains=EVERYTHING - MACHINE)


def explains_check(kind: Kind, check: Check) -> bool:
    """Whether ``kind`` explains every finding of ``check`` on its hosts (that check did not
    run there: JUnit's <skipped>)."""
    return all(k in RULES[kind].explains for k, r in RULES.items() if r.check is check)


def check_of(kind: Kind) -> Check:
    """The check a kind belongs to (a JUnit testcase per host and check)."""
    return RULES[kind].check


def severity(kind: Kind, ordinary: bool = False) -> Severity:
    """A kind's severity; ``ordinary``: about a package that does not decide a DDP run, or a
    check that was not asked for (``--min-gpus 0``)."""
    rule = RULES[kind]
    return rule.lenient if ordinary and rule.lenient is not None else rule.severity
