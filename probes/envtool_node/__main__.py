"""``python -m envtool_node``: the node document (see node.py)."""

from __future__ import annotations

import sys

from .node import main

sys.exit(main())
