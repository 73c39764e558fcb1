"""``python -m envtool``."""

from __future__ import annotations

from envtool.cli import entry

if __name__ == "__main__":
    entry()
