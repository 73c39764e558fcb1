"""A channel behind a token and a password, locked and installed for real: the lock and the
prefix's conda-meta records hold ``${VAR}`` templates (and the lock ``used_env_vars``), never
the secret, which is filled in only in memory to fetch (issue 24 item 1)."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
from conftest import ENV_TEMPLATE, Project, serve
from fixtures.authserve import behind_a_password

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


def test_a_private_channel_is_read_with_credentials_no_cached_file_holds(
    behind_a_token: Path, project: Project, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A channel that answers only with the password, at /t/<token>/ (issue 33 item 5):
    lock passes both as rattler's authentication does (a header, the token put in the path
    in flight), so no file in the cache holds either (rattler's .shards-cache-v1 held the
    whole expanded URL, 0644 in a 0755 folder), and the cache's folders are closed (0700),
    one an older envtool left open too."""
    monkeypatch.setenv("LAB_REPO_TOKEN", SECRET)
    monkeypatch.setenv("LAB_CHANNEL_PASSWORD", PASSWORD)
    (project.cache / "repodata").mkdir(parents=True)
    (project.cache / "repodata").chmod(0o755)
    log = tmp_path / "requests.log"
    with behind_a_password(behind_a_token, "bob", PASSWORD, log) as url:
        literal = f"http://bob:{PASSWORD}@{url.removeprefix('http://')}/t/{SECRET}/lab"
        project.write_env(ENV_TEMPLATE.format(channel=literal))
        code, _, err = project.run("lock")
        assert code == 0, err
        code, _, err = project.run("install", "--prefix", str(project.root / "env"))
        assert code == 0, err
    requests = log.read_text().splitlines()
    assert requests and all(line.endswith(" auth") for line in requests), requests
    assert f"GET /t/{SECRET}/lab/linux-64/repodata.json auth" in requests
    header = base64.b64encode(f"bob:{PASSWORD}".encode())
    held = [
        p
        for p in project.cache.rglob("*")
        if p.is_file()
        and any(s in p.read_bytes() for s in (SECRET.encode(), PASSWORD.encode(), header))
    ]
    assert held == [], held
    for folder in ("repodata", "pkgs"):
        assert stat.S_IMODE((project.cache / folder).stat().st_mode) == 0o700, folder
    assert "/t/${LAB_REPO_TOKEN}/lab/linux-64/" in project.lock.read_text()


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
