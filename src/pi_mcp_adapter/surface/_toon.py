"""Re-encode JSON tool output as TOON when that costs the model fewer tokens.

TOON (Token-Oriented Object Notation) writes the JSON data model without most of its quotes
and braces, and lists of similar objects as a header plus one row each, which is what many
tools return. It is opt-in per server (``settings.toonEncode``) because a model may need the
exact JSON (to copy it into another call, say).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from ._tokens import count_tokens

__all__ = ["encode_if_shorter", "should_toon"]

logger = logging.getLogger(__name__)


def encode_if_shorter(text: str) -> str | None:
    """``text`` as TOON if it is a JSON object or array and TOON needs fewer tokens, else None.

    Tokens are counted with ``o200k_base`` (see :mod:`._tokens`): characters are a poor proxy,
    because TOON mostly removes punctuation, which tokenises cheaply. The encoding is checked by
    decoding it again, so a value TOON cannot carry exactly (``NaN``, for one) keeps its JSON.

    Never raises: anything that is not a JSON object or array, or that TOON cannot encode,
    gives None.
    """
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        value: Any = json.loads(stripped, parse_constant=_reject_constant)
        if not isinstance(value, dict | list):
            return None
        import toon_format  # on first use: tens of milliseconds every command would pay

        encoded: str = toon_format.encode(value)
        if count_tokens(encoded) >= count_tokens(text):
            return None
        if toon_format.decode(encoded) != value:
            logger.debug("TOON encoding skipped: the value does not survive a round trip")
            return None
    except (ValueError, TypeError, RecursionError):
        return None
    except Exception as exc:  # a defect in the encoder must not fail the tool call
        logger.debug("TOON encoding skipped: %r", exc)
        return None
    return encoded


def should_toon(server: str, setting: bool | Sequence[str]) -> bool:
    """Whether ``server``'s results are TOON-encoded under ``settings.toonEncode``.

    ``True`` means every server, ``False`` none, a list names the servers. A single string is
    read as one server name, not as a sequence of characters.
    """
    if isinstance(setting, bool):
        return setting
    if isinstance(setting, str):
        return server == setting
    return server in setting


def _reject_constant(name: str) -> float:
    # NaN and Infinity are not JSON; TOON would write them as null and lose them.
    raise ValueError(f"{name} is not a JSON value")
