"""The semantic signal of tool search: a small static embedding model, run offline.

A static embedding model maps each token to a fixed vector; a text's vector is the mean of
its tokens' vectors. It knows that a "song" is close to a "track" and "tell me about this
paper" to "get paper metadata", which no word list covers, and it costs one table lookup per
token: embedding every tool of a 2,000-tool catalog takes a fraction of a second, a query a
few microseconds.

The model is WordLlama's ``l2_supercat_256`` (the ``pi-mcp-adapter[semantic]`` extra installs
the ``wordllama`` package, whose wheel ships the weights and the tokenizer). Its own
``load()`` looks for the tokenizer in a folder that does not exist and then downloads it, so
the shipped files are read directly here: nothing ever touches the network. When the package
is not installed, :func:`load_default_embedder` returns None and search stays lexical.
Reading the model takes about 0.2 s, once per process, when the first query needs it.

Tool vectors are kept in a sidecar file next to the metadata cache, keyed by a hash of what
each tool gives the model (its definition) and the model's id, so a warm start embeds
nothing and a changed tool is embedded again. See :class:`ToolVectors`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import tempfile
import time
import zipfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ._metadata import ToolInfo
from ._search_text import split_words

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    FloatMatrix = NDArray[np.float32]

__all__ = [
    "VECTOR_CACHE_NAME",
    "EmbeddedTexts",
    "TextEmbedder",
    "ToolVectors",
    "WordLlamaEmbedder",
    "embedding_text",
    "load_default_embedder",
    "read_packaged_model",
    "search_vector_cache_path",
    "semantic_available",
]

logger = logging.getLogger(__name__)

_WORDLLAMA_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_WORDLLAMA_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
# A first sentence longer than this is cut: what a tool does fits in fewer characters.
_DESCRIPTION_CHARS = 600
# Below this many texts, encoding them one by one is faster than the batch encoder.
_BATCH_FROM = 32
# Format of the sidecar file; bump when its layout changes.
_VECTOR_FILE_VERSION = "1"


VECTOR_CACHE_NAME = "mcp-search-vectors.npz"


def search_vector_cache_path(agent_dir: Path) -> Path:
    """Where the tool vectors live: next to the metadata cache (``mcp-cache.json``)."""
    return agent_dir / VECTOR_CACHE_NAME


class TextEmbedder(Protocol):
    """Maps texts to unit-length vectors (one row per text)."""

    @property
    def model_id(self) -> str:
        """Names the model and its version: vectors of different ids never mix."""
        ...

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Unit-length float32 vectors, one row per text (a zero row for an empty text)."""
        ...


def _wordllama_dir() -> Path | None:
    # find_spec locates the package without importing it: importing wordllama configures
    # the root logger as a side effect.
    try:
        spec = importlib.util.find_spec("wordllama")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    if not (root.joinpath(*_WORDLLAMA_WEIGHTS).is_file()):
        return None
    if not (root.joinpath(*_WORDLLAMA_TOKENIZER).is_file()):
        return None
    return root


def semantic_available() -> bool:
    """Whether the semantic extra is installed with its model files (nothing is loaded)."""
    if _wordllama_dir() is None:
        return False
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("numpy", "safetensors", "tokenizers")
    )


class WordLlamaEmbedder:
    """WordLlama ``l2_supercat_256`` read from the installed package's own files.

    Raises:
        OSError: the model files cannot be read.
    """

    def __init__(self, package_dir: Path) -> None:
        import numpy as np
        from safetensors import safe_open
        from tokenizers import Tokenizer

        weights = package_dir.joinpath(*_WORDLLAMA_WEIGHTS)
        with safe_open(str(weights), framework="np") as tensors:
            table = tensors.get_tensor("embedding.weight")
        self._table: FloatMatrix = np.ascontiguousarray(table, dtype=np.float32)
        self._tokenizer = Tokenizer.from_file(str(package_dir.joinpath(*_WORDLLAMA_TOKENIZER)))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()

    @property
    def model_id(self) -> str:
        return "wordllama/l2_supercat_256"

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        import numpy as np

        table = self._table
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        if not texts:
            return out
        if len(texts) > _BATCH_FROM:
            encoded = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        else:
            # encode_batch starts a thread pool, which costs milliseconds for one query.
            encoded = [self._tokenizer.encode(t, add_special_tokens=False) for t in texts]
        for row, encoding in enumerate(encoded):
            ids = encoding.ids
            if ids:
                out[row] = table[ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.maximum(norms, 1e-12, out=norms)
        out /= norms
        return out


class _LazyWordLlama:
    """The packaged model, read from disk when the first text is embedded.

    Its id comes from the installed package's version, so a warm start whose tool vectors are
    all cached does not load the model while the index is built.
    """

    def __init__(self, package_dir: Path) -> None:
        self._package_dir = package_dir
        self._model: WordLlamaEmbedder | None = None
        try:
            version = importlib.metadata.version("wordllama")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        self._model_id = f"wordllama-{version}/l2_supercat_256"

    @property
    def model_id(self) -> str:
        return self._model_id

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        if self._model is None:
            self._model = WordLlamaEmbedder(self._package_dir)
        return self._model.embed(texts)


def read_packaged_model() -> WordLlamaEmbedder | None:
    """Read the packaged model from disk now (about 0.2 s); None without the extra.

    Raises:
        OSError: the model files cannot be read.
    """
    package_dir = _wordllama_dir() if semantic_available() else None
    return WordLlamaEmbedder(package_dir) if package_dir is not None else None


@lru_cache(maxsize=1)
def load_default_embedder() -> TextEmbedder | None:
    """The packaged model (one per process, read from disk on first use); None when the
    ``semantic`` extra is not installed, and search stays lexical."""
    if not semantic_available():
        return None
    package_dir = _wordllama_dir()
    assert package_dir is not None
    return _LazyWordLlama(package_dir)


def embedding_text(tool: ToolInfo) -> str:
    """What the model reads for a tool: its own name as words, twice, then the first sentence
    of its description, then any keywords configured for it.

    A text's vector is the mean of its tokens' vectors, so repeating the name gives it the
    weight it has in the lexical ranking (a tool's name says most about what it does), and
    the first sentence says what the tool does while later ones describe parameters, limits
    and examples that pull the mean away from it. Measured on both labelled sets: hit@5 of
    implicit requests +0.01 (development set) and +0.07 (real servers) over the name once
    and the whole description, hit@1 -0.02 on both.
    """
    name = " ".join(split_words(tool.original_name))
    description = " ".join(tool.description.split())
    end = description.find(". ")
    first = description[: end + 1] if end > 0 else description
    first = first[:_DESCRIPTION_CHARS]
    # Keywords the user configured for the tool (searchKeywords) are read like its text.
    return " ".join(part for part in (f"{name}. {name}.", first, *tool.keywords) if part)


def _definition_key(model_id: str, text: str) -> str:
    digest = hashlib.blake2b(digest_size=16)
    digest.update(model_id.encode())
    digest.update(b"\0")
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


class ToolVectors:
    """The unit vectors of a catalog's tools, and the similarity of texts to them.

    Built with a model, or from the sidecar file ``cache_path`` for every tool whose
    definition hash is already there; only the others are embedded, and the file is then
    rewritten atomically (a temporary file in the same folder, replaced in one step) with
    exactly the current catalog's vectors. A missing, unreadable or foreign file counts as
    empty. Several processes may share the file: each replaces it whole, so a reader sees one
    writer's complete file, never a mix.
    """

    def __init__(
        self,
        tools: Sequence[ToolInfo],
        embedder: TextEmbedder,
        *,
        cache_path: Path | None = None,
    ) -> None:
        import numpy as np

        self._embedder = embedder
        model_id = embedder.model_id
        texts = [embedding_text(t) for t in tools]
        keys = [_definition_key(model_id, text) for text in texts]
        cached = _read_vectors(cache_path, model_id) if cache_path is not None else {}
        missing = [i for i, key in enumerate(keys) if key not in cached]
        dims = next(iter(cached.values())).shape[0] if cached else None
        fresh = embedder.embed([texts[i] for i in missing]) if missing else None
        if dims is None:
            dims = fresh.shape[1] if fresh is not None else 1
        matrix = np.zeros((len(tools), dims), dtype=np.float32)
        for i, key in enumerate(keys):
            vector = cached.get(key)
            if vector is not None:
                matrix[i] = vector
        if fresh is not None:
            matrix[missing] = fresh
        self._matrix: FloatMatrix = matrix
        self._mean: FloatMatrix = matrix.mean(axis=0) if len(matrix) else matrix.sum(axis=0)
        self.embedded = len(missing)
        """How many tools this build had to embed (0 on a warm start)."""
        if cache_path is not None and (missing or len(cached) != len(set(keys))):
            _write_vectors(cache_path, model_id, keys, matrix)

    def __len__(self) -> int:
        return int(self._matrix.shape[0])

    def similarities(self, texts: Sequence[str]) -> FloatMatrix:
        """Cosine similarity of each text to every tool: shape (len(texts), tools)."""
        import numpy as np

        embedded = self.embed(texts)
        return np.stack([embedded.similarity(i) for i in range(len(texts))]).reshape(
            len(texts), len(self)
        )

    def embed(self, texts: Sequence[str]) -> EmbeddedTexts:
        """Embed ``texts`` once, to compare each with all tools or some of them."""
        return EmbeddedTexts(self._matrix, self._mean, self._embedder.embed(texts))


class EmbeddedTexts:
    """Texts embedded by :meth:`ToolVectors.embed`, compared with the tools on demand."""

    def __init__(self, matrix: FloatMatrix, mean: FloatMatrix, vectors: FloatMatrix) -> None:
        self._matrix = matrix
        self._mean = mean
        self._vectors = vectors

    def similarity(self, text: int, tools: Sequence[int] | None = None) -> FloatMatrix:
        """Cosine similarity of text number ``text`` to every tool, as an array indexed by
        tool position; with ``tools``, only those entries are computed (the others are 0)."""
        import numpy as np

        vector = self._vectors[text]
        # einsum's own loop, not BLAS: for one vector a BLAS product wakes its thread pool,
        # which on a busy machine costs ten times the arithmetic.
        if tools is None:
            full: FloatMatrix = np.einsum("nd,d->n", self._matrix, vector)
            return full
        rows = np.fromiter(tools, dtype=np.int64)
        partial: FloatMatrix = np.zeros(len(self._matrix), dtype=np.float32)
        partial[rows] = np.einsum("nd,d->n", self._matrix[rows], vector)
        return partial

    def baseline(self, text: int) -> float:
        """The mean similarity of text number ``text`` to the tools."""
        return float(self._vectors[text] @ self._mean)


def _read_vectors(path: Path, model_id: str) -> dict[str, FloatMatrix]:
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["version"]) != _VECTOR_FILE_VERSION or str(data["model"]) != model_id:
                return {}
            keys = data["keys"]
            vectors = data["vectors"]
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        # A damaged or foreign file only costs embedding the catalog again.
        logger.info("ignoring the search vector cache %s: %s", path, exc)
        return {}
    if vectors.ndim != 2 or len(keys) != vectors.shape[0]:
        return {}
    return {str(k): vectors[i] for i, k in enumerate(keys)}


# A temporary file older than this was left by a process that died while writing; a live
# writer takes well under a second.
_STALE_TEMPORARY_S = 600.0


def _remove_stale_temporaries(path: Path) -> None:
    now = time.time()
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if now - leftover.stat().st_mtime > _STALE_TEMPORARY_S:
                leftover.unlink()


def _write_vectors(path: Path, model_id: str, keys: Sequence[str], matrix: FloatMatrix) -> None:
    import numpy as np

    unique: dict[str, int] = {}
    for i, key in enumerate(keys):
        unique.setdefault(key, i)
    rows = list(unique.values())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(path)
        fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        logger.info("cannot write the search vector cache %s: %s", path, exc)
        return
    try:
        with os.fdopen(fd, "wb") as out:
            np.savez(
                out,
                version=np.array(_VECTOR_FILE_VERSION),
                model=np.array(model_id),
                keys=np.array(list(unique), dtype="<U32"),
                vectors=matrix[rows],
            )
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp_name, path)
    except OSError as exc:
        logger.info("cannot write the search vector cache %s: %s", path, exc)
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
