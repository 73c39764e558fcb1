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
