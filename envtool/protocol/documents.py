"""The one reader of every document a node prints, validated into protocol/types.py.

Node output is untrusted: sizes are capped, every field's type is checked, and anything that
does not fit raises ``Malformed`` (a part) or ``Unreadable`` (a whole answer), which the
caller turns into that node's problem, never into a crash.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from envtool.errors import ProblemFound
from envtool.models import Environment, Package
from envtool.nccl.model import NcclDevice, NcclResult, NcclRow
from envtool.protocol import gpu_fields, gpu_types, limit_fields, limit_types, net_fields, schemas
from envtool.protocol.facts_fields import read_facts
from envtool.protocol.fields import (
    Malformed,
    count,
    integer,
    listing,
    mapping,
    number,
    string,
)
from envtool.protocol.net_types import Network
from envtool.protocol.rdzv_fields import read_rendezvous
from envtool.protocol.rdzv_types import RendezvousCheck
from envtool.protocol.types import (
    AllReduceResult,
    DdpSmoke,
    NodeFacts,
    Problem,
    ProblemKind,
)
from envtool_node.channels import canonical_name

MAX_DEVICES, MAX_ROWS, MAX_PACKAGES = 64, 4096, 100_000
_PARAMS = ("minbytes", "maxbytes", "stepfactor", "iters", "warmup_iters", "cudagraph")


class Unreadable(ProblemFound):
    """An answer that is no document at all: not JSON, too big, or another schema."""

    def __init__(self, source: str, detail: str) -> None:
        super().__init__(f"{source}: {detail}")
        self.detail = detail


def document(text: str, source: str, schema: str) -> dict[str, Any]:
    """One JSON object from a node's stdout, checked for its schema."""
    if len(text) > schemas.MAX_DOCUMENT:
        raise Unreadable(source, f"probe output too large ({len(text)} bytes)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        head = text.strip()[:60].replace("\n", " ")
        raise Unreadable(source, f"probe printed no valid JSON ({exc.msg}): {head!r}") from None
    except RecursionError:
        raise Unreadable(source, "probe printed JSON nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise Unreadable(source, f"probe printed no valid JSON ({str(exc)[:80]})") from None
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        raise Unreadable(source, f"not a {schema} document")
    return doc


def _placement(value: Any) -> NcclResult:
    doc = mapping(value, "a row's oop/ip")
    return NcclResult(
        number(doc, "time_us"), number(doc, "algbw"), number(doc, "busbw"), count(doc, "wrong")
    )


def _row(value: Any) -> NcclRow:
    doc = mapping(value, "a row")
    return NcclRow(
        count(doc, "size"),
        count(doc, "count"),
        _word(string(doc, "type", 20) or "float"),
        _word(string(doc, "redop", 20) or "sum"),
        integer(doc, "root", -1),
        _placement(doc.get("oop")),
        _placement(doc.get("ip")),
    )


def _word(text: str) -> str:
    """One token of a text layout: whitespace inside becomes ``_``."""
    return "_".join(text.split()) or "?"


def _rank(value: Any) -> NcclDevice:
    doc = mapping(value, "a rank's device")
    return NcclDevice(
        count(doc, "rank"),
        0,
        count(doc, "pid", 0),
        _word(string(doc, "host", 100) or "?"),
        count(doc, "device", 0),
        string(doc, "bus", 40) or "-",
        string(doc, "name", 100) or "?",
    )


def read_allreduce(value: Any) -> AllReduceResult:
    """envtool.allreduce/1 → AllReduceResult (a failed run keeps its one-line error)."""
    doc = mapping(value, "the all-reduce")
    backend = string(doc, "backend", 20) or "?"
    if doc.get("error") or doc.get("schema") != schemas.ALLREDUCE:
        error = str(doc.get("error") or "not an all-reduce document")[:300]
        if doc.get("cause") == schemas.CAUSE_PORT_TAKEN and doc.get("schema") == schemas.ALLREDUCE:
            port = count(doc, "port", 0)
            return AllReduceResult(backend, 0, error=error, cause=schemas.CAUSE_PORT_TAKEN,
                                   port=port if port < 65536 else 0)  # fmt: skip
        return AllReduceResult(backend, 0, error=error)
    member = doc.get("member") is True  # another node's rank 0 reports the run's result
    if member and not doc.get("rows"):
        return AllReduceResult(backend, 0, member=True)  # a member that sent no figures
    params = mapping(doc.get("params") or {}, "params")
    rows = listing(doc.get("rows"), "rows")
    return AllReduceResult(
        backend,
        count(doc, "nranks"),
        tuple(_row(r) for r in rows[:MAX_ROWS]),
        tuple(_rank(d) for d in listing(doc.get("devices"), "devices")[:MAX_DEVICES]),
        tuple((k, count(params, k)) for k in _PARAMS if k in params),
        count(doc, "wrong_total", 0),
        number({"avg_busbw": doc.get("avg_busbw", 0.0)}, "avg_busbw"),
        member=member,  # its own figures: the pair's other end (judge/pairs.py)
    )


_HEX64 = re.compile(r"[0-9a-f]{64}")  # a stamp's lock hash


def read_export(value: Any, source: str) -> Environment:
    """envtool.export/1 → the Environment it lists (conda records with their artifacts)."""
    doc = mapping(value, "the export")
    items = doc.get("packages")
    if not isinstance(items, list):
        raise Malformed(f"{source}: not an envtool export document (no 'packages' list)")
    packages = []
    for i, item in enumerate(items[:MAX_PACKAGES]):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("version"), str)
        ):
            raise Malformed(f"{source}: package #{i + 1} needs string 'name' and 'version'")
        channel = str(item.get("channel") or "")
        packages.append(
            Package(
                item["name"],
                item["version"],
                str(item.get("build") or ""),
                canonical_name(channel) if channel else "",
                "pip" if item.get("manager") == "pip" else "conda",
                str(item.get("url") or ""),
                str(item.get("md5") or ""),
                str(item.get("sha256") or ""),
            )
        )
    said = doc.get("stamp")
    stamp = said if isinstance(said, str) and _HEX64.fullmatch(said) else ""
    return Environment(
        source, "probe", tuple(packages), str(doc.get("name") or ""),
        str(doc.get("prefix") or ""), _unreadable(doc.get("unreadable")), stamp=stamp,
    )  # fmt: skip


def _unreadable(value: Any) -> tuple[tuple[str, str, str], ...]:
    """The records the node could not read (path, name, why), bounded; garbage is dropped."""
    if not isinstance(value, list):
        return ()
    return tuple(
        (str(item.get("path"))[:500], str(item.get("name"))[:200], str(item.get("why"))[:300])
        for item in value[:1000]
        if isinstance(item, dict)
    )


def read_export_text(text: str, source: str) -> Environment:
    """A JSON file holding an export, or a node/probe document that carries one."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise Malformed(f"{source}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise Malformed(f"{source}: JSON nested too deeply") from None
    if isinstance(doc, dict) and isinstance(doc.get("export"), dict):
        doc = doc["export"]  # a node or probe document that carries an export
    return read_export(doc, source)


def read_ddp(text: str, source: str) -> DdpSmoke:
    """envtool.ddp-smoke/1 → DdpSmoke."""
    doc = document(text, source, schemas.DDP_SMOKE)
    checks = doc.get("checks")
    checks = checks if isinstance(checks, dict) else {}
    diff = doc.get("grad_max_diff_across_ranks", 0.0)
    return DdpSmoke(
        string(doc, "backend", 20) or "?",
        doc["nranks"] if isinstance(doc.get("nranks"), int) else 0,
        doc.get("ok") is True,
        str(doc.get("error") or "")[:300],
        tuple((str(k)[:100], v is True) for k, v in list(checks.items())[:20]),
        float(diff) if isinstance(diff, (int, float)) and math.isfinite(diff) else math.inf,
    )


@dataclass(frozen=True)
class NodeDocument:
    """envtool.node/1, each part read or turned into a Problem."""

    node: str
    prefix: str
    env: Environment | None
    facts: NodeFacts | None
    allreduce: AllReduceResult | None
    problems: tuple[Problem, ...]
    gpus: gpu_types.GpuLayer | None = None
    network: Network | None = None
    rendezvous: RendezvousCheck | None = None
    limits: limit_types.Limits | None = None
    clock: limit_types.ClockReading | None = None  # the node's clock when it printed


_PART_KINDS = {
    schemas.PART_ENV_MISSING: ProblemKind.ENV_MISSING,
    schemas.PART_INCOMPLETE: ProblemKind.INCOMPLETE,
}


def _part(doc: dict[str, Any], key: str, read: Any, problems: list[Problem]) -> Any:
    value = doc.get(key)
    if value is None:
        return None
    prefix = str(doc.get("prefix") or "")[:500]
    if isinstance(value, dict) and set(value) <= {"error", "kind"} and "error" in value:
        kind = _PART_KINDS.get(str(value.get("kind")), ProblemKind.FAILED)
        problems.append(Problem(key, kind, str(value["error"])[:300], prefix))
        return None
    try:
        return read(value)
    except (ValueError, TypeError, KeyError, OverflowError) as exc:  # Malformed, and the rest
        problems.append(Problem(key, ProblemKind.MALFORMED, str(exc)[:200]))
        return None


def read_node(text: str, source: str) -> NodeDocument:
    """A node's whole answer (envtool.node/1); Unreadable when it is no such document."""
    doc = document(text, source, schemas.NODE)
    problems: list[Problem] = []
    env = _part(doc, "export", lambda d: read_export(d, source), problems)
    facts = _part(doc, "facts", read_facts, problems)
    allreduce = _part(doc, "allreduce", read_allreduce, problems)
    gpus = _part(doc, "gpus", gpu_fields.read_gpus, problems)
    network = _part(doc, "network", net_fields.read_network, problems)
    rendezvous = _part(doc, "rendezvous", read_rendezvous, problems)
    limits, clock = (_part(doc, key, read, problems) for key, read in limit_fields.PARTS)
    if env is None and facts is None and allreduce is None and gpus is None and not problems:
        problems.append(Problem("answer", ProblemKind.EMPTY, "neither an export nor GPU facts"))
    node = doc.get("node")
    return NodeDocument(
        node[:253] if isinstance(node, str) else "", str(doc.get("prefix") or "")[:500],
        env, facts, allreduce, tuple(problems), gpus, network=network, limits=limits, clock=clock,
        rendezvous=rendezvous,
    )  # fmt: skip
