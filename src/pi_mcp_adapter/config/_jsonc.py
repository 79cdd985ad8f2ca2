"""JSON with comments (JSONC), parsed so that every error keeps its real line and column.

It is also edited in place: :func:`set_jsonc_value` and :func:`remove_jsonc_member` change one
member of a document and leave every other character as it was (comments, key order, spacing,
trailing commas), so a file a person wrote by hand still reads as theirs after ``pi-mcp add``.

The approach: blank out comments and trailing commas with spaces (newlines stay), so the text
keeps its shape character for character, then hand it to :func:`json.loads`. Syntax errors then
point at the line the user sees in their editor, and a second pass over the same blanked text
records where every key and array item starts, so later validation errors can name the line of
the offending field. That second pass runs only when a position is first asked for (an error or
warning to report, an edit to make): a valid configuration of 19,641 servers spent 0.4 s of
every start on it, for nothing.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "JsonPath",
    "JsoncDocument",
    "JsoncEditError",
    "JsoncSyntaxError",
    "blank_jsonc",
    "parse_jsonc",
    "remove_jsonc_member",
    "set_jsonc_value",
]

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
class _Positions:
    key_lines: Mapping[JsonPath, int]
    key_offsets: Mapping[JsonPath, int]
    value_spans: Mapping[JsonPath, tuple[int, int]]


class JsoncDocument:
    """A parsed JSONC document and the line of every key and array item in it.

    Positions are found on first use, from the text the document was parsed from (kept, not
    read again: a file changed since still gets the lines of what was parsed)."""

    __slots__ = ("_blanked", "_positions", "_text", "data")

    def __init__(self, data: object, *, text: str, blanked: str) -> None:
        self.data = data
        self._text = text
        self._blanked = blanked
        self._positions: _Positions | None = None

    @property
    def key_lines(self) -> Mapping[JsonPath, int]:
        """The 1-based line of every object key and array item."""
        return self._scanned().key_lines

    @property
    def key_offsets(self) -> Mapping[JsonPath, int]:
        """Character offset of every object key (its opening quote) and array item, in the text."""
        return self._scanned().key_offsets

    @property
    def value_spans(self) -> Mapping[JsonPath, tuple[int, int]]:
        """Character offsets ``[start, end)`` of every value, in the original text."""
        return self._scanned().value_spans

    def _scanned(self) -> _Positions:
        # Two threads asking at once both scan and one result is kept: the same either way.
        positions = self._positions
        if positions is None:
            positions = self._positions = _scan_positions(self._text, self._blanked)
        return positions

    def line_of(self, path: JsonPath) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one; ``None`` for the root."""
        for end in range(len(path), 0, -1):
            line = self.key_lines.get(path[:end])
            if line is not None:
                return line
        return None


def blank_jsonc(text: str, *, keep_commas: bool = False) -> str:
    """Replace comments and trailing commas with spaces, keeping every other character in place.

    ``keep_commas`` leaves trailing commas in place (an edit needs to see them).

    Raises:
        JsoncSyntaxError: a ``/*`` comment is never closed.
    """
    if not _has_jsonc_extras(text):
        # Plain JSON (every generated configuration, and most written ones) has nothing to
        # blank: not scanning it character by character in Python saves a tenth of loading
        # a configuration of 19,641 servers.
        return " " + text[1:] if text.startswith("\ufeff") else text
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
            if pending_comma is not None and not keep_commas:
                out[pending_comma] = " "
            pending_comma = None
        elif c not in " \t\r\n":
            pending_comma = None
        i += 1
    return "".join(out)


_STRING_OR_EXTRA = re.compile(r'"(?:[^"\\\n]|\\.)*["\n]?|/[/*]|,[ \t\r\n]*[\]}]', re.S)
"""A string as :func:`blank_jsonc` skips it (up to its closing quote or a raw newline, an
escape taking the next character), else what it blanks: the start of a comment, or a comma
before a closing bracket (one with a comment in between starts a comment)."""


def _has_jsonc_extras(text: str) -> bool:
    """Whether ``text`` has a comment or a trailing comma outside its strings."""
    return any(m.group()[0] != '"' for m in _STRING_OR_EXTRA.finditer(text))


def parse_jsonc(text: str) -> JsoncDocument | None:
    """Parse JSONC text. Returns ``None`` when the text holds nothing but whitespace and comments.

    Raises:
        JsoncSyntaxError: the text is not valid JSONC; the position is the real one.
    """
    plain = " " + text[1:] if text.startswith("\ufeff") else text
    try:
        # Plain JSON (every generated configuration, and most written ones) parses as it is:
        # a comment or a trailing comma makes json.loads fail, so text it accepts is already
        # what blanking would give, and is not searched for them first.
        return JsoncDocument(json.loads(plain), text=text, blanked=plain)
    except (ValueError, RecursionError):
        pass  # reported below, with the real position, or JSONC
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
    return JsoncDocument(data, text=text, blanked=blanked)


def _scan_positions(text: str, blanked: str) -> _Positions:
    """Where every key, array item and value of ``blanked`` (which json.loads accepted) is."""
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
    return _Positions(key_lines=key_lines, key_offsets=key_offsets, value_spans=spans)


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
    newline = text.find("\n")
    while newline >= 0:  # str.find, not a Python step per character
        starts.append(newline + 1)
        newline = text.find("\n", newline + 1)
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


class JsoncEditError(ValueError):
    """An edit cannot be made: a member on the path is not an object."""


_ONE_LINE_WIDTH = 72
"""Arrays of plain values at most this wide are written on one line (``"args": ["-y", "x"]``)."""


def set_jsonc_value(text: str, path: tuple[str, ...], value: object) -> str:
    """``text`` with the member at ``path`` (object keys from the root) set to ``value``.

    An existing value is replaced where it stands; a new member is added after the last member
    of its object, indented like its siblings; missing objects on the way are created. Every
    other character of ``text`` is kept. A text with nothing but comments (or nothing) gets a
    new document after them.

    Raises:
        JsoncSyntaxError: ``text`` is not valid JSONC.
        JsoncEditError: the root, or a member on ``path``, is not an object.
    """
    if not path:
        raise JsoncEditError("an edit needs a path of at least one key")
    if "\r\n" in text:
        # A Windows file keeps its line endings: edit it as LF, then write every break back.
        edited = set_jsonc_value(text.replace("\r\n", "\n"), path, value)
        return edited.replace("\n", "\r\n")
    document = parse_jsonc(text)
    if document is None:
        step = "  "
        body = _render(_nest(path, value), "", step)
        lead = text.rstrip()
        return (lead + "\n" if lead else "") + body + "\n"
    node: object = document.data
    depth = 0
    while depth < len(path) and isinstance(node, dict) and path[depth] in node:
        node = node[path[depth]]
        depth += 1
    step = _indent_step(text, document)
    if depth == len(path):
        start, end = document.value_spans[path]
        rendered = _render(value, _line_indent(text, start), step)
        return text[:start] + rendered + text[end:]
    if not isinstance(node, dict):
        where = ".".join(path[:depth]) or "the top level"
        raise JsoncEditError(f"{where} is not an object")
    return _insert_member(
        text, document, path[:depth], path[depth], _nest(path[depth + 1 :], value), step
    )


def remove_jsonc_member(text: str, path: tuple[str, ...]) -> str:
    """``text`` without the member at ``path``; unchanged when there is none.

    The member's key, value and separating comma go; when the member had its lines to itself,
    those whole lines go, with a comment written after it on its last line. Comments elsewhere
    (including one on the line above, which may describe more than this member) stay.

    Raises:
        JsoncSyntaxError: ``text`` is not valid JSONC.
    """
    document = parse_jsonc(text)
    if document is None or not path or path not in document.key_offsets:
        return text
    bare = blank_jsonc(text, keep_commas=True)
    key_start = document.key_offsets[path]
    _, value_end = document.value_spans[path]
    after = _skip_space(bare, value_end)
    comma_before: int | None = None
    if after < len(bare) and bare[after] == ",":
        end = after + 1
    else:
        end = value_end
        before = _skip_space_back(bare, key_start)
        if before >= 0 and bare[before] == ",":
            comma_before = before
    line_start = text.rfind("\n", 0, key_start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if not text[line_start:key_start].strip() and not bare[end:line_end].strip():
        cut_start, cut_end = line_start, min(line_end + 1, len(text))
    else:
        cut_start, cut_end = key_start, end
        while cut_end < len(text) and text[cut_end] in " \t" and cut_end < line_end:
            cut_end += 1
    edited = text[:cut_start] + text[cut_end:]
    if comma_before is not None:
        edited = edited[:comma_before] + edited[comma_before + 1 :]
    return edited


def _insert_member(
    text: str,
    document: JsoncDocument,
    parent: tuple[str, ...],
    key: str,
    value: object,
    step: str,
) -> str:
    obj = _get(document.data, parent)
    assert isinstance(obj, dict)
    start, end = document.value_spans[parent]
    base = _line_indent(text, document.key_offsets[parent] if parent else start)
    if not obj:
        indent = base + step
        member = f"{json.dumps(key, ensure_ascii=False)}: {_render(value, indent, step)}"
        return text[:start] + "{\n" + indent + member + "\n" + base + "}" + text[end:]
    keys = list(obj)
    first_key = document.key_offsets[(*parent, keys[0])]
    last_key = document.key_offsets[(*parent, keys[-1])]
    _, last_end = document.value_spans[(*parent, keys[-1])]
    if "\n" not in text[start:first_key]:
        member = f"{json.dumps(key, ensure_ascii=False)}: {_render(value, base, step)}"
        return text[:last_end] + ", " + member + text[last_end:]
    indent = _line_indent(text, last_key)
    member = f"{json.dumps(key, ensure_ascii=False)}: {_render(value, indent, step)}"
    bare = blank_jsonc(text, keep_commas=True)
    line_end = text.find("\n", last_end)
    line_end = len(text) if line_end < 0 else line_end
    rest = bare[last_end:line_end].strip()
    if rest in ("", ","):
        # Keep a comment written after the last member on its line: the new member goes on
        # the next line, and the comma right after the old value.
        comma = "" if rest == "," else ","
        return (
            text[:last_end]
            + comma
            + text[last_end:line_end]
            + "\n"
            + indent
            + member
            + (text[line_end:])
        )
    return text[:last_end] + ",\n" + indent + member + text[last_end:]


def _get(data: object, path: tuple[str, ...]) -> object:
    for key in path:
        assert isinstance(data, dict)
        data = data[key]
    return data


def _nest(path: tuple[str, ...], value: object) -> object:
    for key in reversed(path):
        value = {key: value}
    return value


def _render(value: object, indent: str, step: str) -> str:
    """``value`` as JSON whose continuation lines start at ``indent``."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent + step
        members = [
            f"{inner}{json.dumps(k, ensure_ascii=False)}: {_render(v, inner, step)}"
            for k, v in value.items()
        ]
        return "{\n" + ",\n".join(members) + "\n" + indent + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        if not any(isinstance(item, dict | list | tuple) for item in value):
            one_line = "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in value) + "]"
            if len(one_line) <= _ONE_LINE_WIDTH:
                return one_line
        inner = indent + step
        items = [inner + _render(v, inner, step) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=False)


def _line_indent(text: str, offset: int) -> str:
    line_start = text.rfind("\n", 0, offset) + 1
    end = line_start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[line_start:end]


def _indent_step(text: str, document: JsoncDocument) -> str:
    """The file's own indentation unit: that of its first top-level key, else two spaces."""
    data = document.data
    if isinstance(data, dict) and data:
        first = document.key_offsets.get((next(iter(data)),))
        if first is not None:
            indent = _line_indent(text, first)
            if indent and text[text.rfind("\n", 0, first) + 1 : first] == indent:
                return indent
    return "  "


def _skip_space(text: str, offset: int) -> int:
    while offset < len(text) and text[offset] in " \t\r\n":
        offset += 1
    return offset


def _skip_space_back(text: str, offset: int) -> int:
    offset -= 1
    while offset >= 0 and text[offset] in " \t\r\n":
        offset -= 1
    return offset
