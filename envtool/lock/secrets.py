"""Credentials in channel URLs: written only as environment-variable templates, as conda-lock
writes them (``https://${USER}:${PASS}@host/...``, ``.../t/${TOKEN}/...``, listed in the
lock's ``used_env_vars``), expanded only in memory to fetch, masked in every message.

A literal password or token is replaced by the name of the environment variable that holds
it (conda-lock's rule); one that no variable holds is refused: envtool never writes a secret.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from envtool.errors import InputError

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_USERINFO = re.compile(r"^(?P<scheme>[a-zA-Z][\w+.-]*://)(?P<user>[^/@:]*)(?::(?P<pw>[^/@]*))?@")
_TOKEN = re.compile(r"/t/(?P<token>[^/]+)(?=/|$)")
# a password or token anywhere in a message: user:SECRET@ and /t/SECRET/
_SECRET_IN_TEXT = re.compile(r"(?<=://)([^/\s@:]*:)([^/\s@]+)@|/t/([^/\s]+)")


def _template_part(value: str, suffixes: tuple[str, ...], environ: Mapping[str, str]) -> str:
    """``${VAR}`` for ``value``: already a variable, or the variable that holds it."""
    found = _VAR.fullmatch(value)
    if found:
        return f"${{{found.group(1) or found.group(2)}}}"
    for suffix in (*suffixes, ""):
        for name, held in sorted(environ.items()):
            if name.upper().endswith(suffix) and held and held in (value, unquote(value)):
                return f"${{{name}}}"
    raise ValueError("no environment variable holds it")


def template(url: str, environ: Mapping[str, str] | None = None) -> str:
    """``url`` with its user, password and anaconda token as ``${VAR}`` (InputError when a
    password or token is literal and no environment variable holds it)."""
    env = os.environ if environ is None else environ
    out = url
    try:
        m = _USERINFO.match(out)
        if m and m.group("pw") is not None:
            user = m.group("user")
            with contextlib.suppress(ValueError):  # no secret; templated where it can be
                user = _template_part(user, ("USERNAME", "USER"), env)
            pw = _template_part(m.group("pw"), ("PASSWORD", "PASS", "TOKEN", "KEY"), env)
            out = f"{m.group('scheme')}{user}:{pw}@{out[m.end() :]}"
        t = _TOKEN.search(out)
        if t:
            token = _template_part(t.group("token"), ("TOKEN",), env)
            out = f"{out[: t.start('token')]}{token}{out[t.end('token') :]}"
    except ValueError:
        raise InputError(
            f"channel {mask(url)}: holds a literal password or token that no environment "
            "variable holds: export it (MY_CHANNEL_TOKEN=...) and write ${MY_CHANNEL_TOKEN} in "
            "its place, as conda-lock does; envtool never writes a secret into a lock"
        ) from None
    return out


def used_vars(url: str) -> tuple[str, ...]:
    """The environment variables a templated URL uses, sorted (the lock's used_env_vars)."""
    return tuple(sorted({a or b for a, b in _VAR.findall(url)}))


def expand(url: str, environ: Mapping[str, str] | None = None) -> str:
    """A templated URL with its variables filled in, for a fetch (kept in memory only);
    InputError naming a variable that is not set (never its value)."""
    env = os.environ if environ is None else environ

    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in env:
            raise InputError(f"{mask(url)}: the environment variable {name} is not set")
        return env[name]

    return _VAR.sub(value, url)


@dataclass(frozen=True)
class Access:
    """A channel as rattler is given it: ``bare``, the URL without ``user:password@`` or
    ``/t/token`` (the one its repodata cache records), and, in memory only, the URL its
    requests go to (the token in its path) and their ``Authorization`` header."""

    bare: str
    target: str
    authorization: str | None = None


def access(url: str, environ: Mapping[str, str] | None = None) -> Access:
    """A (templated) channel URL split into what rattler may record and the credentials its
    requests carry: a header and a rewritten path, as rattler's authentication storage does,
    never a URL that holds them (InputError naming a variable that is not set)."""
    env = os.environ if environ is None else environ
    rest, authorization = url.rstrip("/"), None
    m = _USERINFO.match(rest)
    if m:
        user, pw = (unquote(expand(part or "", env)) for part in (m.group("user"), m.group("pw")))
        authorization = "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode("ascii")
        rest = m.group("scheme") + rest[m.end() :]
    t = _TOKEN.search(rest)
    bare = rest[: t.start()] + rest[t.end() :] if t else rest
    return Access(expand(bare, env), expand(rest, env), authorization)


def authorization(accesses: list[Access], host: str, path: str) -> dict[str, str] | None:
    """The header a request to ``host`` and ``path`` carries: its channel's credentials."""
    for one in accesses:
        parts = urlsplit(one.bare)
        prefix = parts.path.rstrip("/") + "/"
        if one.authorization and parts.hostname == host.lower() and path.startswith(prefix):
            return {"Authorization": one.authorization}
    return None


def mask(text: str) -> str:
    """``text`` with every URL password and anaconda token written as ``***`` (a ``${VAR}``
    template is no secret and stays)."""

    def hide(m: re.Match[str]) -> str:
        secret = m.group(2) or m.group(3)
        if _VAR.fullmatch(secret):
            return m.group(0)
        return f"{m.group(1)}***@" if m.group(2) else "/t/***"

    return _SECRET_IN_TEXT.sub(hide, text)


def _scrubbed(value: Any, bases: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for full, templated in bases.items():
            value = value.replace(full, templated)
        return value
    if isinstance(value, list):
        return [_scrubbed(v, bases) for v in value]
    if isinstance(value, dict):
        return {k: _scrubbed(v, bases) for k, v in value.items()}
    return value


def bases(channels: tuple[str, ...]) -> dict[str, str]:
    """Each templated channel's expanded base → its template (what to scrub)."""
    return {expand(c).rstrip("/"): c.rstrip("/") for c in channels if used_vars(c)}


def scrub_records(prefix: Path, bases: Mapping[str, str]) -> None:
    """Each ``conda-meta`` record of ``prefix`` that holds an expanded channel base (rattler
    writes the URL it fetched from) written again with the channel's template instead."""
    scrub_json(sorted((prefix / "conda-meta").glob("*.json")), bases)


def scrub_json(paths: list[Path], bases: Mapping[str, str]) -> None:
    """Each JSON file of ``paths`` that holds an expanded channel base, written again with
    the template in its place (the conda-meta records rattler's install writes)."""
    if not bases:
        return
    from envtool.yamlio import write_atomic

    for path in paths:
        text = path.read_text(encoding="utf-8")
        if any(full in text for full in bases):
            doc = _scrubbed(json.loads(text), bases)
            write_atomic(path, json.dumps(doc, indent=2) + "\n")
