"""Offline token counting with OpenAI's ``o200k_base`` encoding.

Counts are what a GPT-4o-class model would be charged; Claude's tokenizer is not available
offline, so for other providers they are an approximation of the same order. The encoding is
bundled with ``quicktok`` (no network, unlike ``tiktoken``), and loaded once, on first use,
because loading takes about a second.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Mapping
from typing import Any, Protocol

import anyio.to_thread

__all__ = [
    "ENCODING_NAME",
    "count_tokens",
    "count_tool_definition_tokens",
    "preload_tokenizer",
]

ENCODING_NAME = "o200k_base"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class _Encoding(Protocol):
    def count(self, text: str) -> int: ...


# Two threads asking at once (an event loop and a worker warming it up) must not both pay the
# one-second load.
_load_lock = threading.Lock()


@functools.cache
def _encoding() -> _Encoding:
    with _load_lock:
        import quicktok

        encoding: _Encoding = quicktok.get_encoding(ENCODING_NAME)
        return encoding


def count_tokens(text: str) -> int:
    """The number of ``o200k_base`` tokens in ``text``; special-token strings count as text.

    The first call loads the encoding (about a second); see :func:`preload_tokenizer`. Lone
    surrogates (which JSON escapes can produce) are counted as U+FFFD rather than rejected.
    """
    if not text:
        return 0
    try:
        return _encoding().count(text)
    except (TypeError, UnicodeError):
        # quicktok accepts only encodable str; a lone surrogate makes it reject the argument.
        return _encoding().count(_LONE_SURROGATE.sub("\ufffd", text))


def count_tool_definition_tokens(name: str, description: str, parameters: Mapping[str, Any]) -> int:
    """Tokens one tool definition costs in a model's context.

    Providers put each tool into the prompt as its name, description and JSON schema; the
    exact framing differs per provider and is not public, so this counts the compact JSON
    object ``{"name": ..., "description": ..., "parameters": ...}`` (no spaces, non-ASCII kept
    as is). The count is stable for a given tool, which is what comparisons between surfaces
    need. Schema values that are not JSON are counted by their ``str()``.
    """
    definition = {"name": name, "description": description, "parameters": parameters}
    text = json.dumps(definition, separators=(",", ":"), ensure_ascii=False, default=str)
    return count_tokens(text)


async def preload_tokenizer() -> None:
    """Load the encoding in a worker thread, so the first count does not stall the event loop."""
    await anyio.to_thread.run_sync(_encoding)
