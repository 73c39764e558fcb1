"""conda's channel names: a port of conda/models/channel.py and conda/common/url.py.

For conda's default configuration (channel_alias https://conda.anaconda.org, defaults =
repo.anaconda.com pkgs/main + pkgs/r, no custom or migrated channels). The one home of
channel canonicalisation: the node's export names channels with it, and envtool uses the
same functions for locks (``canonical_name``) and for channel URLs (``base_url``).
"""

from __future__ import annotations

import functools
import re
import sys
from os.path import abspath, expanduser

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~2 ms at start-up on a node; annotations are strings anyway
    from typing import Any, Optional

    Chan = tuple[Optional[str], Optional[str], str]  # (scheme, location, name) of a channel

ON_WIN = sys.platform == "win32"

ALIAS_LOCATION = "conda.anaconda.org"
DEFAULTS = ("pkgs/main", "pkgs/r", "pkgs/msys2") if ON_WIN else ("pkgs/main", "pkgs/r")
CUSTOM_CHANNELS = (*DEFAULTS, "pkgs/pro")  # all at repo.anaconda.com
KNOWN_SUBDIRS = (
    "noarch",
    "emscripten-wasm32",
    "wasi-wasm32",
    "freebsd-64",
    "linux-32",
    "linux-64",
    "linux-aarch64",
    "linux-armv6l",
    "linux-armv7l",
    "linux-ppc64",
    "linux-ppc64le",
    "linux-riscv64",
    "linux-s390x",
    "osx-64",
    "osx-arm64",
    "win-32",
    "win-64",
    "win-arm64",
    "zos-z",
)
_PLATFORM_RE = re.compile(r"/({})(?:/|$)".format("|".join(KNOWN_SUBDIRS)), re.IGNORECASE)
# conda's token pattern, and conda-lock's template of one (``/t/${ANACONDA_TOKEN}``)
_TOKEN_RE = re.compile(r"/t/(\$\{[A-Za-z_][A-Za-z0-9_]*\}|[a-zA-Z0-9-]*)")
_SCHEME_RE = re.compile(r"[a-z][a-z0-9]{0,11}://")
_PATH_RE = re.compile(r"\./|\.\.|~|/|[a-zA-Z]:[/\\]|\\\\|//")
_PKG_EXTENSIONS = (".conda", ".tar.bz2", ".json", ".jlap", ".json.zst")


def _join_url(*args: str | None) -> str:
    start = "/" if not args[0] or args[0].startswith("/") else ""
    return start + "/".join(y for y in (x.strip("/") for x in args if x) if y)


def _starts_with_tokens(test: list[str], start: list[str]) -> bool:
    return all(t == s for t, s in zip(test, start))


def _url_str(host: str | None, port: int | None, path: str | None) -> str:
    if path and not path.startswith("/"):
        path = "/" + path
    return (host.lower() if host else "") + (f":{port}" if port else "") + (path or "")


def _split_platform(url: str) -> tuple[str, str | None]:
    match = _PLATFORM_RE.search(url)
    platform = match.group(1) if match else None
    cleaned = url.replace("/" + platform, "", 1) if platform is not None else url
    return cleaned.rstrip("/"), platform


def _split_token(url: str) -> str:
    match = _TOKEN_RE.search(url)
    token = match.group(1) if match else None
    return (url.replace("/t/" + token, "", 1) if token is not None else url).rstrip("/")


def _parse(url: str) -> Any:
    from urllib.parse import urlparse as _urlparse

    return _urlparse(url if _SCHEME_RE.match(url) else "//" + url)


def _channel_configuration(
    scheme: str | None, host: str | None, port: int | None, path: str
) -> tuple[str | None, str | None, str | None]:
    """conda's _read_channel_configuration: (location, name, scheme)."""
    path = path and path.rstrip("/")
    test_url = _url_str(host, port, path)
    if not path:
        return _url_str(host, port, None).rstrip("/"), None, scheme or None
    for name in sorted(CUSTOM_CHANNELS, reverse=True, key=len):
        that = _join_url("repo.anaconda.com", name)
        if _starts_with_tokens(test_url.split("/"), that.split("/")):
            sub = test_url.replace(that, "", 1).strip("/")
            return "repo.anaconda.com", _join_url(name, sub), scheme
    if _starts_with_tokens(test_url.split("/"), [ALIAS_LOCATION]):
        name = test_url.replace(ALIAS_LOCATION, "", 1).strip("/") or None
        return ALIAS_LOCATION, name, scheme
    if host is None:
        location, name = test_url.rsplit("/", 1)
        return location or "/", name, "file"
    parts = path.strip("/").split("/")
    bump = None
    if parts and parts[0] == "conda":
        bump, path = "conda", "/".join(parts[1:])
    return _url_str(host, port, bump).rstrip("/"), path.strip("/") or None, scheme or None


def _channel_from_url(url: str) -> Chan:
    cleaned, _ = _split_platform(_split_token(url))
    if cleaned.endswith(_PKG_EXTENSIONS) and "/" in cleaned:
        cleaned = cleaned.rsplit("/", 1)[0]
    parts = _parse(cleaned)
    try:
        port = parts.port
    except ValueError:  # ``host:${PORT}``, ``host:99999``: no port conda could use
        port = None
    location, name, scheme = _channel_configuration(parts.scheme, parts.hostname, port, parts.path)
    return scheme or "https", location, name or ""


def _path_to_url(path: str) -> str:
    if path.startswith("file://"):
        return path
    path = abspath(expanduser(path)).replace("\\", "/")
    if any(ord(c) >= 128 for c in path):
        keep = "!'()*-._/\\:"
        raw = bytes(path, "utf-8").decode("unicode-escape")
        path = "".join(
            c if (c < "{" and c.isalnum()) or c in keep else f"%{ord(c):02X}" for c in raw
        )
    return "file:///" + path if len(path) > 1 and path[1] == ":" else "file://" + path


def _channel_for_name(value: str) -> Chan:
    stripped, _ = _split_platform(value)
    name = stripped
    while True:
        if name in CUSTOM_CHANNELS:
            return "https", "repo.anaconda.com", stripped
        shorter = name.rsplit("/", 1)[0]
        if shorter == name:
            return "https", ALIAS_LOCATION, stripped
        name = shorter


def parse_channel(value: str | None) -> Chan:
    """conda's Channel(value) reduced to (scheme, location, name)."""
    if value in (None, "<unknown>", "None:///<unknown>", "None") or not isinstance(value, str):
        return None, None, "<unknown>"
    if _SCHEME_RE.match(value):
        if value.startswith("file:"):
            value = re.sub(r"(\\(?! ))", r"/", value).replace(":////", "://")
        return _channel_from_url(value)
    if "://" not in value and _PATH_RE.match(value):
        return _channel_from_url(_path_to_url(value))
    if value[-6:] == ".conda" or value[-8:] == ".tar.bz2":
        return _channel_from_url(value)
    stripped, _ = _split_platform(value)
    if stripped in ("defaults", "local"):
        return None, None, "\0multi:" + stripped
    return _channel_for_name(value)


@functools.cache
def canonical_name(value: str | None) -> str:
    """conda's ``Channel(value).canonical_name`` on a stock configuration."""
    scheme, location, name = parse_channel(value)
    if name.startswith("\0multi:"):
        return name[len("\0multi:") :]
    if name in DEFAULTS:
        return "defaults"
    for that in CUSTOM_CHANNELS:
        if name and _starts_with_tokens(name.split("/"), that.split("/")):
            return name
    if location == ALIAS_LOCATION:
        return name
    if scheme:
        return f"{scheme}://{_join_url(location, name)}"
    return _join_url(location, name).lstrip("/")


def base_url(value: str) -> str:
    """The URL a channel's packages live under (``conda-forge`` → anaconda.org/conda-forge)."""
    if "://" in value:
        return value.rstrip("/")
    scheme, location, name = parse_channel(value)
    if name.startswith("\0multi:") or location is None:
        return value.rstrip("/")
    return f"{scheme}://{_join_url(location, name)}"
