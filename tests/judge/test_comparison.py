"""``envtool diff``'s pure answer: differences apart from the problems inside each input."""

from __future__ import annotations

from envtool.judge import comparison
from envtool.judge.findings import Kind
from envtool.models import Environment, Package

CF = "conda-forge"
PYTORCH = Package("pytorch", "2.1.0", "cuda118_py39h0a6d3b2_300", CF)
NUMPY = Package("numpy", "1.26.4", "py39h474f0d3_0", CF)
PIP_TORCH = Package("torch", "2.1.0", manager="pip")
PIP_NUMPY = Package("numpy", "1.26.4", manager="pip")


def _env(*pkgs: Package, source: str = "A") -> Environment:
    return Environment(source, "lock", pkgs)


def _kinds(findings: tuple[object, ...]) -> list[tuple[str, str]]:
    return [(f.kind.value, f.subject) for f in findings]  # type: ignore[attr-defined]


def test_an_environment_is_identical_to_itself_whatever_it_holds() -> None:
    env = _env(PYTORCH, NUMPY, PIP_TORCH, PIP_NUMPY)
    c = comparison.compare(env, env)
    assert c.identical and c.differences == ()
    # one cause, one finding: pip torch over conda pytorch is two-torches, not also shadowing
    assert _kinds(c.inside_a) == [("two-torches", "torch"), ("pip-shadowing", "numpy")]
    assert c.inside_b == c.inside_a


def test_a_pip_copy_one_side_alone_has_is_a_difference() -> None:
    plain, shadowed = _env(PYTORCH, NUMPY), _env(PYTORCH, NUMPY, PIP_TORCH, source="B")
    c = comparison.compare(plain, shadowed)
    assert _kinds(c.differences) == [("pip-shadowing", "torch")]
    assert c.inside_a == () and _kinds(c.inside_b) == [("two-torches", "torch")]
    back = comparison.compare(shadowed, plain)
    assert [(f.kind, f.subject, f.reference) for f in back.differences] == [
        (Kind.MISSING, "torch", PIP_TORCH.identity())
    ]


def test_every_manager_both_sides_have_is_compared() -> None:
    newer = Package("torch", "2.2.0", manager="pip")
    c = comparison.compare(_env(PYTORCH, PIP_TORCH), _env(PYTORCH, newer, source="B"))
    assert _kinds(c.differences) == [("version-differs", "torch")]
