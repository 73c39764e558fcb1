"""What the rendezvous check leaves unchecked is said in the report, not only in the docs
(cluster/rdzv.unchecked, carried by verify's plan into Verdict.unchecked): an endpoint that is
no listed host, more hosts than --fanout, the local and docker transports. No node is
contacted: the plan is made as verify makes it, the report rendered as verify renders it."""

from __future__ import annotations

import json

import pytest

from envtool.cluster import hosts, rdzv
from envtool.cluster.options import FanoutOptions
from envtool.commands import verify
from envtool.judge import verdict as judge
from envtool.protocol import verify_report as vr
from envtool.protocol.types import HostReport
from envtool.report import verify as report

THREE = hosts.resolve("node[1-3]")
UNLISTED = (
    "rendezvous port (the endpoint is not one of the hosts: "
    "only its name was resolved on each node)"
)


@pytest.mark.parametrize(
    ("at", "options", "says"),
    [
        ("node1:29400", FanoutOptions(), None),  # checked from every node
        ("node2:29500", FanoutOptions(transport="slurm"), None),
        ("gateway:29400", FanoutOptions(), UNLISTED),
        ("node1:29400", FanoutOptions(fanout=2), "more hosts than --fanout 2"),
        ("node1:29400", FanoutOptions(transport="local"), "local nodes share this machine"),
        ("node1:29400", FanoutOptions(transport="docker"), "docker nodes share this machine"),
    ],
)
def test_why_the_port_is_not_checked_follows_what_the_nodes_are_told(
    at: str, options: FanoutOptions, says: str | None
) -> None:
    why = rdzv.unchecked(THREE, at, options)
    told = rdzv.args(THREE, at, options)
    if says is None:
        assert why is None and told[:4] == ("--rdzv-check", at, "--rdzv-nodes", "3")
    else:
        assert why is not None and says in why
        assert told == () or told[3] == "0"  # not run, or only the name resolved
    assert rdzv.unchecked(THREE[:1], at, options) is None  # one host: no rendezvous to cross


def _plan(endpoint: str, min_busbw: float | None = None) -> verify.Plan:
    args = verify.VerifyArgs("node[1-3]", None, FanoutOptions(), rdzv_endpoint=endpoint,
                             min_gpus=0, min_busbw=min_busbw)  # fmt: skip
    return verify.plan(args)


def test_an_unlisted_endpoint_is_said_in_the_text_and_the_json_report() -> None:
    plan = _plan("gateway.example:29400")
    assert plan.unchecked == (UNLISTED,)
    assert "--rdzv-nodes" in plan.fan.node_args
    assert plan.fan.node_args[plan.fan.node_args.index("--rdzv-nodes") + 1] == "0"
    reports = tuple(HostReport(h.name) for h in plan.hosts)
    found = tuple(judge.decide(list(reports), None, plan.policy))
    result = judge.Verdict(reports, found, "", 1.0, None, plan.unchecked)
    text = " ".join(report.render(result, width=100).split())
    assert "all good: " in text and f"not checked: {UNLISTED}" in text
    body = json.loads(vr.dumps(report.document(result)))
    assert body["unchecked"] == [UNLISTED]
    assert vr.loads(json.dumps(body), "r.json").unchecked == (UNLISTED,)


def test_a_listed_endpoint_says_nothing_and_other_reasons_stay_beside_it() -> None:
    assert _plan("node2:29500").unchecked == ()
    assert _plan("gateway:29400", min_busbw=5.0).unchecked == (
        "busbw (--min-busbw/--baseline need an --allreduce mode)",
        UNLISTED,
    )


@pytest.mark.parametrize(
    ("environ", "at"),
    [
        ({}, "node1:29400"),  # torchrun's default port on the first host
        ({"MASTER_PORT": "29555"}, "node1:29555"),  # a job script's port, on the first host
        ({"MASTER_ADDR": "node2", "MASTER_PORT": "29555"}, "node2:29555"),
        ({"MASTER_ADDR": "node2"}, "node2:29400"),
        ({"MASTER_PORT": "70000"}, "node1:29400"),  # not a port: the default
    ],
)
def test_the_endpoint_from_the_job_s_variables(environ: dict[str, str], at: str) -> None:
    assert rdzv.endpoint(THREE, "", environ) == at
    assert rdzv.endpoint(THREE, "gw:1234", environ) == "gw:1234"  # --rdzv-endpoint wins


def test_a_master_port_of_other_digits_is_not_a_port() -> None:
    """``'²'.isdigit()`` is true and ``int('²')`` raises: such a MASTER_PORT falls back to
    torchrun's default like any other value that is no port, never a traceback."""
    for bad in ("²", "２９５００", "0", "70000", "29x"):
        assert rdzv.endpoint(THREE, "", {"MASTER_PORT": bad}) == "node1:29400", bad
    assert rdzv.endpoint(THREE, "", {"MASTER_PORT": "29500"}) == "node1:29500"
