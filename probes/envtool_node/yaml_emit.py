"""The YAML text of an export, laid out as conda 24.7 writes it.

A port of the parts of ruamel.yaml's emitter (0.18/0.19) that conda's yaml_safe_dump uses:
block mappings and sequences, indent(mapping=2, sequence=4, offset=2), width 80,
allow_unicode, YAML 1.2 implicit resolvers. Only ``envtool export`` (YAML) runs it: a node's
verify document carries the records, not the text. Python 3.9, standard library only.
"""

from __future__ import annotations

from .yaml_scalar import BREAKS, ESCAPES, analyze, needs_backslash, resolves_to_other, scalar_text

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any


class _Emitter:
    """ruamel.yaml's block emitter state for the shapes conda dumps."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.column = 0
        self.whitespace = True
        self.indention = True
        self.no_newline: bool | None = None
        self.indent: int | None = None
        self.indents: list[tuple[int | None, bool | None]] = []
        self.width, self.map_indent, self.seq_indent, self.dash_offset = 80, 2, 4, 2

    def write(self, data: str) -> None:
        self.column += len(data)
        self.out.append(data)

    def increase_indent(
        self, flow: bool = False, sequence: bool | None = None, indentless: bool = False
    ) -> None:
        self.indents.append((self.indent, sequence))
        if self.indent is None:
            self.indent = None if flow else 0
        elif not indentless:
            last_seq = len(self.indents) >= 2 and bool(self.indents[-2][1])
            self.indent += self.seq_indent if last_seq else self.map_indent

    def pop_indent(self) -> None:
        self.indent = self.indents.pop()[0]

    def indicator(
        self, text: str, need_ws: bool, whitespace: bool = False, indention: bool = False
    ) -> None:
        self.write(text if (self.whitespace or not need_ws) else " " + text)
        self.whitespace = whitespace
        self.indention = self.indention and indention

    def line_break(self, data: str = "\n") -> None:
        self.whitespace = self.indention = True
        self.column = 0
        self.out.append(data)

    def write_indent(self) -> None:
        indent = self.indent or 0
        if (
            not self.indention
            or self.column > indent
            or (self.column == indent and not self.whitespace)
        ):
            if self.no_newline:
                self.no_newline = False
            else:
                self.line_break()
        if self.column < indent:
            self.whitespace = True
            self.out.append(" " * (indent - self.column))
            self.column = indent

    # ---- nodes

    def node(
        self, value: Any, sequence: bool = False, mapping: bool = False, simple_key: bool = False
    ) -> None:
        if isinstance(value, dict) and value:
            self.block_mapping(value, mapping)
        elif isinstance(value, (list, tuple)) and value:
            self.block_sequence(value, mapping)
        elif isinstance(value, (dict, list, tuple)):
            self.increase_indent(flow=True)
            self.indicator("{}" if isinstance(value, dict) else "[]", True, whitespace=False)
            self.pop_indent()
        else:
            self.increase_indent(flow=True)
            self.scalar(value, sequence, simple_key)
            self.pop_indent()

    def block_sequence(self, items: Sequence[Any], mapping: bool) -> None:
        self.increase_indent(sequence=True, indentless=mapping and not self.indention)
        if len(self.indents) >= 2 and self.indents[-2][1] and self.indents[-1][1]:
            self.indention, self.no_newline = True, False
        for item in items:
            nonl = self.no_newline if self.column == 0 else False
            self.write_indent()
            self.indicator(" " * self.dash_offset + "-", True, indention=True)
            if nonl or self.dash_offset + 2 > self.seq_indent:
                self.no_newline = True
            self.node(item, sequence=True)
        self.pop_indent()
        self.no_newline = False

    def block_mapping(self, mapping_value: dict[Any, Any], in_mapping: bool) -> None:
        self.increase_indent(sequence=False)
        for key, value in mapping_value.items():
            self.write_indent()
            if self._simple_key(key):
                self.node(key, mapping=True, simple_key=True)
                self.indicator(":", False)
            else:
                self.indicator("?", True, indention=True)
                self.node(key, mapping=True)
                self.write_indent()
                self.indicator(":", True, indention=True)
            self.node(value, mapping=True)
        self.pop_indent()

    @staticmethod
    def _simple_key(key: Any) -> bool:
        if isinstance(key, (dict, list, tuple)):
            return not key
        text, tag = scalar_text(key)
        # ruamel counts the tag ("!!str") into the 128 characters of a simple key
        return len(text) + 2 + len(tag) < 128 and not analyze(text)["multiline"]

    # ---- scalars

    def scalar(self, value: Any, sequence: bool, simple_key: bool) -> None:
        text, tag = scalar_text(value)
        analysis = analyze(text)
        implicit = not (tag == "str" and resolves_to_other(text))
        style = "'"
        if (
            implicit
            and not (simple_key and (analysis["empty"] or analysis["multiline"]))
            and analysis["block_plain"]
        ):
            style = ""
        elif (
            "'" in text
            or "\n" in text
            or not analysis["single"]
            or (simple_key and analysis["multiline"])
        ):
            style = '"'
        if sequence:
            self.write_indent()
        split = not simple_key
        if style == "":
            self.plain(text, split)
        elif style == "'":
            self.single_quoted(text, split)
        else:
            self.double_quoted(text, split)

    def plain(self, text: str, split: bool) -> None:
        if not text:
            return
        if not self.whitespace:
            self.write(" ")
        self.whitespace = self.indention = False
        if " " not in text and not any(b in text for b in BREAKS):  # one word: the fast path
            if (
                len(text) + self.column > self.width
                and self.indent is not None
                and self.column > self.indent
            ):
                self.write_indent()
            self.write(text)
            return
        spaces = breaks = False
        start = end = 0
        while end <= len(text):
            ch = text[end] if end < len(text) else None
            if spaces:
                if ch != " ":
                    if start + 1 == end and self.column >= self.width and split:
                        self.write_indent()
                        self.whitespace = self.indention = False
                    else:
                        self.write(text[start:end])
                    start = end
            elif breaks:  # plain scalars never contain breaks here
                start = end
            elif ch is None or ch in " " + BREAKS:
                data = text[start:end]
                if (
                    len(data) + self.column > self.width
                    and self.indent is not None
                    and self.column > self.indent
                ):
                    self.write_indent()
                self.write(data)
                start = end
            if ch is not None:
                spaces, breaks = ch == " ", ch in BREAKS
            end += 1

    def single_quoted(self, text: str, split: bool) -> None:
        self.indicator("'", True)
        spaces = breaks = False
        start = end = 0
        while end <= len(text):
            ch = text[end] if end < len(text) else None
            if spaces:
                if ch is None or ch != " ":
                    if (
                        start + 1 == end
                        and self.column > self.width
                        and split
                        and start != 0
                        and end != len(text)
                    ):
                        self.write_indent()
                    else:
                        self.write(text[start:end])
                    start = end
            elif breaks:
                if ch is None or ch not in BREAKS:
                    if text[start] == "\n":
                        self.line_break()
                    for br in text[start:end]:
                        self.line_break("\n" if br == "\n" else br)
                    self.write_indent()
                    start = end
            elif (ch is None or ch in " " + BREAKS or ch == "'") and start < end:
                self.write(text[start:end])
                start = end
            if ch == "'":
                self.write("''")
                start = end + 1
            if ch is not None:
                spaces, breaks = ch == " ", ch in BREAKS
            end += 1
        self.indicator("'", False)

    def double_quoted(self, text: str, split: bool) -> None:
        self.indicator('"', True)
        start = end = 0
        while end <= len(text):
            ch = text[end] if end < len(text) else None
            if (
                ch is None
                or ch in '"\\\x85\u2028\u2029\ufeff'
                or not (
                    "\x20" <= ch <= "\x7e"
                    or "\xa0" <= ch <= "\ud7ff"
                    or "\ue000" <= ch <= "\ufffd"
                    or "\U00010000" <= ch <= "\U0010ffff"
                )
            ):
                if start < end:
                    self.write(text[start:end])
                    start = end
                if ch is not None:
                    if ch in ESCAPES:
                        data = "\\" + ESCAPES[ch]
                    elif ch <= "\xff":
                        data = "\\x%02X" % ord(ch)
                    elif ch <= "\uffff":
                        data = "\\u%04X" % ord(ch)
                    else:
                        data = "\\U%08X" % ord(ch)
                    self.write(data)
                    start = end + 1
            if (
                0 < end < len(text) - 1
                and (ch == " " or start >= end)
                and self.column + (end - start) > self.width
                and split
            ):
                need_backslash = needs_backslash(text, start, end)
                data = text[start:end] + ("\\" if need_backslash else "")
                if start < end:
                    start = end
                self.write(data)
                self.write_indent()
                self.whitespace = self.indention = False
                if text[start] == " ":
                    if not need_backslash:
                        start += 1
                    self.write("\\" if need_backslash else "")
            end += 1
        self.indicator('"', False)


def render_yaml(env: dict[str, Any]) -> str:
    """``yaml_safe_dump(env)`` as conda 24.7 writes it (ruamel.yaml, safe, pure)."""
    emitter = _Emitter()
    emitter.node(env)
    emitter.indent = None
    emitter.write_indent()
    return "".join(emitter.out)
