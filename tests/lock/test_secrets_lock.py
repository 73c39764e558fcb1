"""A channel behind a token and a password, locked and installed for real: the lock and the
prefix's conda-meta records hold ``${VAR}`` templates (and the lock ``used_env_vars``), never
the secret, which is filled in only in memory to fetch (issue 24 item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ENV_TEMPLATE, Project, serve

SECRET, PASSWORD = "tk-5ecret-123", "hunter2-5ecret"


@pytest.fixture
def behind_a_token(channel: Path, tmp_path: Path) -> Path:
    """The tests' channel served at /t/<token>/lab (as anaconda.org serves private channels)."""
    root = tmp_path / "site"
    (root / "t" / SECRET).mkdir(parents=True)
    (root / "t" / SECRET / "lab").symlink_to(channel)
    return root


def test_the_lock_and_the_records_hold_templates_never_the_secret(
    behind_a_token: Path, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAB_REPO_TOKEN", SECRET)
    monkeypatch.setenv("LAB_CHANNEL_PASSWORD", PASSWORD)
    with serve(behind_a_token) as url:
        host = url.removeprefix("http://")
        literal = f"http://bob:{PASSWORD}@{host}/t/{SECRET}/lab"
        project.write_env(ENV_TEMPLATE.format(channel=literal))
        code, out, err = project.run("lock")
        assert code == 0, err
        prefix = project.root / "env"
        code, out2, err2 = project.run("install", "--prefix", str(prefix))
    assert code == 0, err2
    out, err = out + out2, err + err2
    records = "".join(p.read_text() for p in (prefix / "conda-meta").glob("*.json"))
    assert records and SECRET not in records and PASSWORD not in records
    assert "/t/${LAB_REPO_TOKEN}/lab/" in records  # each record keeps the template
    cached = [p for p in project.cache.rglob("*.json") if SECRET in p.read_text(errors="replace")]
    assert cached == [], cached  # nor the package cache's records
    text = project.lock.read_text()
    assert SECRET not in text and PASSWORD not in text and SECRET not in out + err
    assert f"http://bob:${{LAB_CHANNEL_PASSWORD}}@{host}/t/${{LAB_REPO_TOKEN}}/lab" in text
    assert "used_env_vars: [LAB_CHANNEL_PASSWORD, LAB_REPO_TOKEN]" in text or (
        "- LAB_CHANNEL_PASSWORD\n" in text and "- LAB_REPO_TOKEN\n" in text
    )
    assert "/t/${LAB_REPO_TOKEN}/lab/linux-64/" in text  # each package URL too
    # the templated channel is read back everywhere (was: "Port could not be cast", exit 3)
    code, out, err = project.run("diff", str(project.lock), str(prefix))
    assert code == 0 and out.startswith("identical: "), out + err


def test_a_literal_secret_no_variable_holds_is_refused_unshown(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LAB_REPO_TOKEN", raising=False)
    project.write_env(ENV_TEMPLATE.format(channel=f"https://conda.lab/t/{SECRET}/lab"))
    code, out, err = project.run("lock")
    assert code == 2 and SECRET not in out + err and "/t/***/lab" in err
    assert "environment variable" in err and err.count("\n") == 1


def test_a_refused_url_is_quoted_with_its_credentials_masked(
    behind_a_token: Path, project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """http:// behind a password, installed without --allow-insecure-url: refused, and the
    message quotes the URL without the password that was filled in to fetch it."""
    from conftest import run_main

    from envtool.cli import main

    monkeypatch.setenv("LAB_CHANNEL_PASSWORD", PASSWORD)
    monkeypatch.setenv("LAB_REPO_TOKEN", SECRET)
    with serve(behind_a_token) as url:
        literal = f"http://bob:{PASSWORD}@{url.removeprefix('http://')}/t/{SECRET}/lab"
        project.write_env(ENV_TEMPLATE.format(channel=literal))
        assert project.run("lock")[0] == 0
        argv = ("install", "--prefix", str(project.root / "env"))
        code, out, err = run_main(main, project.root, [], argv)  # no --allow-insecure-url
    assert code == 2 and "neither https" in err, err
    assert PASSWORD not in out + err and SECRET not in out + err and "bob:***@" in err
