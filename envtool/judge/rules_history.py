"""The rows of the kinds judged against the fleet's own history (judge/baseline.py): a node's
or a pair's all-reduce below its GPU model's past, a card below what it reported before."""

from __future__ import annotations

from envtool.judge.kinds import Check, Kind, Rule, Severity

HISTORY_RULES: dict[Kind, Rule] = {
    Kind.ALLREDUCE_BELOW_BASELINE: Rule(
        Check.ALLREDUCE,
        Severity.WARNING,
        None,
        "the node's all-reduce busbw (with `--allreduce pairs`: a pair's) is more than "
        "`--tolerance` below the median its GPU model (and count) reached in the fleet's last "
        "good runs measured the same way (the history store: `--history`), at each size from "
        "1 MiB the history holds (one finding, at the node's worst size; else its peak), or "
        "below the `--policy` baseline or floor; the finding names the size, the median, the "
        "spread and the runs",
        "compare that node with its model's peers: its NVLink/PCIe links, NIC, clocks and "
        "NCCL_* variables",
        "compare the node with its model's peers: links (`nvidia-smi topo -m`), NIC, clocks, "
        "`NCCL_*` variables",
    ),
    Kind.GPU_FIGURE_DROPPED: Rule(
        Check.GPU,
        Severity.WARNING,
        None,
        "a card's PCIe link is narrower, or its memory total smaller, than the same card (its "
        "UUID, on that node) reported in the history's last runs (`--history`): a slot that "
        "retrained, a riser, retired memory",
        "compare {subject} with what it was: lspci -vv (LnkSta), nvidia-smi -q (retired pages, "
        "row remapping); reseat it at the next maintenance",
        "compare the card with its past: `lspci -vv` (LnkSta), `nvidia-smi -q` (retired pages, "
        "row remapping); reseat at the next maintenance",
    ),
}
