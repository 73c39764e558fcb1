"""What a package's name and version may be, and when two names are the same package.

Checked where a lockfile is read: a name or version that could act as a path (``../``, a
slash), hold whitespace or control characters, or start with ``-`` is refused with the
file and line, and ``Foo`` beside ``foo`` is one package twice.
"""

from __future__ import annotations

import re

from envtool.models import normalize

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")
_VERSION = re.compile(r"[A-Za-z0-9_*][A-Za-z0-9_.+!*-]*")  # conda's and PEP 440's characters
_BUILD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+]*")  # no '-': it ends a conda file name


def why_bad_name(name: str) -> str:
    """Why ``name`` cannot be a package name ("" when it can)."""
    if not _NAME.fullmatch(name) or ".." in name:
        return f"{name!r} is not a package name (letters, digits, '_', '.', '+', '-')"
    return ""


def why_bad_version(version: str) -> str:
    """Why ``version`` cannot be a package version ("" when it can)."""
    if not _VERSION.fullmatch(version) or ".." in version:
        return f"{version!r} is not a version (letters, digits, '.', '_', '+', '!', '*', '-')"
    return ""


def why_bad_build(build: str) -> str:
    """Why ``build`` cannot be a conda build string ("" when it can)."""
    if not _BUILD.fullmatch(build) or ".." in build:
        return f"{build!r} is not a build string (letters, digits, '_', '.', '+')"
    return ""


def same_package_key(name: str, manager: str, platform: str) -> tuple[str, str, str]:
    """What two entries must not share: conda names compare without case, pip names as PEP
    503 normalizes them (``Foo_Bar`` is ``foo-bar``)."""
    return manager, normalize(name) if manager == "pip" else name.lower(), platform
