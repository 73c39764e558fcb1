"""``envtool explain --format junit``: the verdict as JUnit XML for a CI job that ran the
training (one testcase ``verdict``: a failure naming the cause, or the failure whose cause is
not established; then one testcase per finding, its evidence line in the failure's text)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from envtool.protocol import explain_report as er
from envtool.report import junit


def _case(suite: ET.Element, name: str, kind: str, message: str, text: str) -> None:
    case = ET.SubElement(suite, "testcase", classname="envtool explain", name=name)
    failure = ET.SubElement(case, "failure", type=kind, message=message)
    failure.text = text


def render(doc: er.ExplainDocument) -> str:
    """``<testsuites>`` with the verdict first, then each finding."""
    suite = ET.Element("testsuite", name="envtool explain")
    tests = failures = 0
    if doc.status == "no-failure":
        ET.SubElement(suite, "testcase", classname="envtool explain", name="verdict")
        tests = 1
    for i, f in enumerate(doc.findings):
        e = f.finding
        lines = [f"{x.file}:{x.line} [{x.where}]: {x.text}" for x in f.evidence[:5]]
        name = "verdict" if i == 0 and doc.status != "no-failure" else f"{e.kind} {e.subject}"
        message = doc.verdict if name == "verdict" else f"{e.subject}: {e.actual}"
        if e.severity == "error":
            _case(suite, name, e.kind, message, "\n".join([f"fix: {e.hint}", *lines]))
            failures += 1
        else:
            case = ET.SubElement(suite, "testcase", classname="envtool explain", name=name)
            ET.SubElement(case, "system-out").text = "\n".join([message, *lines])
        tests += 1
    for j in doc.joined:
        e = j.finding
        name = f"{j.role}: {e.kind} {e.subject} ({', '.join(e.hosts)})"
        case = ET.SubElement(suite, "testcase", classname=f"envtool explain {j.report}", name=name)
        ET.SubElement(case, "system-out").text = f"{e.actual}\nfix: {e.hint}"
        tests += 1
    return junit.text(suite, tests, failures)
