"""``envtool install``: the lock into a prefix, every archive's hash checked."""

from __future__ import annotations

from envtool.errors import EXIT_OK
from envtool.lock.install import InstallOptions, install
from envtool.report import results


def run(options: InstallOptions) -> int:
    """Install; a failure raises (cli/ maps it to its exit code)."""
    results.install_result(install(options))
    return EXIT_OK
