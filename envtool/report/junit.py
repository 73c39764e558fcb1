"""A verify report as JUnit XML: one testcase per host and check, for CI dashboards."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from envtool.judge.findings import Check, Kind
from envtool.judge.rules import check_of, explains_check
from envtool.protocol.verify_report import HostEntry, VerifyDocument


def _not_run(doc: VerifyDocument, host: HostEntry, check: Check) -> str:
    """Why ``check`` did not run on ``host`` ("": it ran): a cause that stops every other
    check there (no environment, unreachable), no lock, no all-reduce, no gpus, network or limits
    part from the node (an older node, or the part failed)."""
    for f in doc.findings:
        kind = Kind(f.kind)
        if host.host in f.hosts and check_of(kind) is not check and explains_check(kind, check):
            return f"not checked: {f.kind} on this host"
    if check is Check.LOCK and doc.lockfile is None:
        return "not checked: no lock (--no-lock)"
    if check is Check.ALLREDUCE and host.allreduce is None:
        return "not checked: no all-reduce ran on this host"
    if check is Check.GPU and host.gpus is None:
        return "not checked: this host sent no gpus part"
    if check is Check.NETWORK and host.network is None:
        return "not checked: this host sent no network part"
    if check is Check.LIMITS and host.limits is None:
        return "not checked: this host sent no limits part"
    return ""


def render(doc: VerifyDocument) -> str:
    """``<testsuites>`` with one ``<testcase classname=HOST name=CHECK>`` per host and check."""
    suite = ET.Element("testsuite", name="envtool verify", time=f"{doc.seconds:.3f}")
    if doc.docker_run:  # --image: what the runtime-set limits were judged under
        properties = ET.SubElement(suite, "properties")
        ET.SubElement(properties, "property", name="docker_run", value=" ".join(doc.docker_run))
    failures = 0
    skipped = 0
    for host in doc.hosts:
        for check in Check:
            case = ET.SubElement(
                suite, "testcase", classname=host.host, name=check.value, time=f"{host.seconds:.3f}"
            )
            mine = [
                f for f in doc.findings if host.host in f.hosts and check_of(Kind(f.kind)) is check
            ]
            why = _not_run(doc, host, check)
            if why and not mine:  # never a pass for a check that did not run
                skipped += 1
                ET.SubElement(case, "skipped", message=why)
                continue
            for f in (f for f in mine if f.severity == "error"):
                failures += 1
                failure = ET.SubElement(
                    case,
                    "failure",
                    type=f.kind,
                    message=f"{f.subject}: expected {f.expected}, got {f.actual}",
                )
                failure.text = f"fix: {f.hint}"
            notes = [
                f"{f.severity} {f.kind} {f.subject}: {f.actual}"
                for f in mine
                if f.severity != "error"
            ]
            if notes:
                ET.SubElement(case, "system-out").text = "\n".join(notes)
    return text(suite, len(doc.hosts) * len(Check), failures, skipped)


def text(suite: ET.Element, tests: int, failures: int, skipped: int | None = None) -> str:
    """One ``<testsuite>`` with its counts, inside ``<testsuites>``, as the XML document every
    envtool JUnit report is (verify, explain, fix)."""
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    if skipped is not None:
        suite.set("skipped", str(skipped))
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
