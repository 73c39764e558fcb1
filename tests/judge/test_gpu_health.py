"""judge/gpu_health.py: each GPU finding from a layer read from a node document (the real
captures' values, tests/fixtures/gpu_parts.py; each fault says which values it changed)."""

from __future__ import annotations

from typing import Any

from fixtures.gpu_parts import UUID, device, h200, load_processes, no_driver, node_document, part

from envtool.judge import gpu, gpu_arch, verdict
from envtool.judge.cluster_policy import ClusterPolicy, GpuExpect
from envtool.judge.findings import Finding, Kind, Severity
from envtool.judge.gpu_health import check
from envtool.protocol.answers import host_report
from envtool.protocol.types import Answer, HostReport
from envtool.report.drain import reason
from envtool.report.gpu_labels import drain_reason
from envtool.report.labels import words

DEVICES = [{"index": 0, "name": "H100", "capability": "9.0"}]
FACTS = {"schema": "envtool.gpu-facts/1", "python": "3.11.9", "cuda_available": True,
         "device_count": 1, "devices": DEVICES}  # fmt: skip


def _report(gpus: Any, host: str = "n1", facts: dict[str, Any] | None = None) -> HostReport:
    return host_report(Answer(host, 0, node_document(gpus, facts or FACTS, host)))


def _kinds(found: list[Finding]) -> list[tuple[Kind, str, tuple[str, ...]]]:
    return [(f.kind, f.subject, f.hosts) for f in found]


def _one(**changes: Any) -> list[Finding]:
    return check([_report(part([device(**changes)]))], GpuExpect(), 1)


def test_the_idle_capture_is_healthy() -> None:
    assert check([_report(part())], GpuExpect(), 1) == []


def test_a_busy_gpu_names_each_pid_with_name_user_and_mib() -> None:
    # the H100 capture under load: its three processes (user set: the capture has none)
    found = check([_report(part([device(memory_used_mib=19818, clock_events=[])],
                                load_processes()))], GpuExpect(), 1)  # fmt: skip
    assert _kinds(found) == [(Kind.GPU_BUSY, "GPU 0", ("n1",))]
    w = words(found[0])
    assert "pid 11327 (/root/tools/memhog, alice, 2566 MiB)" in w.actual
    assert "pid 11345 (./gpu_burn, alice, 15690 MiB)" in w.actual
    assert w.fix == "stop pid 11327, 11328, 11345 or use other GPUs (CUDA_VISIBLE_DEVICES)"
    assert found[0].severity is Severity.ERROR
    allowed = GpuExpect(foreign_memory_mib=2566 + 1542 + 15690)
    assert check([_report(part(processes=load_processes()))], allowed, 1) == []
    # a process name that mimics another holder names no pid of its own (the capture's first
    # process renamed): the fix and the drain reason stop 11327 alone
    evil = [dict(load_processes()[0], name='x), pid 1 (evil", pid 2 ')]
    (busy,) = check([_report(part(processes=evil))], GpuExpect(), 1)
    assert words(busy).fix == "stop pid 11327 or use other GPUs (CUDA_VISIBLE_DEVICES)"
    assert reason([busy]) == "envtool: gpu-busy GPU 0 pid 11327"
    unknown = [dict(p, used_mib=None) for p in load_processes()]  # MiB not visible: held
    assert check([_report(part(processes=unknown))], allowed, 1) != []


def test_memory_faults_are_errors_and_one_cause_one_finding() -> None:
    # changed: the uncorrectable counters, remapped_rows_pending
    found = _one(
        ecc_uncorrected_volatile=2, ecc_uncorrected_aggregate=5, remapped_rows_pending=True
    )
    assert {f.kind for f in found} == {Kind.GPU_ECC, Kind.GPU_ROW_REMAP}
    (kept,) = verdict.explain(found)  # the pending remap follows from the ECC errors
    assert kept.kind is Kind.GPU_ECC and kept.follows == 1
    assert words(kept).actual == "volatile 2, aggregate 5"
    assert words(kept).fix == "drain the node; reset or replace GPU 0"
    assert _kinds(_one(remapped_rows_failure=True)) == [(Kind.GPU_ROW_REMAP, "GPU 0", ("n1",))]
    assert "replace GPU 0" in words(_one(remapped_rows_failure=True)[0]).fix
    assert [f.kind for f in _one(retired_pages_pending=True)] == [Kind.GPU_RETIRED_PAGES]


def test_hardware_xids_by_gpu_and_not_twice() -> None:
    text = "NVRM: Xid (PCI:0000:00:09): 79, GPU has fallen off the bus."
    fallen = {"xid": 79, "pci": "PCI:0000:00:09", "text": text, "seconds": 1.0}
    app = {"xid": 13, "pci": "PCI:0000:00:09", "text": "Graphics Engine Exception"}
    found = check([_report(part(events=[fallen, app]))], GpuExpect(), 1)
    assert _kinds(found) == [(Kind.GPU_XID, "GPU 0", ("n1",)),  # 13 is the application's
                             (Kind.GPU_XID_APP, "GPU 0", ("n1",))]  # fmt: skip
    assert words(found[0]).actual.startswith("Xid 79; the last Xid 79 (GPU has fallen off")
    assert found[1].severity is Severity.INFO and drain_reason(found) == "envtool: gpu-xid GPU 0"
    dbe = {"xid": 48, "pci": "0000:00:09", "text": "DBE"}
    found = check([_report(part([device(ecc_uncorrected_volatile=1)], events=[dbe]))],
                  GpuExpect(), 1)  # fmt: skip
    assert [f.kind for f in found] == [Kind.GPU_ECC]  # its Xid 48 is the same errors


def test_links_fabric_and_settings() -> None:
    links = [{"link": i, "up": i != 3} for i in range(18)]
    assert [(f.kind, f.actual) for f in _one(nvlinks=links)] == [
        (Kind.GPU_NVLINK_DOWN, "link 3 down of 18")
    ]
    assert _one(nvlinks=[{"link": i, "up": False} for i in range(4)]) == []  # no NVLink used
    assert [f.kind for f in _one(fabric_state="In Progress")] == [Kind.GPU_FABRIC]
    assert _one(fabric_state=None, fabric_status=None) == []
    width = _one(pcie_width_current=8)
    assert [(f.kind, f.severity, f.expected, f.actual) for f in width] == [
        (Kind.GPU_PCIE_DEGRADED, Severity.WARNING, "x16 Gen5", "x8 Gen5")
    ]
    # the RTX 4080 capture, idle: Gen1 of Gen4 with gpu_idle active is not a fault
    assert _one(pcie_gen_current=1, pcie_gen_max=4, memory_used_mib=596) == []
    loaded = _one(pcie_gen_current=3, memory_used_mib=19818, clock_events=[])
    # (19818 MiB held and nobody in the process list: held from another PID namespace)
    assert [f.kind for f in loaded] == [Kind.GPU_BUSY, Kind.GPU_PCIE_DEGRADED]
    for change, kind in (({"mig_mode": True}, Kind.GPU_MIG),
                         ({"compute_mode": "Exclusive_Process"}, Kind.GPU_COMPUTE_MODE),
                         ({"persistence_mode": False}, Kind.GPU_PERSISTENCE_OFF),
                         ({"clock_events": ["sw_power_cap", "hw_thermal_slowdown"]},
                          Kind.GPU_SLOWDOWN)):  # fmt: skip
        (f,) = _one(**change)
        assert f.kind is kind and f.severity is Severity.WARNING
    allow = GpuExpect(mig_allowed=True, persistence_required=False)
    assert check([_report(part([device(mig_mode=True, persistence_mode=False)]))], allow, 1) == []


def test_arch_list_against_each_capability() -> None:
    assert gpu_arch.covers(("sm_80", "sm_90"), (9, 0))
    assert gpu_arch.covers(("sm_80",), (8, 6)) and not gpu_arch.covers(("sm_86",), (8, 0))
    assert not gpu_arch.covers(("sm_90a",), (9, 1)) and gpu_arch.covers(("compute_90",), (12, 0))
    assert not gpu_arch.covers(("sm_90", "sm_80"), (10, 0))  # never across a major
    cu118 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    blackwell = dict(
        FACTS, arch_list=cu118, devices=[{"index": 0, "name": "RTX PRO 6000", "capability": "12.0"}]
    )
    (f,) = check([_report(part(), facts=blackwell)], GpuExpect(), 1)
    assert f.kind is Kind.GPU_ARCH_UNSUPPORTED and f.severity is Severity.ERROR
    w = words(f)
    assert "no kernel image for capability 12.0" in w.fix and "sm_90" in w.actual
    hopper = dict(FACTS, arch_list=cu118)
    assert check([_report(part(), facts=hopper)], GpuExpect(), 1) == []
    cpu = dict(FACTS, arch_list=[])
    assert check([_report(part(), facts=cpu)], GpuExpect(), 1) == []


def test_across_nodes_the_odd_model_is_named_once() -> None:
    rs = [_report(part(), "n1"), _report(part(), "n2"), _report(part([h200()]), "n3")]
    found = check(rs, GpuExpect(), 1)
    assert {(f.kind, f.hosts) for f in found} == {
        (Kind.GPU_MODEL_DIFFERS, ("n3",)),
        (Kind.GPU_MEMORY_DIFFERS, ("n3",)),
    }
    kept = verdict.explain(found)  # the memory size follows from the model
    assert [(f.kind, f.actual, f.follows) for f in kept] == [
        (Kind.GPU_MODEL_DIFFERS, "NVIDIA H200", 1)
    ]
    # a V100 among H100s (name and capability 9.0 -> 7.0 changed from the H100 capture's):
    # the model finding says it lacks bf16
    rs[2] = _report(part([device(name="Tesla V100-SXM2-32GB", capability="7.0")]), "n3")
    model = next(f for f in check(rs, GpuExpect(), 1) if f.kind is Kind.GPU_MODEL_DIFFERS)
    assert (model.actual, model.hosts) == ("Tesla V100-SXM2-32GB (no bf16)", ("n3",))
    assert "bf16" not in model.expected
    # 40 GB among 80 GB of one model: memory, exactly
    rs[2] = _report(part([device(memory_total_mib=40960)]), "n3")
    assert _kinds(check(rs, GpuExpect(), 1)) == [(Kind.GPU_MEMORY_DIFFERS, "GPU memory", ("n3",))]


def test_the_policy_s_expectations_and_accepted_kinds() -> None:
    rs = [_report(part(), "n1"), _report(part([h200()]), "n2")]
    expect = GpuExpect(model="H100", count=2, memory_mib=81559)
    found = verdict.explain(check(rs, expect, 1))
    assert sorted((f.kind.value, f.subject, f.hosts) for f in found) == [
        ("gpu-policy-unmet", "GPU memory", ("n2",)),
        ("gpu-policy-unmet", "GPU model", ("n2",)),
        ("gpu-policy-unmet", "GPUs", ("n1",)),
        ("gpu-policy-unmet", "GPUs", ("n2",)),
    ]
    accepted = verdict.accepted(
        _one(mig_mode=True), ClusterPolicy(accept=frozenset({Kind.GPU_MIG}))
    )
    assert [f.severity for f in accepted] == [Severity.INFO]


def test_no_driver_is_not_checked_with_its_why_unless_torch_says_so() -> None:
    (f,) = check([_report(no_driver())], GpuExpect(), 1)
    assert (f.kind, f.subject) == (
        Kind.NOT_CHECKED,
        "GPU health",
    ) and "no NVIDIA driver" in f.actual
    assert check([_report(no_driver())], GpuExpect(), 0) == []
    cpu = dict(FACTS, cuda_available=False)  # cuda-unavailable is the finding, not a second
    policy = verdict.Policy(gpu.GpuPolicy(min_gpus=1))
    kinds = [x.kind for x in verdict.decide([_report(no_driver(), facts=cpu)], None, policy)]
    assert kinds == [Kind.CUDA_UNAVAILABLE]


def test_the_gpu_layer_is_judged_when_torch_sees_no_cuda() -> None:
    cpu = dict(FACTS, cuda_available=False, devices=[], device_count=0)
    policy = verdict.Policy(gpu.GpuPolicy(min_gpus=0))
    rs = [_report(part([device(mig_mode=True)]), facts=cpu)]
    assert Kind.GPU_MIG in [f.kind for f in verdict.decide(rs, None, policy)]


def test_drain_reason_is_one_short_plain_line() -> None:
    assert drain_reason(_one(mig_mode=True)) is None  # a warning drains nothing
    assert drain_reason(_one(pcie_width_current=8)) is None
    found = _one(ecc_uncorrected_volatile=1, remapped_rows_failure=True)
    assert drain_reason(found) == "envtool: gpu-ecc-uncorrectable GPU 0 (+1 more)"
    odd = Finding(Kind.GPU_XID, Severity.ERROR, "PCI \x1b[2J" + "x" * 200, hosts=("n1",))
    text = drain_reason([odd])
    assert text is not None and len(text) <= 80 and text.isprintable() and "\x1b" not in text
    quoted = Finding(Kind.GPU_XID, Severity.ERROR, 'PCI "0000:00:09"', hosts=("n1",))
    assert drain_reason([quoted]) == "envtool: gpu-xid PCI '0000:00:09'"  # inside reason="..."


def test_the_gpus_of_a_node_that_share_a_finding_are_one_finding() -> None:
    """Issue 33 item 2, one cause one finding: eight cards of one node slowed alike (the H100
    capture, each with hw_slowdown active) are one finding on ``GPU 0-7``, not eight; GPU 9,
    its PCIe at x8 as well, keeps a finding of its own (another difference)."""
    slowed = [device(index=i, uuid=f"GPU-{i}", clock_events=["hw_slowdown"]) for i in range(8)]
    odd = device(index=9, uuid="GPU-9", clock_events=["hw_slowdown"], pcie_width_current=8)
    found = check([_report(part([*slowed, odd]))], GpuExpect(), 1)
    assert sorted(_kinds(found)) == [
        (Kind.GPU_SLOWDOWN, "GPU 0-7,9", ("n1",)),
        (Kind.GPU_PCIE_DEGRADED, "GPU 9", ("n1",)),
    ]


def test_a_gpu_the_driver_cannot_open_is_an_error_and_nothing_else() -> None:
    lost = "nvidia-smi: Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error"
    broken = {**device(index=1, uuid="", name=""), "error": lost, "pci_bus_id": "0000:0B:00.0"}
    found = check([_report(part([device(), broken]))], GpuExpect(), 1)
    assert [(f.kind, f.subject, f.severity) for f in found] == [
        (Kind.GPU_UNREADABLE, "GPU 1", Severity.ERROR)
    ]
    assert found[0].actual == f"0000:0B:00.0: {lost}" and "reboot" in words(found[0]).fix
    assert reason(found) == "envtool: gpu-unreadable GPU 1"


def test_memory_held_with_no_process_visible_is_named_so() -> None:
    """9184 of 10240 MiB used and the process list empty (another container's job): said as
    held by processes not visible from here (it passed); a desktop's 596 MiB of display (the
    RTX 4080 capture, idle) and the policy's allowance are not."""
    (busy,) = _one(memory_used_mib=9184, memory_total_mib=10240)
    assert (busy.kind, busy.subject, busy.cause) == (Kind.GPU_BUSY, "GPU 0", "unseen")
    assert busy.actual.startswith("9184 of 10240 MiB held by processes not visible from here")
    assert _one(memory_used_mib=596, memory_total_mib=16376) == []
    allow = GpuExpect(foreign_memory_mib=10000)
    quiet = part([device(memory_used_mib=9184, memory_total_mib=10240)])
    assert check([_report(quiet)], allow, 1) == []


def test_a_link_generation_is_judged_only_under_real_load() -> None:
    """Issue 33 item 2: seven idle cards (P8, 0 % utilization) with a process merely keeping
    memory on them were "PCIe x16 Gen1 under load": idle links downshift. The RTX 4080
    capture, idle, read as is (P8, 0 %, Gen1 of Gen4, 596 MiB), with a holder added; then
    the same card at the capture's load figures (P2 is its load state, 7 %: not busy; 100 %
    in P0 is). Where utilization or the state is not read, it says what it went by."""
    idle = {"pcie_gen_current": 1, "pcie_gen_max": 4, "memory_used_mib": 596,
            "utilization_gpu": 0, "pstate": "P8", "clock_events": []}  # fmt: skip
    holder = [{"gpu_uuid": UUID, "pid": 4242, "name": "python", "user": "bob", "used_mib": 500}]
    found = check([_report(part([device(**idle)], holder))], GpuExpect(), 1)
    assert Kind.GPU_PCIE_DEGRADED not in {f.kind for f in found}  # gpu-busy, not the link
    assert _one(**{**idle, "utilization_gpu": 7, "pstate": "P2"}) == []
    (link,) = _one(**{**idle, "utilization_gpu": 100, "pstate": "P0", "memory_used_mib": 0})
    assert link.actual == "x16 Gen1 under load (100% utilization, P0)"
    unknown = {**idle, "utilization_gpu": None, "pstate": None, "memory_used_mib": 0}
    (old,) = check([_report(part([device(**unknown)], holder))], GpuExpect(), 1)[1:]
    assert old.actual == "x16 Gen1 under load (memory held, utilization not read)"


def test_a_slot_x8_by_design_on_every_node_is_a_note_and_an_odd_node_is_named() -> None:
    """Issue 33 item 2: x8 of the card's x16 on every node (an x8/x8 board, a cloud VM) is
    the slots' width, a note, not "reseat the GPU or riser"; where the other nodes run x16,
    the x8 node alone is named, a warning."""
    narrow = part([device(pcie_width_current=8)])
    both = check([_report(narrow, "n1"), _report(narrow, "n2")], GpuExpect(), 1)
    assert [(f.kind, f.severity, f.hosts) for f in both] == [
        (Kind.GPU_PCIE_DEGRADED, Severity.INFO, ("n1",)),
        (Kind.GPU_PCIE_DEGRADED, Severity.INFO, ("n2",)),
    ]
    assert "by design" in words(both[0]).actual and "reseat" not in words(both[0]).fix
    odd = check([_report(narrow, "n1"), _report(part(), "n2")], GpuExpect(), 1)
    assert [(f.kind, f.severity, f.hosts) for f in odd] == [
        (Kind.GPU_PCIE_DEGRADED, Severity.WARNING, ("n1",))
    ]
    assert "reseat" in words(odd[0]).fix
