"""``python -m envtool``."""

from __future__ import annotations

import sys

from envtool.cli import main

if __name__ == "__main__":
    sys.exit(main())
