"""What the node package writes: schema ids, part-failure kinds, the prefix's marker files.

The writer's side of the node protocol; envtool's reader (envtool/protocol/) imports these
names from here, so each id is spelled once. Python 3.9, standard library only.
"""

from __future__ import annotations

NODE = "envtool.node/1"  # python -m envtool_node: everything one node reports
FACTS = "envtool.gpu-facts/1"  # envtool_node.facts
ALLREDUCE = "envtool.allreduce/1"  # envtool_node.allreduce
EXPORT = "envtool.export/1"  # envtool_node.export
DDP_SMOKE = "envtool.ddp-smoke/1"  # envtool_node.ddp_smoke
RENDEZVOUS = "envtool.rendezvous/1"  # envtool_node.reach: the rendezvous from this node
LIMITS = "envtool.limits/1"  # envtool_node.limits: /dev/shm, ulimits, kernel, glibc
NETWORK = "envtool.network/1"  # envtool_node.network: interfaces, InfiniBand
FIX_NODE = "envtool.fix-node/1"  # a node's fix plan and what it did (envtool, or fixgen)

# A part of the node document that could not be made is {"error": TEXT, "kind": KIND}.
PART_ENV_MISSING = "env-missing"  # the prefix has no conda-meta/
PART_INCOMPLETE = "incomplete-install"  # the prefix carries INCOMPLETE_MARKER
PART_FAILED = "failed"  # anything else (the text says what)
PART_KINDS = (PART_ENV_MISSING, PART_INCOMPLETE, PART_FAILED)
# An all-reduce document without a result says why in "error", and may name a cause:
CAUSE_PORT_TAKEN = "rdzv-port-taken"  # the rendezvous port held by another process
# the run's token: the node script reads it from stdin and hands it to the node package in
# this variable (never argv); the node's rendezvous greetings carry it
TOKEN_VAR = "ENVTOOL_RUN_TOKEN"

# In a prefix from before `envtool install` starts until the whole install (conda + pip)
# succeeded: a prefix that has it is half-installed.
INCOMPLETE_MARKER = "conda-meta/envtool-incomplete"


def digits(text: str) -> bool:
    """``text`` is a whole number in ASCII digits, the only ones ``int`` is given here:
    ``str.isdigit`` also says yes to ``²``, on which ``int`` raises."""
    return text.isascii() and text.isdigit()
