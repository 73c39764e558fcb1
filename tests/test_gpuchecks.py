"""Pure checks over hosts' GPU facts and all-reduce results, and the verify decision."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from envtool import gpuchecks, junit, verify
from envtool.models import AllReduceSummary, Device, Environment, HostReport, NodeFacts, Package

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
    return [HostReport(h, True, facts=f) for h, f in per_host.items()]


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
        return HostReport(
            "h", True, facts=facts(), allreduce=AllReduceSummary("nccl", 8, peak, wrong, error)
        )

    assert gpuchecks.check([ar(470.0)], gpuchecks.GpuPolicy(8, baseline_busbw=473.6)) == []
    low = gpuchecks.check([ar(400.0)], gpuchecks.GpuPolicy(8, baseline_busbw=473.6))
    assert [f.kind for f in low] == ["busbw-low"] and "baseline 473.60" in low[0].expected
    assert [f.kind for f in gpuchecks.check([ar(500.0, wrong=3)], POLICY)] == ["allreduce-wrong"]
    failed = gpuchecks.check([ar(0.0, error="no result within the 60 s deadline")], POLICY)
    assert [f.kind for f in failed] == ["allreduce-failed"]


def test_decide_folds_identical_findings_and_junit_counts_them() -> None:
    lock = Environment(
        "conda-lock.yml",
        "lock",
        (Package("pytorch", "2.1.0", "cuda118_0"), Package("nccl", "2.18.3.1", "h0")),
    )
    cpu = Environment(
        "x", "probe", (Package("pytorch", "2.1.0", "cpu_0"), Package("nccl", "2.18.3.1", "h0"))
    )
    rs = [HostReport(h, True, env=cpu, facts=facts()) for h in ("gpu01", "gpu02")]
    rs.append(HostReport("gpu03", False, error="ssh failed: Connection refused"))
    options = verify.VerifyOptions((), None, min_gpus=8)
    found = verify.decide(rs, lock, options)
    build = [f for f in found if f.kind == "build-differs"]
    assert len(build) == 1 and build[0].hosts == ("gpu01", "gpu02")
    assert any(f.kind == "unreachable" and f.hosts == ("gpu03",) for f in found)
    xml = ET.fromstring(junit.render(tuple(rs), tuple(found), 1.0))
    suite = xml.find("testsuite")
    assert suite is not None and suite.get("tests") == str(3 * len(junit.CHECKS))
    assert suite.get("failures") == "3"  # build on gpu01 and gpu02, reachable on gpu03
    failing = {
        (c.get("classname"), c.get("name"))
        for c in suite.iter("testcase")
        if c.find("failure") is not None
    }
    assert failing == {("gpu01", "lock"), ("gpu02", "lock"), ("gpu03", "reachable")}


def test_baseline_from_nccl_log_and_from_a_json_report(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    import pytest

    from envtool.errors import InputError

    log = tmp_path / "log.txt"
    log.write_text(
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "   134217728      33554432     float     sum      -1    613.3  218.85  382.99      0"
        "    614.3  218.48  382.34      0\n"
    )
    assert verify.baseline_busbw(log) == pytest.approx(382.99)
    report = tmp_path / "report.json"
    report.write_text(
        json.dumps(
            {
                "schema": "envtool.verify/1",
                "hosts": [
                    {"host": "a", "allreduce": {"peak_busbw": 410.5}},
                    {"host": "b", "allreduce": None},
                ],
            }
        )
    )
    assert verify.baseline_busbw(report) == 410.5
    report.write_text('{"hosts": [{"host": "a", "allreduce": null}]}')
    with pytest.raises(InputError, match="no all-reduce result"):
        verify.baseline_busbw(report)
