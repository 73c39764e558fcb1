"""docs/findings.md, made from the one table of finding kinds (judge/rules.py):
``python -m envtool.report.findings_doc > docs/findings.md`` (a test keeps the two equal)."""

from __future__ import annotations

from envtool.judge.rules import EVERYTHING, MACHINE, RULES, Rule

_HEAD = """# Finding kinds

<!-- Generated from envtool/judge/rules.py by `python -m envtool.report.findings_doc`;
edit the table there, not here (tests/report/test_findings_doc.py keeps them equal). -->

Each finding of `envtool diff` and `envtool verify` has a kind, a severity, the hosts, what was
expected, what was found, and a one-line fix. Exit code 1 means at least one `error` (for
`diff`, any difference; a problem inside one input is listed apart and does not count).
Findings are data (`envtool/judge/findings.py`); every kind has one row in one table
(`envtool/judge/rules.py`): its check, its severity, what it explains away, its fix; their
words are made in `envtool/report/labels.py`.

Severities say what matters for a DDP run: a difference in python, torch, NCCL, CUDA (any
packaging: `cudatoolkit`, `cuda-version`, `cuda-*`, `pytorch-cuda`, `nvidia-*` wheels), cuDNN,
MPI/UCX/libfabric, triton, torchvision/torchaudio is an error; the same difference in an
ordinary package (`anyio`, `numpy`) is a warning (`envtool/judge/critical.py`). A missing
package and another artifact stay errors whatever the package. Reports list the DDP-critical
findings first and count the others per kind (`--all` lists them).

One cause, one finding: a finding whose row says it *explains* other kinds drops them on its
own hosts, and the report says how many "follow from this". A node without the environment
gets one `env-missing` and nothing about the python, torch or GPUs some other interpreter
would have shown; a node where CUDA is unavailable is not also told it has too few GPUs. A
runtime fact (torch, NCCL, cuDNN, python) that differs where a package finding on that node
already differs is not reported again, nor a cross-node mismatch for a node whose own
finding explains it.

| kind | severity | cause | fix | explains away |
|---|---|---|---|---|
"""


def _explains(rule: Rule) -> str:
    if rule.explains == EVERYTHING:
        return "every other finding on its hosts"
    if rule.explains == EVERYTHING - MACHINE:
        return "every other finding on its hosts but the GPU, network and limits ones"
    return ", ".join(f"`{k.value}`" for k in sorted(rule.explains, key=lambda k: k.value))


def render() -> str:
    """The whole page."""
    rows = [
        f"| `{kind.value}` | {rule.when} | {rule.cause} | {rule.docs_fix} | {_explains(rule)} |"
        for kind, rule in RULES.items()
    ]
    return _HEAD + "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render(), end="")
