"""What ``preflight --quick`` judges beyond verify's checks (pure): ``--min-gpus`` against the
GPUs the node read without torch (verify counts torch's devices; the quick mode imports no
torch). In: this node's HostReport; out: Findings."""

from __future__ import annotations

from envtool.judge.findings import Finding, Kind
from envtool.judge.gpu_health import SUBJECT_HEALTH
from envtool.judge.rules import severity
from envtool.protocol.types import HostReport


def gpu_count(report: HostReport, min_gpus: int) -> list[Finding]:
    """Fewer GPUs than ``min_gpus`` in the node's GPU layer; a node that read none (no driver)
    says why as not-checked. Nothing where the part failed: probe-failed already says so."""
    layer = report.gpus
    if min_gpus == 0 or layer is None:
        return []
    host = (report.host,)
    if layer.source == "none":
        kind, expected = Kind.NOT_CHECKED, f"the GPUs read without torch (--min-gpus {min_gpus})"
        why = layer.why or "the node read no GPU and did not say why"
        return [Finding(kind, severity(kind), SUBJECT_HEALTH, expected, why, host)]
    if len(layer.devices) >= min_gpus:
        return []
    kind = Kind.TOO_FEW_GPUS
    return [Finding(kind, severity(kind), "GPUs", f">= {min_gpus}", str(len(layer.devices)), host)]
