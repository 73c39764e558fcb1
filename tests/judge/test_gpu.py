"""Pure checks over hosts' GPU facts and all-reduce results."""

from __future__ import annotations

from envtool.judge import gpu as gpuchecks
from envtool.nccl.model import NcclResult, NcclRow
from envtool.protocol.types import AllReduceResult, Device, HostReport, NodeFacts

H100 = Device(0, "NVIDIA H100 80GB HBM3", "9.0", 80 * 2**30, "GPU-1")


def facts(**kw: object) -> NodeFacts:
    base: dict[str, object] = dict(
        hostname="n",
        python="3.9.18",
        torch="2.1.0",
        cuda="11.8",
        cuda_available=True,
        device_count=8,
        devices=(H100,) * 8,
        driver="535.104.05",
        cudnn="8902",
        nccl="2.18.3",
        env=(("NCCL_SOCKET_IFNAME", "ib0"),),
    )
    base.update(kw)
    return NodeFacts(**base)  # type: ignore[arg-type]


def reports(**per_host: NodeFacts) -> list[HostReport]:
    return [HostReport(h, facts=f) for h, f in per_host.items()]


def allreduce(peak: float, wrong: int = 0, error: str = "") -> AllReduceResult:
    """An 8-rank result whose best busbw at its largest size is ``peak``."""
    part = NcclResult(1000.0, peak / 1.75, peak, 0)
    row = NcclRow(256 * 2**20, 64 * 2**20, "float", "sum", -1, part, part)
    return AllReduceResult("nccl", 8, () if error else (row,), wrong_total=wrong, error=error)


POLICY = gpuchecks.GpuPolicy(min_gpus=8, locked_cuda="11.8")


def kinds(found: list) -> set[tuple[str, tuple[str, ...]]]:  # type: ignore[type-arg]
    return {(f.kind, f.hosts) for f in found}


def test_healthy_cluster_is_clean() -> None:
    assert gpuchecks.check(reports(a=facts(), b=facts(), c=facts()), POLICY) == []


def test_version_and_env_mismatch_name_the_odd_host() -> None:
    found = gpuchecks.check(
        reports(a=facts(), b=facts(nccl="2.16.5"), c=facts(env=(("NCCL_SOCKET_IFNAME", "eth0"),))),
        POLICY,
    )
    assert kinds(found) == {("version-mismatch", ("b",)), ("nccl-env-differs", ("c",))}
    nccl = next(f for f in found if f.kind == "version-mismatch")
    assert (nccl.subject, nccl.expected, nccl.actual) == ("NCCL", "2.18.3", "2.16.5")


def test_the_loader_variables_differing_between_nodes_are_judged() -> None:
    """LD_LIBRARY_PATH / LD_PRELOAD on one node only: the loader may pick another library
    there (issue 24); the same value everywhere says nothing."""
    lib = ("LD_LIBRARY_PATH", "/opt/libtorch/lib")
    base = (("NCCL_SOCKET_IFNAME", "ib0"),)
    found = gpuchecks.check(reports(a=facts(), b=facts(), c=facts(env=(*base, lib))), POLICY)
    assert kinds(found) == {("loader-env-differs", ("c",))}
    odd = next(iter(found))
    assert (odd.subject, odd.expected, odd.actual) == ("LD_LIBRARY_PATH", "(unset)", lib[1])
    same = gpuchecks.check(reports(a=facts(env=(*base, lib)), b=facts(env=(*base, lib))), POLICY)
    assert not any(f.kind == "loader-env-differs" for f in same)


def test_driver_minimums_for_cuda_118() -> None:
    found = gpuchecks.check(
        reports(
            a=facts(driver="450.51.06"), b=facts(driver="470.82.01"), c=facts(driver="520.61.05")
        ),
        POLICY,
    )
    assert ("driver-too-old", ("a",)) in kinds(found)
    assert ("driver-minor-compat", ("b",)) in kinds(found)
    assert not any(f.hosts == ("c",) and f.kind.startswith("driver") for f in found)


def test_cuda_unavailable_and_too_few_gpus() -> None:
    broken = facts(
        cuda_available=False,
        device_count=0,
        devices=(),
        notes=("torch is built for CUDA 11.8 but CUDA is not available",),
    )
    found = gpuchecks.check(reports(a=facts(), b=broken), POLICY)
    assert {"cuda-unavailable", "too-few-gpus", "gpu-count-differs"} <= {f.kind for f in found}
    relaxed = gpuchecks.check(reports(b=broken), gpuchecks.GpuPolicy(min_gpus=0))
    assert [(f.kind, f.severity) for f in relaxed] == [("cuda-unavailable", "info")]


def test_allreduce_threshold_baseline_and_wrong() -> None:
    def ar(peak: float, wrong: int = 0, error: str = "") -> HostReport:
        return HostReport("h", facts=facts(), allreduce=allreduce(peak, wrong, error))

    assert gpuchecks.check([ar(470.0)], gpuchecks.GpuPolicy(8, baseline_busbw=473.6)) == []
    low = gpuchecks.check([ar(400.0)], gpuchecks.GpuPolicy(8, baseline_busbw=473.6))
    assert [f.kind for f in low] == ["busbw-low"] and "baseline 473.60" in low[0].expected
    assert [f.kind for f in gpuchecks.check([ar(500.0, wrong=3)], POLICY)] == ["allreduce-wrong"]
    failed = gpuchecks.check([ar(0.0, error="no result within the 60 s deadline")], POLICY)
    assert [f.kind for f in failed] == ["allreduce-failed"]
