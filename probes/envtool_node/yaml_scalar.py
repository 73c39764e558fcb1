"""How a YAML scalar is written: ruamel.yaml's analysis of a string, its tags and escapes.

Part of the port of ruamel.yaml's emitter (0.18/0.19) that conda's yaml_safe_dump uses
(yaml_emit.py); only ``envtool export`` imports it. Python 3.9, standard library only.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_IMPLICIT = (
    ("tTfF", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")),
    (
        "-+0123456789.",
        re.compile(
            r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)"
            r"|[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
    ),
    (
        "-+0123456789",
        re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?[0-9_]+|[-+]?0x[0-9a-fA-F_]+)$"),
    ),
    ("<", re.compile(r"^(?:<<)$")),
    ("~nN", re.compile(r"^(?:~|null|Null|NULL|)$")),
    (
        "0123456789",
        re.compile(
            r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]"
            r"|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?"
            r"(?:[Tt]|[ \t]+)[0-9][0-9]?"
            r":[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?"
            r"(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$"
        ),
    ),
    ("=", re.compile(r"^(?:=)$")),
    ("!&*", re.compile(r"^(?:!|&|\*)$")),
)
ESCAPES = {
    "\0": "0",
    "\x07": "a",
    "\x08": "b",
    "\x09": "t",
    "\x0a": "n",
    "\x0b": "v",
    "\x0c": "f",
    "\x0d": "r",
    "\x1b": "e",
    '"': '"',
    "\\": "\\",
    "\x85": "N",
    "\xa0": "_",
    "\u2028": "L",
    "\u2029": "P",
}
BREAKS = "\n\x85\u2028\u2029"
_WS = "\0 \t\r\n\x85\u2028\u2029"


def resolves_to_other(value: str) -> bool:
    """True when a plain ``value`` would load as something other than a string."""
    first = value[0] if value else ""
    return any(first in chars and rx.match(value) for chars, rx in _IMPLICIT)


def scalar_text(value: Any) -> tuple[str, str]:
    """(text, tag) for a Python scalar, as ruamel's SafeRepresenter makes them."""
    if value is None:
        return "null", "null"
    if isinstance(value, bool):
        return ("true" if value else "false"), "bool"
    if isinstance(value, int):
        return str(value), "int"
    if isinstance(value, float):
        if value != value:
            return ".nan", "float"
        if value in (float("inf"), float("-inf")):
            return (".inf" if value > 0 else "-.inf"), "float"
        return repr(value).lower(), "float"
    return str(value), "str"


_SAFE_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=+/-]*\Z")  # no indicator, space, break


def analyze(s: str) -> dict[str, bool]:
    """What ruamel.yaml's analyze_scalar decides for ``s``: empty, multiline, plain, single."""
    if _SAFE_PLAIN.match(s):
        return {"empty": False, "multiline": False, "block_plain": True, "single": True}
    if not s:
        return {"empty": True, "multiline": False, "block_plain": True, "single": True}
    block_ind = s.startswith("---") or s.startswith("...")
    line_breaks = special = False
    leading_space = leading_break = trailing_space = trailing_break = False
    break_space = space_break = previous_space = previous_break = False
    preceded_ws, followed_ws = True, len(s) == 1 or s[1] in _WS
    for index, ch in enumerate(s):
        if index == 0:
            if ch in "#,[]{}&*!|>'\"%@`":
                block_ind = True
            if ch in "?:" and followed_ws:
                block_ind = True
            if ch == "-" and followed_ws:
                block_ind = True
        elif (ch == ":" and followed_ws) or (ch == "#" and preceded_ws):
            block_ind = True
        if ch in BREAKS:
            line_breaks = True
        if not (ch == "\n" or "\x20" <= ch <= "\x7e") and not (
            (
                ch == "\x85"
                or "\xa0" <= ch <= "\ud7ff"
                or "\ue000" <= ch <= "\ufffd"
                or "\U00010000" <= ch <= "\U0010ffff"
            )
            and ch != "\ufeff"
        ):
            special = True
        if ch == " ":
            leading_space = leading_space or index == 0
            trailing_space = trailing_space or index == len(s) - 1
            break_space = break_space or previous_break
            previous_space, previous_break = True, False
        elif ch in BREAKS:
            leading_break = leading_break or index == 0
            trailing_break = trailing_break or index == len(s) - 1
            space_break = space_break or previous_space
            previous_space, previous_break = False, True
        else:
            previous_space = previous_break = False
        preceded_ws = ch in _WS
        followed_ws = index + 2 >= len(s) or s[index + 2] in _WS
    plain = not (leading_space or leading_break or trailing_space or trailing_break)
    single = True
    if break_space:
        plain = single = False
    if special or space_break:
        plain = single = False
    if line_breaks or block_ind:
        plain = False
    return {"empty": False, "multiline": line_breaks, "block_plain": plain, "single": single}


def needs_backslash(text: str, start: int, end: int) -> bool:
    """Whether a folded double-quoted line must end with an escaped break."""
    try:
        space_pos = text.index(" ", end)
        newline = text.find("\n", end, space_pos)
        space_pos = newline if newline >= 0 else space_pos
        if text[space_pos] == "\n" and text[space_pos + 1] != " ":
            return True
        if (
            '"' not in text[end:space_pos]
            and "'" not in text[end:space_pos]
            and text[space_pos + 1] not in " \n"
            and text[end - 1 : end + 1] != "  "
            and start != end
        ):
            return False
    except (ValueError, IndexError):
        pass
    return True
