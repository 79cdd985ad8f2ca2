"""The process-wide secret registry: every secret value the process resolves, and its reference.

Secrets are hidden by value, not by the name of the field they sit in: a token interpolated
into a URL path, a command line or a socket path is as secret as one in an ``Authorization``
header, and a server that prints its environment on stderr prints the values we gave it.

What is registered (once, when it is resolved):

- the value of every ``${VAR}`` reference, in any field (reference: ``${VAR}``), except the
  variables that name places rather than credentials (:data:`PLACE_VARIABLES`);
- the output of every ``!command`` value, and header values printed by a
  ``requestHeadersCommand`` (reference: the mask);
- header values, ``env`` values and bearer tokens written literally in the configuration,
  ``bearerTokenEnv`` values, OAuth tokens and client secrets (reference: the mask, or
  ``${VAR}`` when the value came from one).

Values shorter than :data:`MIN_SECRET_CHARS` are not registered: ``1``, ``true`` or ``info``
would hide every occurrence of common text. GitLab refuses to mask variables shorter than
8 characters for the same reason; we stop at 6 to still cover short API keys.

Every sink calls :func:`redact` (or :func:`redact_data` for JSON-shaped values): the CLI's
stdout and stderr, Python log records (a record factory, so our loggers and those of ``mcp``,
``httpx``, ``uvicorn``... are all covered), every file we write, notices, error messages, server
stderr tails and logs, and every tool result a model or gateway client receives. Replacement is
longest first, so a value that contains another registered value is replaced whole.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import IO, TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel
from urllib.parse import quote

_Model = TypeVar("_Model", bound="BaseModel")

__all__ = [
    "MASK",
    "MIN_SECRET_CHARS",
    "PLACE_VARIABLES",
    "RedactingStream",
    "forget_secrets",
    "is_place_variable",
    "redact",
    "redact_bytes",
    "redact_data",
    "redact_model",
    "register_secret",
    "registered_count",
]

MASK = "********"

MIN_SECRET_CHARS = 6
"""Shorter values are not registered (too many false hits in ordinary text)."""

PLACE_VARIABLES = frozenset(
    {
        "HOME",
        "USERPROFILE",
        "PWD",
        "OLDPWD",
        "TMPDIR",
        "TEMP",
        "TMP",
        "USER",
        "USERNAME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "APPDATA",
        "LOCALAPPDATA",
    }
)
"""Variables that say where things are, not how to get in: interpolating ``${HOME}`` must not
turn every path the program prints into ``${HOME}/...``. ``XDG_*`` variables count too."""


def is_place_variable(name: str) -> bool:
    return name in PLACE_VARIABLES or name.startswith("XDG_")


# One immutable snapshot, replaced whole on registration, so that readers never lock: the
# pattern and the mapping it was built from always agree.
_Snapshot = tuple["re.Pattern[str]", dict[str, str]]
_snapshot: _Snapshot | None = None
_lock = threading.Lock()


def register_secret(value: str | None, reference: str = MASK) -> None:
    """Remember ``value`` as a secret shown as ``reference`` from now on, in every sink.

    Also registers the forms the value takes when written as JSON or percent-encoded in a URL,
    and each line of a multi-line value. A value shorter than :data:`MIN_SECRET_CHARS`, or one
    that its own reference contains, is ignored. A reference that names the value's origin
    (``${VAR}``) replaces the bare mask of an earlier registration.
    """
    if not value or len(value) < MIN_SECRET_CHARS:
        return
    forms = {value, json.dumps(value, ensure_ascii=False)[1:-1], quote(value, safe="")}
    if "\n" in value:
        forms.update(line.strip() for line in value.splitlines())
    global _snapshot
    with _lock:
        current = dict(_snapshot[1]) if _snapshot is not None else {}
        changed = False
        for form in forms:
            if len(form) < MIN_SECRET_CHARS or form in reference:
                continue
            known = current.get(form)
            if known is None or (known == MASK and reference != MASK):
                current[form] = reference
                changed = True
        if not changed:
            return
        ordered = sorted(current, key=len, reverse=True)  # longest first wins at a position
        first = _snapshot is None
        _snapshot = (re.compile("|".join(map(re.escape, ordered))), current)
    if first:
        _install_record_factory()


def forget_secrets() -> None:
    """Forget every registered value (a test that must not see another test's secrets)."""
    global _snapshot
    with _lock:
        _snapshot = None


def registered_count() -> int:
    """How many values (counting their encoded forms) are registered."""
    snapshot = _snapshot
    return 0 if snapshot is None else len(snapshot[1])


def redact(text: str) -> str:
    """``text`` with every registered value replaced by its reference."""
    snapshot = _snapshot
    if snapshot is None or not text:
        return text
    pattern, references = snapshot
    return pattern.sub(lambda match: references[match.group(0)], text)


def redact_data(data: Any) -> Any:
    """A JSON-shaped value (dicts, lists, tuples, strings) with every string redacted."""
    if _snapshot is None:
        return data
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, Mapping):
        return {redact(k) if isinstance(k, str) else k: redact_data(v) for k, v in data.items()}
    if isinstance(data, list):
        return [redact_data(item) for item in data]
    if isinstance(data, tuple):
        return tuple(redact_data(item) for item in data)
    return data


def redact_model(model: _Model) -> _Model:
    """A pydantic value (a server's result) with every registered value replaced in its
    strings; the same object when it holds none (the common case costs one dump)."""
    if _snapshot is None:
        return model
    dumped = model.model_dump(by_alias=True, exclude_unset=True)
    redacted = redact_data(dumped)
    if redacted == dumped:
        return model
    return type(model).model_validate(redacted)


def redact_bytes(data: bytes) -> bytes:
    """UTF-8 ``data`` redacted; anything that is not UTF-8 text is returned as it is."""
    if _snapshot is None:
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    return redact(text).encode("utf-8")


class RedactingStream:
    """A text stream that redacts everything written through it (the CLI's stdout/stderr).

    Every other attribute (``encoding``, ``isatty``, ``fileno``...) is the wrapped stream's,
    so click and rich treat it as the terminal it wraps. Writes are redacted one call at a
    time: our printers write whole messages, so a value is never split between two calls.
    """

    def __init__(self, inner: IO[str]) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(redact(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


_PLAIN_ARG_TYPES = (int, float, bool, type(None))


def _redact_arg(arg: object) -> object:
    if isinstance(arg, str):
        return redact(arg)
    if isinstance(arg, _PLAIN_ARG_TYPES):
        return arg
    # URLs, exceptions, paths: their text is what the record will show.
    shown = str(arg)
    redacted = redact(shown)
    return arg if redacted == shown else redacted


def _redact_record(record: logging.LogRecord) -> None:
    if isinstance(record.msg, str):
        record.msg = redact(record.msg)
    args = record.args
    if isinstance(args, tuple):
        record.args = tuple(_redact_arg(arg) for arg in args)
    elif isinstance(args, Mapping):
        record.args = {key: _redact_arg(value) for key, value in args.items()}
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        # A traceback's last line is the exception's text (an httpx error names the URL); the
        # formatter uses exc_text when it is set, so set it redacted.
        text = logging.Formatter().formatException(record.exc_info)
        redacted = redact(text)
        if redacted != text:
            record.exc_text = redacted
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


def _install_record_factory() -> None:
    """Redact every log record of the process as it is created.

    A filter on a logger does not see the records of its child loggers (``mcp.client.sse``
    under ``mcp``), and handlers belong to the application; the record factory is the one
    place every record passes, whoever logs it and wherever it goes.
    """
    previous = logging.getLogRecordFactory()
    if getattr(previous, "_pi_mcp_redacts", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _redact_record(record)
        return record

    factory._pi_mcp_redacts = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
