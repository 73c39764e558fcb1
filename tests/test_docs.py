"""The README a newcomer reads (at most ~15 KB) and its map of docs/: every page it links
exists, and every command has its reference page."""

from __future__ import annotations

import re

from conftest import REPO

from envtool.cli import _register, cli


def test_the_readme_is_short_and_its_links_exist() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.encode()) <= 15 * 1024
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert links and [link for link in links if not (REPO / link).exists()] == []


def test_every_command_has_its_reference_page() -> None:
    _register()
    pages = REPO / "docs" / "commands"
    index = (pages / "README.md").read_text()
    for name in cli.commands:
        page = pages / f"{name}.md"
        if not page.exists():  # preflight is verify inside a Slurm allocation
            page = pages / "verify.md"
        assert f"envtool {name}" in page.read_text(), name
        assert name in index or name == "preflight", name
