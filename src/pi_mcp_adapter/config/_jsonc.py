"""JSON with comments (JSONC), parsed so that every error keeps its real line and column.

The approach: blank out comments and trailing commas with spaces (newlines stay), so the text
keeps its shape character for character, then hand it to :func:`json.loads`. Syntax errors then
point at the line the user sees in their editor, and a second pass over the same blanked text
records where every key and array item starts, so later validation errors can name the line of
the offending field.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["JsonPath", "JsoncDocument", "JsoncSyntaxError", "blank_jsonc", "parse_jsonc"]

JsonPath = tuple[str | int, ...]
"""A location inside a document: object keys and array indexes from the root."""


class JsoncSyntaxError(ValueError):
    """The text is not valid JSONC. ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, *, line: int, column: int) -> None:
        self.message = message
        self.line = line
        self.column = column
        super().__init__(f"{message} (line {line}, column {column})")


@dataclass(frozen=True, slots=True)
class JsoncDocument:
    """A parsed JSONC document and the line of every key and array item in it."""

    data: object
    key_lines: Mapping[JsonPath, int]
    key_offsets: Mapping[JsonPath, int]
    """Character offset of every object key (its opening quote) and array item, in the text."""
    value_spans: Mapping[JsonPath, tuple[int, int]]
    """Character offsets ``[start, end)`` of every value, in the original text."""

    def line_of(self, path: JsonPath) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one; ``None`` for the root."""
        for end in range(len(path), 0, -1):
            line = self.key_lines.get(path[:end])
            if line is not None:
                return line
        return None


def blank_jsonc(text: str) -> str:
    """Replace comments and trailing commas with spaces, keeping every other character in place.

    Raises:
        JsoncSyntaxError: a ``/*`` comment is never closed.
    """
    out = list(text)
    if text.startswith("\ufeff"):
        out[0] = " "
    n = len(text)
    i = 0
    pending_comma: int | None = None
    while i < n:
        c = text[i]
        if c == '"':
            pending_comma = None
            i += 1
            # A raw newline ends the scan too: JSON strings cannot contain one, json.loads will
            # report the unterminated string, and the rest of the file is still blanked properly.
            while i < n and text[i] not in '"\n':
                i += 2 if text[i] == "\\" else 1
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "*":
            end = text.find("*/", i + 2)
            if end < 0:
                line, column = _line_column(text, i)
                raise JsoncSyntaxError("unterminated /* comment", line=line, column=column)
            for k in range(i, end + 2):
                if text[k] not in "\r\n":
                    out[k] = " "
            i = end + 2
            continue
        if c == ",":
            pending_comma = i
        elif c in "]}":
            if pending_comma is not None:
                out[pending_comma] = " "
            pending_comma = None
        elif c not in " \t\r\n":
            pending_comma = None
        i += 1
    return "".join(out)


def parse_jsonc(text: str) -> JsoncDocument | None:
    """Parse JSONC text. Returns ``None`` when the text holds nothing but whitespace and comments.

    Raises:
        JsoncSyntaxError: the text is not valid JSONC; the position is the real one.
    """
    blanked = blank_jsonc(text)
    if not blanked.strip():
        return None
    try:
        data = json.loads(blanked)
    except json.JSONDecodeError as exc:
        raise JsoncSyntaxError(exc.msg, line=exc.lineno, column=exc.colno) from None
    except RecursionError:
        depth, offset = _deepest_opening(blanked)
        line, column = _line_column(text, offset)
        raise JsoncSyntaxError(
            f"arrays and objects are nested too deep ({depth} levels)", line=line, column=column
        ) from None
    key_offsets: dict[JsonPath, int] = {}
    spans: dict[JsonPath, tuple[int, int]] = {}
    try:
        _Scanner(blanked, key_offsets, spans).scan_document()
    except (RecursionError, IndexError):
        # Positions only improve error messages; a document too deep to scan still loads.
        key_offsets.clear()
        spans.clear()
    starts = _line_starts(text)
    key_lines = {path: bisect.bisect_right(starts, offset) for path, offset in key_offsets.items()}
    return JsoncDocument(data=data, key_lines=key_lines, key_offsets=key_offsets, value_spans=spans)


def _deepest_opening(blanked: str) -> tuple[int, int]:
    """The deepest nesting level of ``[`` and ``{`` outside strings, and where it is reached."""
    depth = deepest = where = 0
    in_string = escaped = False
    for offset, char in enumerate(blanked):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, offset
        elif char in "]}":
            depth -= 1
    return deepest, where


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts.extend(i + 1 for i, c in enumerate(text) if c == "\n")
    return starts


def _line_column(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


class _Scanner:
    """Walks blanked text that json.loads already accepted, recording key and value offsets."""

    def __init__(
        self,
        text: str,
        key_offsets: dict[JsonPath, int],
        spans: dict[JsonPath, tuple[int, int]],
    ) -> None:
        self._text = text
        self._pos = 0
        self._key_offsets = key_offsets
        self._spans = spans

    def scan_document(self) -> None:
        self._skip_ws()
        self._value(())

    def _skip_ws(self) -> None:
        text, pos = self._text, self._pos
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        self._pos = pos

    def _value(self, path: JsonPath) -> None:
        start = self._pos
        c = self._text[start]
        if c == "{":
            self._object(path)
        elif c == "[":
            self._array(path)
        elif c == '"':
            self._string()
        else:
            self._scalar()
        self._spans[path] = (start, self._pos)

    def _object(self, path: JsonPath) -> None:
        self._pos += 1
        self._skip_ws()
        if self._text[self._pos] == "}":
            self._pos += 1
            return
        while True:
            key_start = self._pos
            self._string()
            key = json.loads(self._text[key_start : self._pos])
            child = (*path, key)
            self._key_offsets[child] = key_start
            self._skip_ws()
            self._pos += 1  # the colon
            self._skip_ws()
            self._value(child)
            self._skip_ws()
            closing = self._text[self._pos]
            self._pos += 1
            if closing == "}":
                return
            self._skip_ws()

    def _array(self, path: JsonPath) -> None:
        self._pos += 1
        self._skip_ws()
        if self._text[self._pos] == "]":
            self._pos += 1
            return
        index = 0
        while True:
            child = (*path, index)
            self._key_offsets[child] = self._pos
            self._value(child)
            self._skip_ws()
            closing = self._text[self._pos]
            self._pos += 1
            if closing == "]":
                return
            self._skip_ws()
            index += 1

    def _string(self) -> None:
        text, pos = self._text, self._pos + 1
        while text[pos] != '"':
            pos += 2 if text[pos] == "\\" else 1
        self._pos = pos + 1

    def _scalar(self) -> None:
        text, pos = self._text, self._pos
        while pos < len(text) and text[pos] not in " \t\r\n,]}":
            pos += 1
        self._pos = pos
