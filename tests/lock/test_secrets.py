"""Channel credentials: templates in, the secret only in memory, masked in every message."""

from __future__ import annotations

import pytest

from envtool.errors import InputError
from envtool.lock import secrets

ENV = {"LAB_CHANNEL_USER": "bob", "LAB_CHANNEL_PASSWORD": "hunter2", "LAB_REPO_TOKEN": "tk-123"}


def test_literal_credentials_become_the_variables_that_hold_them() -> None:
    url = secrets.template("https://bob:hunter2@conda.lab/ddp", ENV)
    assert url == "https://${LAB_CHANNEL_USER}:${LAB_CHANNEL_PASSWORD}@conda.lab/ddp"
    assert secrets.used_vars(url) == ("LAB_CHANNEL_PASSWORD", "LAB_CHANNEL_USER")
    token = secrets.template("https://conda.anaconda.org/t/tk-123/lab", ENV)
    assert token == "https://conda.anaconda.org/t/${LAB_REPO_TOKEN}/lab"
    assert secrets.template("https://$U:${P}@h/c", {}) == "https://${U}:${P}@h/c"
    assert secrets.template("https://conda.anaconda.org/conda-forge", {}) == (
        "https://conda.anaconda.org/conda-forge"
    )


@pytest.mark.parametrize("url", ["https://bob:s3cr3t@h/c", "https://h/t/s3cr3t/c"])
def test_a_secret_no_variable_holds_is_refused_without_being_shown(url: str) -> None:
    with pytest.raises(InputError) as caught:
        secrets.template(url, {})
    assert "s3cr3t" not in str(caught.value) and "***" in str(caught.value)


def test_expand_fills_in_memory_and_names_a_missing_variable_not_a_value() -> None:
    url = "https://${LAB_CHANNEL_USER}:${LAB_CHANNEL_PASSWORD}@conda.lab/ddp"
    assert secrets.expand(url, ENV) == "https://bob:hunter2@conda.lab/ddp"
    with pytest.raises(InputError, match="LAB_CHANNEL_PASSWORD is not set"):
        secrets.expand(url, {"LAB_CHANNEL_USER": "bob"})


def test_access_keeps_credentials_out_of_the_url_rattler_records() -> None:
    url = "https://${LAB_CHANNEL_USER}:${LAB_CHANNEL_PASSWORD}@conda.lab/t/${LAB_REPO_TOKEN}/ddp/"
    one = secrets.access(url, ENV)
    assert one.bare == "https://conda.lab/ddp"  # what rattler is given and caches
    assert one.target == "https://conda.lab/t/tk-123/ddp"  # where its requests go, in flight
    assert one.authorization == "Basic Ym9iOmh1bnRlcjI="  # bob:hunter2
    assert secrets.authorization([one], "conda.lab", "/ddp/noarch/repodata.json") == {
        "Authorization": one.authorization
    }
    assert secrets.authorization([one], "conda.lab", "/other/repodata.json") is None
    assert secrets.authorization([one], "elsewhere", "/ddp/repodata.json") is None
    public = secrets.access("https://conda.anaconda.org/conda-forge", {})
    assert public == secrets.Access("https://conda.anaconda.org/conda-forge", public.bare)


def test_mask_hides_passwords_and_tokens_but_not_templates() -> None:
    text = "cannot read https://bob:hunter2@h/c/repodata.json or https://h/t/tk-123/c"
    assert (
        secrets.mask(text) == "cannot read https://bob:***@h/c/repodata.json or https://h/t/***/c"
    )
    kept = "https://${U}:${P}@h/c and https://h/t/${T}/c"
    assert secrets.mask(kept) == kept
