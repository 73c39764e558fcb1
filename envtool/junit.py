"""A verify result as JUnit XML (pure): one testcase per host and check, for CI dashboards."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from envtool.models import Finding, HostReport

CHECKS = {
    "reachable": ("unreachable", "probe-failed", "env-missing"),
    "lock": (
        "missing",
        "extra",
        "version-differs",
        "build-differs",
        "channel-differs",
        "manager-differs",
        "pip-shadowing",
    ),
    "majority": (
        "differs-from-majority",
        "version-mismatch",
        "gpu-count-differs",
        "nccl-env-differs",
    ),
    "gpu": ("cuda-unavailable", "too-few-gpus", "driver-too-old", "driver-minor-compat"),
    "allreduce": ("allreduce-failed", "allreduce-wrong", "busbw-low"),
}


def _check_of(kind: str) -> str:
    for check, kinds in CHECKS.items():
        if kind in kinds:
            return check
    return "other"


def render(reports: tuple[HostReport, ...], findings: tuple[Finding, ...], seconds: float) -> str:
    """``<testsuites>`` with one ``<testcase classname=HOST name=CHECK>`` per host and check."""
    suite = ET.Element("testsuite", name="envtool verify", time=f"{seconds:.3f}")
    failures = 0
    for report in reports:
        for check in CHECKS:
            case = ET.SubElement(
                suite, "testcase", classname=report.host, name=check, time=f"{report.seconds:.3f}"
            )
            mine = [f for f in findings if report.host in f.hosts and _check_of(f.kind) == check]
            errors = [f for f in mine if f.severity == "error"]
            for f in errors:
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
    suite.set("tests", str(len(reports) * len(CHECKS)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
