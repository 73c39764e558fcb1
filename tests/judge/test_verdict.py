"""The verdict over a verify run: folding, reachability, one cause → one finding, no false
majority."""

from __future__ import annotations

from test_gpu import facts

from envtool.judge import gpu, verdict
from envtool.judge.findings import Kind, Severity
from envtool.models import Environment, Package
from envtool.protocol.types import (
    Failure,
    HostReport,
    Outcome,
    Problem,
    ProblemKind,
)

POLICY = verdict.Policy(gpu.GpuPolicy(min_gpus=8, locked_cuda="11.8"))
LOCK = Environment(
    "conda-lock.yml",
    "lock",
    (Package("pytorch", "2.1.0", "cuda118_0"), Package("nccl", "2.18.3.1", "h0")),
)


def _env(*pkgs: Package) -> Environment:
    return Environment("x", "probe", pkgs)


def test_decide_folds_identical_findings() -> None:
    cpu = _env(Package("pytorch", "2.1.0", "cpu_0"), Package("nccl", "2.18.3.1", "h0"))
    rs = [HostReport(h, env=cpu, facts=facts()) for h in ("gpu01", "gpu02")]
    rs.append(HostReport("gpu03", Failure(Outcome.SSH_FAILED, "Connection refused", 255)))
    found = verdict.decide(rs, LOCK, POLICY)
    build = [f for f in found if f.kind is Kind.BUILD_DIFFERS]
    assert len(build) == 1 and build[0].hosts == ("gpu01", "gpu02")
    assert any(f.kind is Kind.UNREACHABLE and f.hosts == ("gpu03",) for f in found)


def test_an_nccl_drift_is_one_finding_not_two() -> None:
    """node3's nccl package differs from the lock; its NCCL runtime version differs from the
    others for that very reason: one finding (the package), not a second "majority" one."""
    good = _env(*LOCK.packages)
    old = _env(LOCK.packages[0], Package("nccl", "2.16.5.1", "h1"))
    rs = [
        HostReport("node1", env=good, facts=facts()),
        HostReport("node2", env=good, facts=facts()),
        HostReport("node3", env=old, facts=facts(nccl="2.16.5")),
    ]
    found = verdict.decide(rs, LOCK, POLICY)
    assert [(f.kind, f.subject, f.hosts) for f in found] == [
        (Kind.VERSION_DIFFERS, "nccl", ("node3",))
    ]


def test_a_runtime_difference_without_a_package_cause_is_still_named() -> None:
    """node3's records match the lock but its process loads NCCL 2.16.5: named against the
    lock (runtime-differs), not again as a difference from the other nodes."""
    good = _env(*LOCK.packages)
    rs = [HostReport(h, env=good, facts=facts(torch="2.1.0")) for h in ("node1", "node2")]
    rs.append(HostReport("node3", env=good, facts=facts(torch="2.1.0", nccl="2.16.5")))
    found = verdict.decide(rs, LOCK, POLICY)
    assert [(f.kind, f.subject, f.hosts, f.expected, f.actual) for f in found] == [
        (Kind.RUNTIME_DIFFERS, "NCCL", ("node3",), "2.18.3", "2.16.5")
    ]


def test_two_nodes_that_differ_claim_no_majority() -> None:
    numpy1, numpy2 = Package("numpy", "1.26.4", "0"), Package("numpy", "2.0.0", "0")
    rs = [
        HostReport("a", env=_env(*LOCK.packages, numpy1), facts=facts(env=())),
        HostReport("b", env=_env(*LOCK.packages, numpy2), facts=facts(env=())),
    ]
    found = verdict.decide(rs, None, POLICY)
    (f,) = [f for f in found if f.subject == "numpy"]
    assert f.kind is Kind.DIFFERS_BETWEEN_NODES and f.hosts == ("a", "b")
    assert f.spread == (("numpy=1.26.4=0", ("a",)), ("numpy=2.0.0=0", ("b",)))
    rs.append(HostReport("c", env=_env(*LOCK.packages, numpy1), facts=facts(env=())))
    (f,) = [f for f in verdict.decide(rs, None, POLICY) if f.subject == "numpy"]
    assert (f.kind, f.expected, f.actual, f.hosts) == (
        Kind.DIFFERS_FROM_MAJORITY,
        "numpy=1.26.4=0",
        "numpy=2.0.0=0",
        ("b",),
    )


def test_without_a_lock_a_ddp_critical_package_that_differs_is_an_error() -> None:
    """--no-lock: a node whose pytorch build differs from the others' fails the check (a
    differing numpy stays a warning); "all good" never rests on two pytorch builds."""
    torch1, torch2 = Package("pytorch", "2.1.0", "cuda118_0"), Package("pytorch", "2.1.0", "cpu_0")
    numpy1, numpy2 = Package("numpy", "1.26.4", "0"), Package("numpy", "2.0.0", "0")
    rs = [
        HostReport(h, env=_env(t, n), facts=facts(env=()))
        for h, t, n in (("a", torch1, numpy1), ("b", torch1, numpy1), ("c", torch2, numpy2))
    ]
    found = {f.subject: f for f in verdict.decide(rs, None, POLICY)}
    torch = found["torch"]  # conda pytorch and pip torch are matched as one key
    assert torch.kind is Kind.DIFFERS_FROM_MAJORITY
    assert torch.severity is Severity.ERROR and torch.hosts == ("c",)
    assert found["numpy"].severity is Severity.WARNING


def test_env_missing_comes_from_the_exit_code_or_the_part_not_from_prose() -> None:
    rs = [
        HostReport("a", Failure(Outcome.ENV_MISSING, "whatever it says", 96, "/opt/env")),
        HostReport("b", problems=(Problem("export", ProblemKind.ENV_MISSING, "anything", "/e"),)),
        HostReport("c", problems=(Problem("export", ProblemKind.INCOMPLETE, "half", "/e"),)),
    ]
    found = {(f.kind, f.actual, f.hosts) for f in verdict.decide(rs, None, POLICY)}
    assert (Kind.ENV_MISSING, "/opt/env", ("a",)) in found
    assert (Kind.ENV_MISSING, "anything", ("b",)) in found  # the node's words for the prefix
    assert any(k is Kind.PROBE_FAILED and h == ("c",) for k, _, h in found)


def test_cluster_allreduce_without_a_rank0_result() -> None:
    from envtool.protocol.types import AllReduceResult

    member = AllReduceResult("gloo", 0, member=True)
    rs = [HostReport(h, facts=facts(), allreduce=member) for h in ("a", "b")]
    policy = verdict.Policy(gpu.GpuPolicy(min_gpus=8), "cluster")
    failed = [f for f in verdict.decide(rs, None, policy) if f.kind is Kind.ALLREDUCE_FAILED]
    assert len(failed) == 1 and failed[0].hosts == ("a", "b")
    assert failed[0].cause == gpu.CAUSE_NO_RANK0


def test_a_prefix_without_conda_meta_explains_what_its_python_loads() -> None:
    """--prefix at a venv: the export says env-missing; the facts its python gave (another
    python, no torch, no CUDA, 0 GPUs) follow from that and are not findings of their own."""
    missing = Problem("export", ProblemKind.ENV_MISSING, "no conda environment at /v", "/v")
    cpu = facts(python="3.11.7", torch=None, cuda=None, cuda_available=False, device_count=0)
    rs = [
        HostReport("a", facts=cpu, problems=(missing,)),
        HostReport("b", env=_env(*LOCK.packages), facts=facts()),
    ]
    found = verdict.decide(rs, LOCK, POLICY)
    on_a = [f for f in found if "a" in f.hosts]
    assert [(f.kind, f.hosts) for f in on_a] == [(Kind.ENV_MISSING, ("a",))]
    assert on_a[0].follows >= 2  # cuda-unavailable, too-few-gpus, at least


def test_no_cuda_explains_too_few_gpus_on_that_node_only() -> None:
    rs = [
        HostReport(
            "a", env=_env(*LOCK.packages), facts=facts(cuda_available=False, device_count=0)
        ),
        HostReport("b", env=_env(*LOCK.packages), facts=facts(device_count=4)),
    ]
    found = {f.kind: f for f in verdict.decide(rs, LOCK, POLICY)}
    assert found[Kind.CUDA_UNAVAILABLE].hosts == ("a",) and found[Kind.CUDA_UNAVAILABLE].follows
    assert found[Kind.TOO_FEW_GPUS].hosts == ("b",)  # b's own shortfall stays


def test_explain_drops_only_the_hosts_a_cause_covers() -> None:
    from envtool.judge.findings import Finding, explain

    cause = Finding(Kind.ENV_MISSING, Severity.ERROR, "environment", hosts=("a",))
    other = Finding(Kind.VERSION_MISMATCH, Severity.ERROR, "torch", hosts=("a", "c"),
                    spread=(("2.1", ("a",)), ("2.2", ("c",))))  # fmt: skip
    same_kind = Finding(Kind.ENV_MISSING, Severity.ERROR, "environment", hosts=("b",))
    out = explain([cause, other, same_kind])
    assert out[0].follows == 1 and out[2] == same_kind  # a cause never explains its own kind
    assert out[1].hosts == ("c",) and out[1].spread == (("2.2", ("c",)),)


def test_a_record_conda_ignores_is_named_by_its_file_not_called_absent() -> None:
    """pytorch's record carries a version with '-' (no conda version): conda ignores it; the
    finding names that file, and the package is not also "missing" (nccl's absence still is)."""
    why = "conda ignores it: its file name is not pytorch-2.1-0-cuda118_0.json"
    path = "/e/conda-meta/pytorch-2.1-0-cuda118_0.json"
    env = Environment("x", "probe", (), unreadable=((path, "pytorch", why),))
    found = verdict.decide([HostReport("a", env=env, facts=facts())], LOCK, POLICY)
    kinds = {(f.kind, f.subject) for f in found}
    assert (Kind.RECORD_UNREADABLE, "pytorch") in kinds and (Kind.MISSING, "nccl") in kinds
    assert (Kind.MISSING, "pytorch") not in kinds
    (bad,) = [f for f in found if f.kind is Kind.RECORD_UNREADABLE]
    assert bad.actual == f"{path}: {why}" and bad.follows == 1


def test_a_taken_rendezvous_port_is_the_finding_not_the_nodes() -> None:
    """node a hosts the store and found its port held; b waited in vain; no rank 0 anywhere.
    One finding: the port on a, with its holder; b's failure follows from it."""
    from envtool.protocol.types import AllReduceResult

    why = "rendezvous port 29400 on this node is already taken by nobody (uid 65534)"
    taken = AllReduceResult("?", 0, error=why, cause="rdzv-port-taken", port=29400)
    waited = AllReduceResult("gloo", 0, error="RendezvousTimeoutError: no result within 30 s")
    rs = [HostReport("a", facts=facts(), allreduce=taken),
          HostReport("b", facts=facts(), allreduce=waited)]  # fmt: skip
    policy = verdict.Policy(gpu.GpuPolicy(min_gpus=8), "cluster")
    found = [f for f in verdict.decide(rs, None, policy) if f.kind.value.startswith(("all", "ren"))]
    assert [(f.kind, f.hosts) for f in found] == [(Kind.RDZV_PORT_TAKEN, ("a",))]
    assert found[0].expected == "port 29400 free for envtool's store" and found[0].actual == why
    assert found[0].follows == 1  # b's failure


def test_no_policy_makes_a_failed_all_reduce_info() -> None:
    """Even a ClusterPolicy made in code (policy.py refuses it in a file) cannot accept a
    failed or wrong all-reduce; an acceptable kind beside it becomes info (issue 33 item 5)."""
    from envtool.judge.cluster_policy import ClusterPolicy
    from envtool.judge.findings import Finding

    kinds = (Kind.ALLREDUCE_FAILED, Kind.ALLREDUCE_WRONG, Kind.GPU_BUSY)
    found = [Finding(k, Severity.ERROR, "all-reduce", hosts=("n1",)) for k in kinds]
    policy = ClusterPolicy(accept=frozenset(kinds))
    after = [f.severity for f in verdict.accepted(found, policy)]
    assert after == [Severity.ERROR, Severity.ERROR, Severity.INFO]
