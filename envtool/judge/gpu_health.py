"""The cards under the environment, judged (pure): each node's GPU layer (read without
torch, before this run's ranks start) and its torch's arch list against each device; then
the nodes against each other and against the site's policy. In: HostReports; out: Findings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from envtool.judge import gpu_arch, gpu_link, gpu_xid
from envtool.judge.cluster_policy import GpuExpect
from envtool.judge.consensus import differences
from envtool.judge.findings import Finding, Kind, fold_gpus
from envtool.judge.gpu_link import finding as _f
from envtool.judge.gpu_link import gpu_name
from envtool.judge.gpu_xid import pci_key
from envtool.judge.rules import severity
from envtool.protocol.gpu_types import GpuDevice, GpuLayer, GpuProcess
from envtool.protocol.types import HostReport, NodeFacts

CAUSE_UNSEEN = "unseen"  # gpu-busy: memory held, no holder visible from here
SLOWDOWNS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
             "sw_thermal_slowdown")  # fmt: skip
CAUSE_PENDING, CAUSE_FAILURE = "pending", "failure"
SUBJECT_HEALTH = "GPU health"


def _mib(value: int | None) -> str:
    return "? MiB" if value is None else f"{value} MiB"


def _holder(p: GpuProcess) -> str:
    """``pid 11327 (/root/tools/memhog, alice, 2566 MiB)``: what the node could see of it
    (no user where /proc does not show the process, e.g. from another PID namespace)."""
    seen = [_plain(part) for part in (p.name, p.user) if part]
    return f"pid {p.pid} ({', '.join([*seen, _mib(p.used_mib)])})"


def _plain(text: str) -> str:
    """A node's process name or user without the commas and parentheses that delimit the
    holders: ``pid N (`` after ``, `` then only ever starts one (report/gpu_labels.busy_pids)."""
    return text.translate(str.maketrans(",()", "   "))


# MiB a card holds with no process of anyone's: the driver's own and a desktop's display (the
# RTX 4080 capture, idle: 596 MiB); more than this, or this share of the card, and nobody
# visible from here holding it, is another container's or PID namespace's job
UNSEEN_MIB, UNSEEN_SHARE = 1024, 0.05


def _unseen(layer: GpuLayer, dev: GpuDevice, expect: GpuExpect, host: str) -> list[Finding]:
    """Memory held on a card whose process list (readable) shows nobody holding it."""
    used, total = dev.memory_used_mib, dev.memory_total_mib or 0
    if used is None or layer.held(dev) or layer.source == "none":
        return []
    if used <= max(UNSEEN_MIB, UNSEEN_SHARE * total, expect.foreign_memory_mib):
        return []
    allowed = f"at most {expect.foreign_memory_mib} MiB held by other processes"
    said = (f"{used} of {total or '?'} MiB held by processes not visible from here (another "
            "container or PID namespace)")  # fmt: skip
    return [_f(Kind.GPU_BUSY, gpu_name(dev), allowed, said, host, CAUSE_UNSEEN)]


def _busy(layer: GpuLayer, dev: GpuDevice, expect: GpuExpect, host: str) -> list[Finding]:
    held = layer.held(dev)
    if not held:
        return _unseen(layer, dev, expect, host)
    known = [p.used_mib for p in held if p.used_mib is not None]
    if len(known) == len(held) and sum(known) <= expect.foreign_memory_mib:
        return []
    said = ", ".join(_holder(p) for p in held)
    allowed = f"at most {expect.foreign_memory_mib} MiB held by other processes"
    return [_f(Kind.GPU_BUSY, gpu_name(dev), allowed, said, host)]


def _memory_faults(dev: GpuDevice, host: str) -> list[Finding]:
    out, name = [], gpu_name(dev)
    counts = (dev.ecc_uncorrected_volatile or 0, dev.ecc_uncorrected_aggregate or 0)
    if any(counts):
        actual = f"volatile {counts[0]}, aggregate {counts[1]}"
        out.append(_f(Kind.GPU_ECC, name, "0 uncorrectable ECC errors", actual, host))
    if dev.remapped_rows_failure:
        out.append(_f(Kind.GPU_ROW_REMAP, name, "no row-remap failure", "a row remapping failed",
                      host, CAUSE_FAILURE))  # fmt: skip
    elif dev.remapped_rows_pending:
        out.append(_f(Kind.GPU_ROW_REMAP, name, "no pending row remap", "row remap pending",
                      host, CAUSE_PENDING))  # fmt: skip
    if dev.retired_pages_pending:
        out.append(_f(Kind.GPU_RETIRED_PAGES, name, "no page retirement pending",
                      "page retirement pending", host))  # fmt: skip
    return out


def _settings(dev: GpuDevice, expect: GpuExpect, host: str) -> list[Finding]:
    out, name = [], gpu_name(dev)
    if dev.mig_mode and not expect.mig_allowed:
        out.append(_f(Kind.GPU_MIG, name, "MIG off", "MIG on", host))
    if dev.compute_mode is not None and dev.compute_mode != "Default":
        out.append(_f(Kind.GPU_COMPUTE_MODE, name, "Default", dev.compute_mode, host))
    if dev.persistence_mode is False and expect.persistence_required:
        out.append(_f(Kind.GPU_PERSISTENCE_OFF, name, "persistence mode on", "off", host))
    active = [e for e in SLOWDOWNS if e in (dev.clock_events or ())]
    if active:
        out.append(_f(Kind.GPU_SLOWDOWN, name, "no slowdown", ", ".join(active), host))
    return out


def _xids(layer: GpuLayer, said: dict[str, set[Kind]], host: str) -> list[Finding]:
    names = {pci_key(d.pci_bus_id): gpu_name(d) for d in layer.devices}
    return gpu_xid.findings(layer.xid.events, names, said, host)


def _arch(facts: NodeFacts, host: str) -> list[Finding]:
    arches = gpu_arch.cuda_arches(facts.arch_list)
    if not arches:
        return []  # a CPU build, CUDA unavailable, or a node from before the arch list
    out = []
    for dev in facts.devices:
        cap = gpu_arch.capability(dev.capability)
        if cap is not None and not gpu_arch.covers(arches, cap):
            expected = f"a kernel image for capability {dev.capability}"
            out.append(_f(Kind.GPU_ARCH_UNSUPPORTED, f"GPU {dev.index}", expected,
                          " ".join(arches), host))  # fmt: skip
    return out


def node(report: HostReport, expect: GpuExpect) -> list[Finding]:
    """Every finding about one node's own cards."""
    host, layer, out = report.host, report.gpus, []
    if report.facts is not None:
        out += _arch(report.facts, host)
    if layer is None:
        return out
    said: dict[str, set[Kind]] = {}
    for dev in layer.devices:
        if dev.error:  # listed, not opened: that is the finding, nothing else is known
            where = f"{dev.pci_bus_id}: " if dev.pci_bus_id else ""
            out.append(_f(Kind.GPU_UNREADABLE, gpu_name(dev), "a GPU the driver can open",
                          f"{where}{dev.error}", host))  # fmt: skip
            said[gpu_name(dev)] = {Kind.GPU_UNREADABLE}
            continue
        found = _busy(layer, dev, expect, host) + _memory_faults(dev, host)
        found += gpu_link.faults(layer, dev, host) + _settings(dev, expect, host)
        said[gpu_name(dev)] = {f.kind for f in found}
        out += found
    return fold_gpus(out + _xids(layer, said, host))


def not_checked(report: HostReport, min_gpus: int) -> list[Finding]:
    """Under ``--min-gpus N``: a node that read none of its cards (``source: none``), in its
    own words why; nothing guessed. None where torch already says CUDA is unavailable (that
    finding is the cause), and none for a part that failed (probe-failed says why) or that a
    document lacks (the node package always sends it: only a hand-made or older document
    has none, and is judged on what it holds)."""
    layer = report.gpus
    if min_gpus == 0 or layer is None or layer.source != "none" or report.facts is None:
        return []
    if not report.facts.cuda_available:
        return []
    expected = f"the GPUs read without torch (--min-gpus {min_gpus})"
    why = layer.why or "the node read no GPU and did not say why"
    return [_f(Kind.NOT_CHECKED, SUBJECT_HEALTH, expected, why, report.host)]


def _values(layers: Mapping[str, GpuLayer], get: Callable[[GpuDevice], str]) -> dict[str, str]:
    return {h: " + ".join(sorted({str(get(d)) for d in layer.devices if not d.error}))
            for h, layer in layers.items() if any(not d.error for d in layer.devices)}  # fmt: skip


def _no_bf16(dev: GpuDevice) -> str:
    """`` (no bf16)`` for a card below capability 8.0 (bf16 arithmetic needs sm_80: a V100
    among A100s), so a mixed cluster shows which nodes lack it; "" otherwise or unknown."""
    cap = gpu_arch.capability(dev.capability or "")
    return " (no bf16)" if cap is not None and cap < (8, 0) else ""


ACROSS: tuple[tuple[Kind, str, Callable[[GpuDevice], str]], ...] = (
    (Kind.GPU_MODEL_DIFFERS, "GPU model", lambda d: d.name + _no_bf16(d)),
    (Kind.GPU_MEMORY_DIFFERS, "GPU memory", lambda d: _mib(d.memory_total_mib)),
    (Kind.GPU_CAPABILITY_DIFFERS, "GPU capability", lambda d: (d.capability or "?") + _no_bf16(d)),
)


def across(
    layers: Mapping[str, GpuLayer], machines: Mapping[str, str], expect: GpuExpect
) -> list[Finding]:
    """Model, memory size (exactly: one model, one size) and capability, node against node;
    where the policy names the model (and so the generation) or the size, it is the
    reference instead of the majority (policy_unmet)."""
    stated = {Kind.GPU_MODEL_DIFFERS: expect.model, Kind.GPU_CAPABILITY_DIFFERS: expect.model,
              Kind.GPU_MEMORY_DIFFERS: expect.memory_mib}  # fmt: skip
    out: list[Finding] = []
    for kind, subject, get in ACROSS:
        if stated[kind] is None:
            values = _values(layers, get)
            out += differences(values, kind, severity(kind), subject, machines=machines)
    return out


def policy_unmet(layers: Mapping[str, GpuLayer], expect: GpuExpect) -> list[Finding]:
    """Each node against the policy's model, count and memory size."""
    out, kind = [], Kind.GPU_POLICY_UNMET
    for host, layer in layers.items():
        devs = layer.devices
        if expect.count is not None and len(devs) != expect.count:
            out.append(_f(kind, "GPUs", f"{expect.count} GPUs (policy)", str(len(devs)), host))
        model = expect.model
        odd = [d for d in devs if model is not None and model.lower() not in d.name.lower()]
        if model is not None and odd:
            actual = " + ".join(sorted({d.name for d in odd}))
            out.append(_f(kind, "GPU model", f"{model} (policy)", actual, host))
        size = expect.memory_mib
        if size is not None and any(d.memory_total_mib != size for d in devs):
            actual = " + ".join(sorted({_mib(d.memory_total_mib) for d in devs}))
            out.append(_f(kind, "GPU memory", f"{size} MiB (policy)", actual, host))
    return out


def check(
    reports: Sequence[HostReport], expect: GpuExpect, min_gpus: int,
    machines: Mapping[str, str] | None = None,
) -> list[Finding]:  # fmt: skip
    """Every GPU-layer finding of a run (``machines``: one machine's names vote once)."""
    out: list[Finding] = []
    for r in reports:
        out += not_checked(r, min_gpus) + node(r, expect)
    layers = {r.host: r.gpus for r in reports if r.gpus is not None and r.gpus.source != "none"}
    out = gpu_link.by_design(out, [h for h, layer in layers.items() if layer.devices])
    return out + across(layers, machines or {}, expect) + policy_unmet(layers, expect)
