"""The words of the GPU layer's findings (judge/gpu_health.py): expected/actual/fix as a
report shows them, and the one-line Slurm drain reason of a node's findings."""

from __future__ import annotations

import re
from collections.abc import Iterable

from envtool.judge.findings import Finding, Kind, Severity
from envtool.judge.gpu_health import CAUSE_FAILURE, CAUSE_UNSEEN, SUBJECT_HEALTH
from envtool.judge.gpu_link import CAUSE_BY_DESIGN
from envtool.judge.rules import RULES
from envtool.judge.rules_gpu import ACTIONS, DRAINING
from envtool.judge.xid_catalog import Resolution

DRAIN_LIMIT = 80  # characters of a Slurm drain reason kept by this reader


def gpu_words(f: Finding) -> tuple[str, str, str] | None:
    """(expected, actual, fix) of a GPU-layer finding; None for other kinds."""
    if f.kind not in ACTIONS and not (f.kind is Kind.NOT_CHECKED and f.subject == SUBJECT_HEALTH):
        return None
    fix = RULES[f.kind].fix.format(subject=f.subject)
    if f.kind is Kind.NOT_CHECKED:
        fix = "install the NVIDIA driver and nvidia-smi on the node, or pass --min-gpus 0"
    elif f.kind is Kind.GPU_PCIE_DEGRADED and f.cause == CAUSE_BY_DESIGN:
        actual = f"{f.actual} on every node: the slots' width by design"
        return f.expected, actual, "nothing, unless the slots are wider (lspci -vv: LnkCap)"
    elif f.kind is Kind.GPU_BUSY and f.cause == CAUSE_UNSEEN:
        fix = ("find the job that holds it where its processes show (nvidia-smi on the host, "
               "outside this container or PID namespace), or use other GPUs")  # fmt: skip
        return f.expected, f"{f.subject}: {f.actual}", fix
    elif f.kind is Kind.GPU_BUSY:
        pids = ", ".join(busy_pids(f))
        fix = f"stop pid {pids} or use other GPUs (CUDA_VISIBLE_DEVICES)"
        return f.expected, f"{f.subject} held by {f.actual}", fix
    elif f.kind is Kind.GPU_ARCH_UNSUPPORTED:
        cap = f.expected.rpartition(" ")[2]
        fix = (f"no kernel image for capability {cap}: install a torch built for it (e.g. a "
               "CUDA >= 12.8 build for sm_100/sm_120)")  # fmt: skip
        return f.expected, f"torch's arch list: {f.actual}", fix
    elif f.kind is Kind.GPU_ROW_REMAP and f.cause == CAUSE_FAILURE:
        fix = f"drain the node; replace {f.subject} (its spare rows are used up)"
    elif f.kind in (Kind.GPU_XID, Kind.GPU_XID_APP):
        fix = xid_fix(f)
    return f.expected, f.actual, fix


# What NVIDIA's Xid catalog says to do first (judge/xid_catalog.py), as a fix line.
XID_FIX = {
    Resolution.RESTART_APP: "nothing for the node: restart the application that hit it (NVIDIA's "
    "Xid catalog: RESTART_APP); check the application if it recurs",
    Resolution.RESET_GPU: "drain the node; reset {subject} (nvidia-smi -r -i N), replace it if "
    "the Xid returns (NVIDIA's Xid catalog: RESET_GPU)",
    Resolution.REBOOT: "drain the node and reboot it: no GPU reset brings {subject} back "
    "(NVIDIA's Xid catalog: RESTART_BM); replace it if the Xid returns",
    Resolution.CONTACT_SUPPORT: "drain the node; contact NVIDIA support with the log of "
    "nvidia-bug-report.sh (NVIDIA's Xid catalog: CONTACT_SUPPORT)",
    Resolution.CHECK_POWER: "drain the node; check the power cables of {subject} (NVIDIA's Xid "
    "catalog: CHECK_MECHANICALS)",
    Resolution.UPDATE_DRIVER: "drain the node; update the NVIDIA driver and firmware (NVIDIA's "
    "Xid catalog: UPDATE_SWFW)",
}


def xid_fix(f: Finding) -> str:
    """The fix line of an Xid finding: the catalog's first action for its deciding record."""
    try:
        action = Resolution(f.cause)
    except ValueError:
        action = Resolution.CONTACT_SUPPORT
    return XID_FIX.get(action, XID_FIX[Resolution.CONTACT_SUPPORT]).format(subject=f.subject)


def busy_pids(f: Finding) -> list[str]:
    """The pids a gpu-busy finding names, each where a holder begins (``pid N (``, first or
    after ``, ``): a process name cannot add one (judge/gpu_health._plain)."""
    return re.findall(r"(?:^|, )pid (\d+) \(", f.actual)


def drain_text(text: str, more: str) -> str:
    """``text`` as a drain reason: printable ASCII, no ``"`` (it goes inside
    ``reason="..."``), cut to leave room for ``more``."""
    text = "".join(ch if " " <= ch <= "~" else "?" for ch in text).replace('"', "'")
    return text[: DRAIN_LIMIT - len(more)] + more


def drain_reason(findings: Iterable[Finding]) -> str | None:
    """A Slurm drain reason for a node's findings (``envtool: gpu-xid GPU 3 (+1 more)``): the
    errors an admin drains on (reset, drain, replace), None when there is none; at most 80
    printable ASCII characters."""
    hits = [f for f in findings
            if f.severity is Severity.ERROR and ACTIONS.get(f.kind) in DRAINING]  # fmt: skip
    if not hits:
        return None
    first = hits[0]
    more = f" (+{len(hits) - 1} more)" if len(hits) > 1 else ""
    return drain_text(f"envtool: {first.kind.value} {first.subject}", more)
