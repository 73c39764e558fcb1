"""envtool_node/channels.py: conda's channel names, the one canonicalisation envtool uses."""

from __future__ import annotations

import pytest

from envtool_node.channels import base_url
from envtool_node.channels import canonical_name as channel_name


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://conda.anaconda.org/conda-forge/linux-64", "conda-forge"),
        ("https://conda.anaconda.org/pytorch", "pytorch"),
        ("conda-forge", "conda-forge"),
        ("file:///srv/channel/noarch", "file:///srv/channel"),
        ("https://repo.anaconda.com/pkgs/main", "defaults"),
        # conda-lock's templates of a token and a password (issue 24 item 1), a port no one
        # could use: named, never an exception
        (
            "https://h.example:8000/t/${LAB_TOKEN}/lab/linux-64/a-1-0.conda",
            "https://h.example:8000/lab",
        ),
        ("https://${U}:${P}@h.example/lab/noarch", "https://h.example/lab"),
        ("https://h.example:99999/lab/linux-64", "https://h.example/lab"),
        ("https://h.example:${PORT}/lab", "https://h.example/lab"),
    ],
)
def test_channel_names(url: str, name: str) -> None:
    assert channel_name(url) == name


@pytest.mark.parametrize(
    ("name", "url"),
    [
        ("conda-forge", "https://conda.anaconda.org/conda-forge"),
        ("pkgs/main", "https://repo.anaconda.com/pkgs/main"),
        ("file:///srv/channel/", "file:///srv/channel"),
        ("https://example.org/conda/mychan", "https://example.org/conda/mychan"),
    ],
)
def test_base_urls(name: str, url: str) -> None:
    assert base_url(name) == url
