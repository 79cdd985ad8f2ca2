"""An embedder for tests: the packaged model, counting what it is asked to embed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pi_mcp_adapter.catalog._search_semantic import TextEmbedder, load_default_embedder


class CountingEmbedder:
    """The packaged model, counting the texts it is asked to embed; ``model_id`` to name it
    as another model (its vectors are the packaged model's)."""

    def __init__(self, model_id: str | None = None) -> None:
        real = load_default_embedder()
        assert real is not None
        self._real: TextEmbedder = real
        self._model_id = model_id or real.model_id
        self.texts: list[str] = []

    @property
    def model_id(self) -> str:
        return self._model_id

    def embed(self, texts: Sequence[str]) -> Any:
        self.texts.extend(texts)
        return self._real.embed(texts)
