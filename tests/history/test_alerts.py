"""The alert rules docs/ ships (docs/prometheus/alerts.yml), checked by the real ``promtool
check rules`` and run by ``promtool test rules`` (Prometheus's own rule unit tests) on the
series envtool writes: an error finding present for 10 minutes fires, with the finding's own
labels, and a warning never does; a failed check fires; two days without a run fires
``EnvtoolStale``. The YAML docs/commands/history.md shows is that file's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from conftest import require

DOCS = Path(__file__).resolve().parents[2] / "docs"
RULES = DOCS / "prometheus" / "alerts.yml"

UNIT = """\
rule_files: [{rules}]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'envtool_finding{{host="node3",kind="version-differs",severity="error",subject="nccl"}}'
        values: '1x30'
      - series: 'envtool_finding{{host="node4",kind="shm-small",severity="warning",subject="/dev/shm"}}'
        values: '1x30'
      - series: 'envtool_check_ok{{host="node3",check="lock"}}'
        values: '0x30'
      - series: 'envtool_check_ok{{host="node4",check="lock"}}'
        values: '1x30'
    alert_rule_test:
      - eval_time: 9m
        alertname: EnvtoolFindingError
        exp_alerts: []
      - eval_time: 11m
        alertname: EnvtoolFindingError
        exp_alerts:
          - exp_labels: {{host: node3, kind: version-differs, severity: error, subject: nccl}}
            exp_annotations:
              summary: "node3: version-differs nccl"
              description: "envtool verify: run `envtool verify` for the fix line"
      - eval_time: 11m
        alertname: EnvtoolCheckFailed
        exp_alerts:
          - exp_labels: {{host: node3, check: lock, severity: warning}}
            exp_annotations: {{summary: "node3: envtool's lock check fails"}}
  - interval: 1h
    input_series:
      - series: envtool_run_timestamp_seconds
        values: '0x80'
    alert_rule_test:
      - eval_time: 47h
        alertname: EnvtoolStale
        exp_alerts: []
      - eval_time: 49h
        alertname: EnvtoolStale
        exp_alerts:
          - exp_annotations: {{summary: "no envtool run recorded for two days"}}
"""  # noqa: E501


def _promtool() -> str:
    tool = shutil.which("promtool")
    require(tool is not None, "promtool is not installed (apt-get install prometheus)")
    assert tool is not None
    return tool


def test_promtool_checks_the_rules_and_their_unit_tests_pass(tmp_path: Path) -> None:
    tool = _promtool()
    done = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0 and "SUCCESS: 3 rules found" in done.stdout, done
    unit = tmp_path / "alerts_test.yml"
    unit.write_text(UNIT.format(rules=RULES))
    done = subprocess.run([tool, "test", "rules", str(unit)], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_docs_show_the_rules_shipped() -> None:
    shown = (DOCS / "commands" / "history.md").read_text()
    rules = RULES.read_text()
    assert rules[rules.index("groups:") :] in shown
