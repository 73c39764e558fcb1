"""Every schema id and the node script's exit codes: the names both ends of the protocol use."""

from __future__ import annotations

from envtool_node import schema as _node

# What the node package prints (spelled in envtool_node/schema.py, the writer).
NODE = _node.NODE
FACTS = _node.FACTS
ALLREDUCE = _node.ALLREDUCE
EXPORT = _node.EXPORT
DDP_SMOKE = _node.DDP_SMOKE
RENDEZVOUS = _node.RENDEZVOUS  # a part of the node document
LIMITS = _node.LIMITS  # a part of the node document
NETWORK = _node.NETWORK
# What envtool prints.
PROBE = "envtool.probe/1"  # envtool probe --format json
VERIFY = "envtool.verify/1"  # envtool verify --format json
DIFF = "envtool.diff/1"  # envtool diff --format json
CHECK = "envtool.check/1"  # envtool check --format json
NCCL_TESTS = "envtool.nccl-tests/1"  # envtool nccl-tests --format json
DOCTOR = "envtool.doctor/1"  # envtool doctor --format json
EXPLAIN = "envtool.explain/1"  # envtool explain --format json
COLLECT = "envtool.collect/1"  # envtool collect: DEST/JOBID/HOST/collect.json
FIX_NODE = _node.FIX_NODE  # envtool fix --here (or envtool_node.fixgen): one node's answer
FIX = "envtool.fix/1"  # envtool fix --format json
HISTORY = "envtool.history/1"  # envtool history --format json
HISTORY_DIFF = "envtool.history-diff/1"  # envtool history diff --format json
ALL = (NODE, FACTS, ALLREDUCE, EXPORT, DDP_SMOKE, PROBE, VERIFY, DIFF, CHECK, NCCL_TESTS, DOCTOR,
       EXPLAIN, COLLECT, FIX_NODE, FIX, HISTORY, HISTORY_DIFF)  # fmt: skip

# Part failures inside a node document.
PART_ENV_MISSING = _node.PART_ENV_MISSING
PART_INCOMPLETE = _node.PART_INCOMPLETE
PART_FAILED = _node.PART_FAILED
CAUSE_PORT_TAKEN = _node.CAUSE_PORT_TAKEN  # an all-reduce document's cause
TOKEN_VAR = _node.TOKEN_VAR  # the run's token on the node (from stdin, never argv)

# The node script's own exit codes (cluster/nodescript.py exits with them).
EXIT_BUNDLE_UNTRUSTED = 95  # a --bundle-dir that is not the user's, or not what envtool sent
EXIT_ENV_MISSING = 96  # the prefix has no bin/python
EXIT_NO_TEMP_DIR = 97  # mktemp failed
EXIT_NO_BUNDLE = 98  # the bundle did not unpack
EXIT_NO_PYTHON = 99  # no interpreter at all
# What others exit with on the node's side.
EXIT_TIMEOUT = 124  # GNU timeout: the node's own deadline passed
EXIT_KILLED = 137  # SIGKILL (timeout -k, the OOM killer)
EXIT_SSH = 255  # ssh could not connect or the connection failed

# The line the node script writes on stderr before it exits 96: MARKER KIND PATH.
MARKER = "envtool-node:"

# The largest node document believed, however it arrived (--max-output may not exceed it).
MAX_DOCUMENT = 64 * 1024 * 1024
