"""judge/limits.py: /dev/shm, memlock where IB is present, open files, clock skew and kernel/
glibc between nodes, against LimitsPolicy's thresholds; and their words (report/labels)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from envtool.judge import limits as limitchecks
from envtool.judge.findings import Finding, Kind, Severity
from envtool.protocol.limit_types import Limits
from envtool.protocol.net_types import Infiniband, Network
from envtool.protocol.types import HostReport
from envtool.report import labels

MiB, GiB = 1024**2, 1024**3
HEALTHY = Limits(8 * GiB, "", (1048576, 1048576), (-1, -1), "6.1.0-18-amd64", "2.36")
POLICY = limitchecks.LimitsPolicy()


def host(name: str, lim: Limits | None = HEALTHY, **kw: object) -> HostReport:
    return HostReport(name, limits=lim, **kw)  # type: ignore[arg-type]


def found(reports: list[HostReport], policy: limitchecks.LimitsPolicy = POLICY) -> set[tuple]:  # type: ignore[type-arg]
    return {(f.kind, f.subject, f.hosts) for f in limitchecks.check(reports, policy)}


def test_healthy_nodes_give_nothing() -> None:
    assert limitchecks.check([host("a"), host("b"), host("c")], POLICY) == []


def test_docker_s_64_mib_shm_is_named_with_size_and_threshold() -> None:
    (f,) = limitchecks.check([host("a"), host("b", replace(HEALTHY, shm_bytes=64 * MiB))], POLICY)
    assert (f.kind, f.severity, f.hosts) == (Kind.SHM_SMALL, Severity.ERROR, ("b",))
    w = labels.words(f)
    assert (w.expected, w.actual) == ("at least 1 GiB", "64 MiB")
    assert "--shm-size=8g" in w.fix and "--ipc=host" in w.fix and "tmpfs" in w.fix
    assert labels.short(f) == "/dev/shm 64 MiB"


def test_the_shm_threshold_is_the_policy_s() -> None:
    small = [host("a", replace(HEALTHY, shm_bytes=2 * GiB))]
    assert found(small) == set()
    (f,) = limitchecks.check(small, limitchecks.LimitsPolicy(shm_min_bytes=16 * GiB))
    w = labels.words(f)
    assert (w.expected, w.actual) == ("at least 16 GiB", "2 GiB") and "--shm-size=16g" in w.fix


def test_an_unreadable_shm_is_no_size_finding() -> None:
    assert found([host("a", replace(HEALTHY, shm_bytes=None, shm_error="no /dev/shm"))]) == set()


def _ib(present: bool) -> Network:
    return Network((), ib=Infiniband(present))


def test_memlock_below_unlimited_matters_only_where_ib_is_present() -> None:
    low = replace(HEALTHY, memlock=(65536, 65536))
    reports = [host("ib", low, network=_ib(True)), host("eth", low, network=_ib(False)),
               host("old", low), host("ok", HEALTHY, network=_ib(True))]  # fmt: skip
    (f,) = limitchecks.check(reports, POLICY)
    assert (f.kind, f.severity, f.hosts) == (Kind.MEMLOCK_LOW, Severity.ERROR, ("ib",))
    w = labels.words(f)
    assert w.actual == "64 KiB (soft)" and "memlock=-1" in w.fix and "unlimited" in w.expected


@pytest.mark.parametrize(
    ("nofile", "policy", "low"),
    [((1024, 524288), POLICY, True), ((4096, 4096), POLICY, True),
     ((20000, 20000), POLICY, False), ((-1, -1), POLICY, False),
     ((4096, 4096), limitchecks.LimitsPolicy(nofile_min=4096), False),
     ((4095, -1), limitchecks.LimitsPolicy(nofile_min=4096), True)],
)  # fmt: skip
def test_nofile_soft_limit_against_the_threshold(
    nofile: tuple[int, int], policy: limitchecks.LimitsPolicy, low: bool
) -> None:
    got = limitchecks.check([host("a", replace(HEALTHY, nofile=nofile))], policy)
    assert [(f.kind, f.severity) for f in got] == ([(Kind.NOFILE_LOW, Severity.WARNING)] if low
                                                   else [])  # fmt: skip


def test_nofile_words_say_the_hard_limit_the_job_can_raise_to() -> None:
    (f,) = limitchecks.check([host("a", replace(HEALTHY, nofile=(1024, 524288)))], POLICY)
    w = labels.words(f)
    assert (w.expected, w.actual) == ("at least 8192 (soft)", "1024 (hard 524288)")
    assert "ulimit -n" in w.fix and "524288" in w.fix


@pytest.mark.parametrize(
    ("offset", "skewed"),
    [((300.0, 1.5), True), ((-59.5, 1.0), True), ((1.9, 1.0), False), ((2.1, 1.0), True),
     ((-0.3, 0.2), False), ((30.0, 40.0), False)],
)  # fmt: skip
def test_clock_skew_is_the_offset_beyond_its_bound(
    offset: tuple[float, float], skewed: bool
) -> None:
    got = found([host("a", clock_offset=offset)])
    assert got == ({(Kind.CLOCK_SKEW, "clock", ("a",))} if skewed else set())


def test_clock_skew_words_name_the_offset() -> None:
    (f,) = limitchecks.check([host("a", clock_offset=(-300.04, 1.46))], POLICY)
    assert f.severity is Severity.WARNING
    w = labels.words(f)
    assert (w.expected, w.actual) == ("within 1 s of envtool's clock",
                                      "300.0 s behind envtool's (± 1.5 s)")  # fmt: skip
    assert "chrony" in w.fix and labels.short(f) == "clock -300.0 s"


def test_a_looser_clock_policy() -> None:
    assert found([host("a", clock_offset=(5.0, 0.5))],
                 limitchecks.LimitsPolicy(clock_skew_s=10.0)) == set()  # fmt: skip


def test_kernel_and_glibc_differing_are_info_against_the_majority() -> None:
    odd = replace(HEALTHY, kernel="5.15.0-91-generic", glibc="2.35")
    got: list[Finding] = limitchecks.check([host("a"), host("b"), host("c", odd)], POLICY)
    assert {(f.kind, f.severity, f.subject, f.expected, f.actual, f.hosts) for f in got} == {
        (Kind.SYSTEM_DIFFERS, Severity.INFO, "kernel", "6.1.0-18-amd64", "5.15.0-91-generic",
         ("c",)),
        (Kind.SYSTEM_DIFFERS, Severity.INFO, "glibc", "2.36", "2.35", ("c",)),
    }  # fmt: skip


def test_two_nodes_that_differ_are_one_finding_without_a_majority() -> None:
    got = limitchecks.check([host("a"), host("b", replace(HEALTHY, glibc=None))], POLICY)
    (f,) = got
    assert f.subject == "glibc" and f.hosts == ("a", "b")
    assert dict(f.spread) == {"2.36": ("a",), "not glibc": ("b",)}


def _decide(reports: list[HostReport], policy: limitchecks.LimitsPolicy = POLICY) -> list[Finding]:
    from envtool.judge import gpu, verdict
    from envtool.judge.cluster_policy import ClusterPolicy

    cluster = ClusterPolicy(limits=policy)
    return verdict.decide(reports, None, verdict.Policy(gpu.GpuPolicy(min_gpus=0), cluster=cluster))


def test_verify_s_verdict_holds_the_policy_s_limits() -> None:
    reports = [host("a"), host("b", replace(HEALTHY, shm_bytes=64 * MiB))]
    assert [(f.kind, f.hosts) for f in _decide(reports)] == [(Kind.SHM_SMALL, ("b",))]
    assert _decide(reports, limitchecks.LimitsPolicy(shm_min_bytes=64 * MiB)) == []


def test_a_node_clock_shifted_by_five_minutes_is_named_through_its_answer() -> None:
    """No clock can be set wrong here without changing the system's: the node's answer is made
    with its time shifted by 300 s, as a node whose clock is 5 minutes ahead would print it."""
    import json
    import time

    from envtool.protocol.answers import host_report
    from envtool.protocol.types import Answer

    def answer(name: str, shift: float) -> Answer:
        started = time.time()
        doc = {"schema": "envtool.node/1", "node": name, "prefix": "/p",
               "facts": {"schema": "envtool.gpu-facts/1"},
               "limits": {"schema": "envtool.limits/1", "shm_bytes": 8 * GiB,
                          "nofile": [1048576, 1048576], "memlock": [-1, -1],
                          "kernel": "6.1.0-18-amd64", "glibc": "2.36"},
               "clock": {"time": started + 0.4 + shift, "elapsed": 0.3}}  # fmt: skip
        return Answer(name, 0, json.dumps(doc), "", 0.6, started=started)

    reports = [host_report(answer("a", 0.0)), host_report(answer("b", 300.0))]
    (f,) = [f for f in _decide(reports) if f.kind is not Kind.CUDA_UNAVAILABLE]  # info, CPU
    assert (f.kind, f.severity, f.hosts) == (Kind.CLOCK_SKEW, Severity.WARNING, ("b",))
    assert labels.words(f).actual == "300.0 s ahead of envtool's (± 0.1 s)"


# --- issue 37: a limit the container runtime set is the runtime's finding ----------------
RUN = limitchecks.Runtime(limitchecks.DOCKER_RUN, "--shm-size=64m", "--ulimit=memlock=65536", "")


def test_a_shm_docker_run_set_is_worded_as_the_runtime_s_with_its_option() -> None:
    small = [host("image", replace(HEALTHY, shm_bytes=64 * MiB))]
    (f,) = limitchecks.check(small, POLICY, run=RUN)
    assert (f.kind, f.cause, f.where) == (Kind.SHM_SMALL, "docker-run", "--shm-size=64m")
    w = labels.words(f)
    assert w.actual == "64 MiB (set by docker run --shm-size=64m: the runtime's, not the image's)"
    assert w.fix.startswith("start the container with --shm-size=1g (or --ipc=host)")
    assert "--docker-run-arg=--shm-size=1g" in w.fix and "tmpfs" not in w.fix
    # Docker's default (no option set it) is said so; a policy's floor rounds up to whole GiB
    default = replace(RUN, shm="")
    (f,) = limitchecks.check(
        small, limitchecks.LimitsPolicy(shm_min_bytes=3 * GiB // 2), run=default
    )
    w = labels.words(f)
    assert "Docker's default: no option set it" in w.actual and "--shm-size=2g" in w.fix


def test_a_running_container_s_limits_are_fixed_by_recreating_it() -> None:
    run = limitchecks.Runtime(limitchecks.CONTAINER)
    lim = replace(HEALTHY, shm_bytes=64 * MiB, memlock=(65536, 65536), nofile=(1024, 1048576))
    reports = [host("image", lim, network=_ib(True))]
    by_kind = {f.kind: labels.words(f) for f in limitchecks.check(reports, POLICY, run=run)}
    assert set(by_kind) == {Kind.SHM_SMALL, Kind.MEMLOCK_LOW, Kind.NOFILE_LOW}
    assert by_kind[Kind.SHM_SMALL].fix.startswith("recreate the container with docker run "
                                                  "--shm-size=1g (or --ipc=host)")  # fmt: skip
    assert "--ulimit=memlock=-1" in by_kind[Kind.MEMLOCK_LOW].fix
    assert "--ulimit=nofile=8192:8192" in by_kind[Kind.NOFILE_LOW].fix
    assert all("running container's" in w.actual for w in by_kind.values())


def test_a_node_s_own_limits_keep_the_node_s_words() -> None:
    small = [host("gpu01", replace(HEALTHY, shm_bytes=64 * MiB))]
    (f,) = limitchecks.check(small, POLICY, run=limitchecks.Runtime())
    assert (f.cause, f.where) == ("", "") and labels.words(f).actual == "64 MiB"
