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
Its token table is memory-mapped, so loading it costs next to nothing; reading the tokenizer
takes about 0.05 s, once per process, and only when a text has a word not seen before.

Tool vectors are kept in a sidecar file next to the metadata cache, keyed by a hash of what
each tool gives the model (its definition) and the model's id, so a warm start embeds
nothing and a changed tool is embedded again; the file also keeps the token ids of the
catalog's words, so that a query in those words needs no tokenizer. See :class:`ToolVectors`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import mmap
import os
import string
import struct
import tempfile
import time
import zipfile
from collections.abc import Collection, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ._metadata import ToolInfo
from ._search_store import texts_fingerprint
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
    "forget_remembered_words",
    "load_default_embedder",
    "preload_default_embedder",
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
# Longer words (addresses, identifiers) are not remembered: the array's width is its longest
# word's, and queries rarely hold such words.
_REMEMBERED_WORD_CHARS = 32
# Format of the sidecar file; bump when its layout changes.
_VECTOR_FILE_VERSION = "2"


VECTOR_CACHE_NAME = "mcp-search-vectors.npz"


def search_vector_cache_path(agent_dir: Path) -> Path:
    """Where the tool vectors live: next to the metadata cache (``mcp-cache.json``)."""
    return agent_dir / VECTOR_CACHE_NAME


def _well_formed(text: str) -> str:
    """``text`` with lone surrogates as U+FFFD: the tokenizer takes only well-formed Unicode,
    and a query from a command line (undecodable bytes) or a server's description (a JSON
    ``\\ud800`` escape) may hold them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


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
    return all(importlib.util.find_spec(name) is not None for name in ("numpy", "tokenizers"))


def _map_embedding_table(path: Path) -> NDArray[Any]:
    """The token table of a safetensors file, memory-mapped in its stored dtype.

    A query touches a handful of its 32,000 rows: mapping the file (instead of reading all
    16 MB and widening it to float32) makes loading the model cost next to nothing; rows are
    widened to float32 as they are used, which gives the same values.

    Raises:
        OSError: the file cannot be read or is not a safetensors file with that table.
    """
    import numpy as np

    dtypes = {"F16": np.float16, "F32": np.float32}
    with path.open("rb") as file:
        header_size = int.from_bytes(file.read(8), "little")
        try:
            header = json.loads(file.read(header_size))
            tensor = header["embedding.weight"]
            dtype = dtypes[tensor["dtype"]]
            rows, columns = (int(n) for n in tensor["shape"])
            begin, end = (int(n) for n in tensor["data_offsets"])
        except (ValueError, KeyError, TypeError) as exc:
            raise OSError(f"{path} holds no readable embedding table: {exc!r}") from exc
        if end - begin != rows * columns * np.dtype(dtype).itemsize:
            raise OSError(f"{path}: the embedding table's size does not match its shape")
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    # The array keeps the mapping open; the file itself can be closed.
    flat = np.frombuffer(mapped, dtype=dtype, count=rows * columns, offset=8 + header_size + begin)
    table: NDArray[Any] = flat.reshape(rows, columns)
    return table


def _words(text: str) -> list[str] | None:
    """``text``'s words as the tokenizer reads them one by one, or None when it cannot.

    The tokenizer marks every space with "▁" and merges pieces only within a word (its only
    tokens with an inner "▁" are runs of spaces), so a text whose words are separated by
    single spaces is tokenized word by word: the ids of the text are the ids of its words,
    each tokenized alone, one after the other (checked on every tool and query of the
    development set). Other spacing goes to the tokenizer whole.
    """
    if not text or text[0] == " " or text[-1] == " " or "  " in text:
        return None
    return text.split(" ")


def _mean_vectors(table: NDArray[Any], token_ids: Sequence[Sequence[int]]) -> FloatMatrix:
    """Each text's vector: the mean of its tokens' rows (widened to float32), unit length."""
    import numpy as np

    out = np.zeros((len(token_ids), table.shape[1]), dtype=np.float32)
    for row, ids in enumerate(token_ids):
        if ids:
            out[row] = table[list(ids)].astype(np.float32).mean(axis=0)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    out /= norms
    return out


class WordLlamaEmbedder:
    """WordLlama ``l2_supercat_256`` read from the installed package's own files.

    Raises:
        OSError: the model files cannot be read.
    """

    def __init__(self, package_dir: Path) -> None:
        from tokenizers import Tokenizer

        self.table = _map_embedding_table(package_dir.joinpath(*_WORDLLAMA_WEIGHTS))
        self._tokenizer = Tokenizer.from_file(str(package_dir.joinpath(*_WORDLLAMA_TOKENIZER)))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()

    @property
    def model_id(self) -> str:
        return "wordllama/l2_supercat_256"

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The token ids of each text."""
        texts = [_well_formed(t) for t in texts]
        if len(texts) > _BATCH_FROM:
            encoded = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        else:
            # encode_batch starts a thread pool, which costs milliseconds for one query.
            encoded = [self._tokenizer.encode(t, add_special_tokens=False) for t in texts]
        return [list(encoding.ids) for encoding in encoded]

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        return _mean_vectors(self.table, self.token_ids(texts) if texts else [])


class _LazyWordLlama:
    """The packaged model, read from disk only when a text needs its tokenizer.

    Its id comes from the installed package's version, so a warm start whose tool vectors are
    all cached does not load the model while the index is built. Reading the tokenizer is
    most of the model's cost, so the token ids of words already seen (every word of the
    catalog's tools, kept with the tool vectors: see :class:`ToolVectors`) are remembered:
    a query made of such words is embedded with the memory-mapped table alone.
    """

    def __init__(self, package_dir: Path) -> None:
        self._package_dir = package_dir
        self._model: WordLlamaEmbedder | None = None
        self._table: NDArray[Any] | None = None
        self._word_ids: dict[str, tuple[int, ...]] = {}
        try:
            version = importlib.metadata.version("wordllama")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        self._model_id = f"wordllama-{version}/l2_supercat_256"

    @property
    def model_id(self) -> str:
        return self._model_id

    def remember_words(self, word_ids: Mapping[str, Sequence[int]]) -> None:
        """Take the token ids of words tokenized before (by this model id)."""
        self._word_ids.update((w, tuple(ids)) for w, ids in word_ids.items())

    def forget_words(self) -> None:
        """Drop the remembered token ids, the tokenizer and the table's mapping (with the
        pages of it that embedding a catalog read): an index opened next takes the ids back
        from its vector file, and a query maps the table again, and reads the tokenizer for
        a new word."""
        self._word_ids = {}
        self._model = None
        self._table = None

    def word_ids(self, texts: Sequence[str]) -> dict[str, tuple[int, ...]]:
        """The token ids of every word of ``texts``, also lower-cased and without the
        punctuation around it, as a query would write it ("Echo" and "echo." as "echo");
        reading the tokenizer if one is new."""
        words = {w for text in texts for w in (_words(text) or ())}
        bare = {w.strip(string.punctuation) for w in words}
        words |= {w for w in bare | {w.lower() for w in words | bare} if w}
        learned = self._learn(words)
        return {w: learned[w] for w in words}

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        ids = [self._known_ids(text) for text in texts]
        unknown = [i for i, found in enumerate(ids) if found is None]
        if unknown:
            self._learn({w for i in unknown for w in (_words(texts[i]) or ())})
            model = self._load()
            for i in unknown:
                ids[i] = self._known_ids(texts[i]) or model.token_ids([texts[i]])[0]
        return _mean_vectors(self._mapped_table(), [found or [] for found in ids])

    def _known_ids(self, text: str) -> list[int] | None:
        if not text:
            return []
        words = _words(text)
        if words is None:
            return None
        ids: list[int] = []
        for word in words:
            known = self._word_ids.get(word)
            if known is None:
                return None
            ids.extend(known)
        return ids

    def _learn(self, words: Collection[str]) -> dict[str, tuple[int, ...]]:
        """The remembered token ids, ``words`` among them (the ids of the words read when
        :meth:`forget_words`, in another thread, lets go of them meanwhile)."""
        learned = self._word_ids
        new = [w for w in words if w not in learned]
        if new:
            learned.update(zip(new, map(tuple, self._load().token_ids(new)), strict=True))
        return learned

    def _load(self) -> WordLlamaEmbedder:
        if self._model is None:
            self._model = WordLlamaEmbedder(self._package_dir)
            self._table = self._model.table
        return self._model

    def _mapped_table(self) -> NDArray[Any]:
        if self._table is None:
            self._table = _map_embedding_table(self._package_dir.joinpath(*_WORDLLAMA_WEIGHTS))
        return self._table


def read_packaged_model() -> WordLlamaEmbedder | None:
    """Read the packaged model's tokenizer now (about 0.05 s; the table is memory-mapped);
    None without the extra.

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


def forget_remembered_words() -> None:
    """Make the default embedder (if one was made) forget what it read: the words it has
    tokenized, its tokenizer and the table's pages (see ``_LazyWordLlama.forget_words``)."""
    if load_default_embedder.cache_info().currsize:
        embedder = load_default_embedder()
        if isinstance(embedder, _LazyWordLlama):
            embedder.forget_words()


def preload_default_embedder() -> None:
    """Read the packaged model's tokenizer now, if the extra is installed.

    For a process that forks one child per command (the CLI's warm process): a child that
    embeds a word the catalog does not use then finds the tokenizer read (about 0.045 s saved
    per such search). Reading it starts no thread, so forking afterwards is safe.

    Raises:
        OSError: the model files cannot be read (a damaged tokenizer file makes the tokenizer
            library raise its own ``Exception``).
    """
    embedder = load_default_embedder()
    if isinstance(embedder, _LazyWordLlama):
        embedder._load()


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


def _definition_key(model_id: str, tool: ToolInfo) -> str:
    """A hash of what :func:`embedding_text` reads of ``tool``, and of the model: hashing the
    fields as they are costs a tenth of making the text (which splits words), and a warm
    start of a large catalog computes one key per tool."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (model_id, tool.original_name, tool.description, *tool.keywords):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    return digest.hexdigest()


class ToolVectors:
    """The unit vectors of a catalog's tools, and the similarity of texts to them.

    Built with a model, or from the sidecar file ``cache_path`` for every tool whose
    definition hash is already there; only the others are embedded, and the file is then
    rewritten atomically (a temporary file in the same folder, replaced in one step) with
    exactly the current catalog's vectors. A missing, unreadable or foreign file counts as
    empty. Several processes may share the file: each replaces it whole, so a reader sees one
    writer's complete file, never a mix. With the packaged model, the file also holds the
    token ids of the catalog's words (arrays ``words``, ``word_ids``, ``word_lengths``; a file
    without them gets them once), which the model remembers so that queries in those words
    need no tokenizer.

    Memory: one vector per distinct definition (what the model reads of a tool), and one
    row number per tool. The file already keeps one vector per definition; expanding them to
    one per tool took a quarter of opening a large catalog's index and, at 95,000 tools, held
    110 MB where the catalog has 2,385 distinct definitions (a server listed under several
    names, or one tool set behind many gateways, repeats its definitions). Row 0 of the
    distinct vectors is zeros: a removed tool's row points there.
    """

    def __init__(
        self,
        tools: Sequence[ToolInfo],
        embedder: TextEmbedder,
        *,
        cache_path: Path | None = None,
        rows: Sequence[int] | None = None,
        n_rows: int | None = None,
        texts: str | None = None,
        catalog: str | None = None,
    ) -> None:
        """With ``rows``, tool ``i`` is row ``rows[i]`` of ``n_rows`` (the others are removed
        tools' rows, which never rank): the numbering of a search index patched on open (see
        ``_search_store``). The file keeps the vectors in the order of ``tools``. ``texts``
        is :func:`texts_fingerprint` of ``tools`` when the caller has it already.

        ``catalog``: the :attr:`file_catalog` an earlier process read these tools' vectors
        under. Then ``tools`` is only counted: the vectors are the file's, written for that
        catalog, and :class:`LookupError` is raised when it holds another (or lacks what a
        query needs)."""
        import numpy as np

        if rows is not None and (
            len(rows) != len(tools) or n_rows is None or any(not 0 <= r < n_rows for r in rows)
        ):
            raise ValueError(f"{len(tools)} tools placed at {len(rows)} rows of {n_rows}")
        self._embedder = embedder
        model_id = embedder.model_id
        known = catalog is not None
        if catalog is None:
            catalog = _catalog_digest(model_id, tools, texts)
        self.file_catalog: str | None = None
        """The digest of the catalog the file holds exactly these tools' vectors for (the
        model and the tools' texts, in order); None when it could not be written."""
        cached_rows: dict[str, int] = {}
        cached_vectors: FloatMatrix | None = None
        word_ids: dict[str, tuple[int, ...]] | None = None
        same_catalog: NDArray[np.int64] | None = None
        if cache_path is not None:
            cached_rows, cached_vectors, word_ids, same_catalog = _read_vectors(
                cache_path, model_id, catalog, len(tools)
            )
        remembers = isinstance(embedder, _LazyWordLlama)
        if known and (same_catalog is None or (remembers and word_ids is None)):
            raise LookupError("the vector file holds another catalog")
        if isinstance(embedder, _LazyWordLlama) and word_ids is not None:
            embedder.remember_words(word_ids)
        keys: list[str] = []
        source: NDArray[np.int64]
        if same_catalog is not None:
            # The file was written for exactly these tools: its rows in their order, with no
            # key worked out per tool.
            source = same_catalog
        else:
            keys = [_definition_key(model_id, t) for t in tools]
            source = np.fromiter(
                (cached_rows.get(key, -1) for key in keys), dtype=np.int64, count=len(keys)
            )
        if cached_vectors is None:
            source = np.full(len(tools), -1, dtype=np.int64)
        missing = np.flatnonzero(source < 0)
        # Only the tools not in the file are read as text (making every tool's text is most
        # of a warm start's cost at 100,000 tools), and each definition once.
        if len(missing) and not keys:
            keys = [_definition_key(model_id, t) for t in tools]
        first_of: dict[str, int] = {}
        for i in missing.tolist():
            first_of.setdefault(keys[i], i)
        fresh = (
            embedder.embed([embedding_text(tools[i]) for i in first_of.values()])
            if first_of
            else None
        )
        dims = (
            cached_vectors.shape[1]
            if cached_vectors is not None
            else (fresh.shape[1] if fresh is not None else 1)
        )
        distinct = _DistinctVectors(
            cached_vectors if cached_vectors is not None else np.zeros((0, dims), np.float32)
        )
        stored = len(distinct) - 1
        if fresh is not None:
            distinct.append(fresh)
        fresh_row = {key: 1 + stored + n for n, key in enumerate(first_of)}
        row_of = source + 1  # the file's row r is distinct row r + 1
        row_of[missing] = [fresh_row[keys[i]] for i in missing.tolist()]
        self._distinct = distinct
        self._mean: FloatMatrix = distinct.mean_of(row_of)
        self._dead: set[int] = set()
        self._dead_rows = np.zeros(0, dtype=np.int64)
        self._rows = len(tools)
        tool_rows = row_of  # in the order of ``tools``, as the file keeps them
        if rows is not None and n_rows is not None:
            placed = np.zeros(n_rows, dtype=np.int64)  # distinct row 0: zeros
            placed[np.asarray(rows, dtype=np.int64)] = row_of
            self._dead = set(range(n_rows)).difference(rows)
            self._dead_rows = np.fromiter(sorted(self._dead), dtype=np.int64)
            row_of = placed
            self._rows = n_rows
        self._row_of: NDArray[np.int64] = np.zeros(self._rows + self._rows // 8 + 64, np.int64)
        self._row_of[: self._rows] = row_of
        self.embedded = len(missing)
        """How many tools this build had to embed (0 on a warm start)."""
        # The file keeps the token ids of every word of the catalog's tools (written with the
        # vectors, so they cover exactly its tools): queries in those words need no tokenizer.
        # A file without them gets them once.
        # A file written for another catalog is rewritten for this one, once: then it holds
        # exactly these tools' vectors, in their order.
        rewrite = len(missing) > 0 or same_catalog is None or (remembers and word_ids is None)
        if cache_path is not None and rewrite:
            words: dict[str, tuple[int, ...]] = {}
            if isinstance(embedder, _LazyWordLlama):
                # The file's memory plus the words of the tools it lacked: a word's ids do
                # not depend on the catalog, and a relisted server's words cost that server
                # (reading every tool's text is most of a rewrite at 100,000 tools). Words of
                # tools gone since stay, unused, until a rewrite without a memory.
                if word_ids is not None:
                    words = dict(word_ids)
                    words.update(
                        embedder.word_ids([embedding_text(tools[i]) for i in missing.tolist()])
                    )
                else:
                    words = embedder.word_ids([embedding_text(t) for t in tools])
            keys = keys or [_definition_key(model_id, t) for t in tools]
            if _write_vectors(cache_path, model_id, keys, distinct, tool_rows, words, catalog):
                self.file_catalog = catalog
        elif cache_path is not None:
            self.file_catalog = catalog

    def __len__(self) -> int:
        return self._rows

    @property
    def distinct_vectors(self) -> int:
        """How many vectors are held (one per distinct definition, and the zero row)."""
        return len(self._distinct)

    @property
    def maps_its_file(self) -> bool:
        """Whether the vectors read from the file stay in it (memory-mapped), not copied."""
        return self._distinct.mapped

    def prepare(self, tools: Sequence[ToolInfo]) -> FloatMatrix:
        """The vectors of ``tools``, embedded now (no vector of the index changes): for
        :meth:`append`. Safe in a worker thread."""
        return self._embedder.embed([embedding_text(t) for t in tools])

    def append(self, first: int, vectors: FloatMatrix) -> None:
        """Add ``vectors`` as rows ``first``, ``first + 1``... (the next free ones).

        Both arrays keep room to grow, so an append copies only the new rows; when one is
        full it grows by half, a copy of it now and then."""
        import numpy as np

        if first != self._rows:
            raise ValueError(f"vectors appended at row {first}, the next free row is {self._rows}")
        end = first + len(vectors)
        start = self._distinct.append(vectors)
        stop = start + len(vectors)
        self._row_of = _grown(self._row_of, end, self._rows)
        self._row_of[first:end] = np.arange(start, stop, dtype=np.int64)
        live = self._rows - len(self._dead)
        total = self._mean.astype(np.float64) * live + vectors.sum(axis=0, dtype=np.float64)
        self._rows = end
        self._mean = (total / max(1, live + len(vectors))).astype(np.float32)

    def remove(self, rows: Collection[int]) -> None:
        """Take ``rows`` out: they point at the zero vector and never rank (see
        :meth:`EmbeddedTexts.similarity`); the rows stay taken."""
        import numpy as np

        rows = [r for r in rows if r not in self._dead and r < self._rows]
        if not rows:
            return
        live = self._rows - len(self._dead)
        taken = np.asarray(rows, dtype=np.int64)
        total = self._mean.astype(np.float64) * live - self._distinct.at(self._row_of[taken]).sum(
            axis=0, dtype=np.float64
        )
        self._row_of[taken] = 0
        self._dead.update(rows)
        self._dead_rows = np.fromiter(sorted(self._dead), dtype=np.int64)
        self._mean = (total / max(1, live - len(rows))).astype(np.float32)

    def similarities(self, texts: Sequence[str]) -> FloatMatrix:
        """Cosine similarity of each text to every tool: shape (len(texts), tools)."""
        import numpy as np

        embedded = self.embed(texts)
        return np.stack([embedded.similarity(i) for i in range(len(texts))]).reshape(
            len(texts), len(self)
        )

    def embed(self, texts: Sequence[str]) -> EmbeddedTexts:
        """Embed ``texts`` once, to compare each with all tools or some of them."""
        import numpy as np

        dead = self._dead_rows if self._dead else np.zeros(0, dtype=np.int64)
        return EmbeddedTexts(
            self._distinct,
            self._row_of[: self._rows],
            self._mean,
            self._embedder.embed(texts),
            dead,
        )


def _grown(array: NDArray[Any], needed: int, used: int) -> NDArray[Any]:
    """``array`` when it has ``needed`` rows, else a copy of its first ``used`` rows with
    room for half as many again."""
    import numpy as np

    if needed <= len(array):
        return array
    grown = np.zeros((max(needed, len(array) * 3 // 2 + 16), *array.shape[1:]), dtype=array.dtype)
    grown[:used] = array[:used]
    return grown


_SUM_ROWS = 8192
"""Rows summed at a time in double precision (a copy of this many rows, not of the file)."""


class _DistinctVectors:
    """The distinct vectors a :class:`ToolVectors` holds, numbered from 0: row 0 is zeros
    (where a removed tool points), then the file's vectors (memory-mapped when the file
    allows: they stay in the page cache, shared by every process that opened the file, and
    only the rows a query compares are read), then the vectors embedded since (in memory,
    with room to grow)."""

    __slots__ = ("_added", "_n_added", "mapped", "stored")

    def __init__(self, stored: FloatMatrix) -> None:
        import numpy as np

        self.stored = stored
        self.mapped = isinstance(stored, np.memmap)
        self._added: FloatMatrix = np.zeros((64, stored.shape[1]), dtype=np.float32)
        self._n_added = 0

    def __len__(self) -> int:
        return 1 + len(self.stored) + self._n_added

    def append(self, vectors: FloatMatrix) -> int:
        """Add ``vectors``; returns the number of the first."""
        first = len(self)
        self._added = _grown(self._added, self._n_added + len(vectors), self._n_added)
        self._added[self._n_added : self._n_added + len(vectors)] = vectors
        self._n_added += len(vectors)
        return first

    def similarity(self, vector: FloatMatrix) -> FloatMatrix:
        """The dot product of ``vector`` with each distinct vector, by number."""
        import numpy as np

        # einsum's own loop, not BLAS: for one vector a BLAS product wakes its thread pool,
        # which on a busy machine costs ten times the arithmetic.
        found: FloatMatrix = np.zeros(len(self), dtype=np.float32)
        stop = 1 + len(self.stored)
        found[1:stop] = np.einsum("nd,d->n", self.stored, vector)
        found[stop:] = np.einsum("nd,d->n", self._added[: self._n_added], vector)
        return found

    def at(self, numbers: NDArray[np.int64]) -> FloatMatrix:
        """The vectors numbered ``numbers``, copied."""
        import numpy as np

        found: FloatMatrix = np.zeros((len(numbers), self.stored.shape[1]), dtype=np.float32)
        stop = 1 + len(self.stored)
        in_file = (numbers >= 1) & (numbers < stop)
        found[in_file] = self.stored[numbers[in_file] - 1]
        added = numbers >= stop
        found[added] = self._added[numbers[added] - stop]
        return found

    def mean_of(self, numbers: NDArray[np.int64]) -> FloatMatrix:
        """The mean of the vectors numbered ``numbers`` (repeats counted)."""
        import numpy as np

        dims = self.stored.shape[1]
        if not len(numbers):
            return np.zeros(dims, dtype=np.float32)
        counts = np.bincount(numbers, minlength=len(self)).astype(np.float64)
        total = np.zeros(dims, dtype=np.float64)
        stop = 1 + len(self.stored)
        for start in range(0, len(self.stored), _SUM_ROWS):
            end = min(start + _SUM_ROWS, len(self.stored))
            total += counts[1 + start : 1 + end] @ self.stored[start:end].astype(np.float64)
        total += counts[stop:] @ self._added[: self._n_added].astype(np.float64)
        return (total / len(numbers)).astype(np.float32)


class EmbeddedTexts:
    """Texts embedded by :meth:`ToolVectors.embed`, compared with the tools on demand."""

    def __init__(
        self,
        distinct: _DistinctVectors,
        row_of: NDArray[np.int64],
        mean: FloatMatrix,
        vectors: FloatMatrix,
        dead: NDArray[np.int64] | None = None,
    ) -> None:
        self._distinct = distinct
        self._row_of = row_of
        self._mean = mean
        self._vectors = vectors
        self._dead = dead

    def similarity(self, text: int, tools: Sequence[int] | None = None) -> FloatMatrix:
        """Cosine similarity of text number ``text`` to every tool, as an array indexed by
        tool position; with ``tools``, only those entries are computed (the others are 0)."""
        import numpy as np

        vector = self._vectors[text]
        # Each distinct definition is compared once, then spread to its tools.
        if tools is None:
            full: FloatMatrix = self._distinct.similarity(vector)[self._row_of]
            if self._dead is not None and len(self._dead):
                # Removed tools' rows: below any cosine, so never among the most similar.
                full[self._dead] = _NEVER_SIMILAR
            return full
        rows = np.fromiter(tools, dtype=np.int64)
        partial: FloatMatrix = np.zeros(len(self._row_of), dtype=np.float32)
        partial[rows] = np.einsum("nd,d->n", self._distinct.at(self._row_of[rows]), vector)
        return partial

    def baseline(self, text: int) -> float:
        """The mean similarity of text number ``text`` to the tools."""
        return float(self._vectors[text] @ self._mean)


def _catalog_digest(model_id: str, tools: Sequence[ToolInfo], texts: str | None = None) -> str:
    """A hash of the model and of what it reads of every tool, in order (``texts``: that
    of the tools, when worked out already)."""
    if texts is None:
        texts = texts_fingerprint(tools)
    return hashlib.blake2b(f"{model_id}\0{texts}".encode(), digest_size=20).hexdigest()


def _read_vectors(
    path: Path, model_id: str, catalog: str, tools: int
) -> tuple[
    dict[str, int],
    FloatMatrix | None,
    dict[str, tuple[int, ...]] | None,
    NDArray[np.int64] | None,
]:
    """Each definition key's row, the vectors (one float32 matrix), the word memory (None
    when the file has none), and, when the file was written for the catalog ``catalog``,
    the row of each of its ``tools`` tools (then the keys are not read: None otherwise);
    nothing for a missing, damaged or foreign file."""
    import numpy as np

    nothing: tuple[dict[str, int], None, None, None] = ({}, None, None, None)
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["version"]) != _VECTOR_FILE_VERSION or str(data["model"]) != model_id:
                return nothing
            same = "catalog" in data.files and str(data["catalog"]) == catalog
            order = data["order"].astype(np.int64) if same else None
            keys = data["keys"] if not same else None
            vectors = _mapped_member(path, data.zip, "vectors")
            if vectors is None:
                vectors = data["vectors"]
            words = None
            if "words" in data.files:
                words = (data["words"], data["word_ids"], data["word_lengths"])
    except FileNotFoundError:
        return nothing
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        # A damaged or foreign file only costs embedding the catalog again.
        logger.info("ignoring the search vector cache %s: %s", path, exc)
        return nothing
    if vectors.ndim != 2 or (keys is not None and len(keys) != vectors.shape[0]):
        return nothing
    if order is not None and (
        len(order) != tools or (len(order) and not 0 <= order.min() <= order.max() < len(vectors))
    ):
        return nothing
    word_ids = None
    if words is not None:
        names, ids, lengths = words
        if len(names) == len(lengths) and int(lengths.sum()) == len(ids):
            flat = ids.tolist()
            ends = np.cumsum(lengths).tolist()
            starts = [0, *ends[:-1]]
            word_ids = {
                str(w): tuple(flat[b:e])
                for w, b, e in zip(names.tolist(), starts, ends, strict=True)
            }
    rows = {k: i for i, k in enumerate(keys.tolist())} if keys is not None else {}
    return rows, vectors, word_ids, order


_LOCAL_HEADER = struct.Struct("<4s22xHH")
"""A zip member's local header: its signature, then (after 22 bytes) the lengths of its
name and extra field, which come before the member's data."""


def _mapped_member(path: Path, archive: zipfile.ZipFile, name: str) -> FloatMatrix | None:
    """The float32 matrix ``name`` of the ``.npz`` file at ``path``, memory-mapped where it
    lies in the file (``np.savez`` stores members uncompressed); None when it is not such a
    member (then the caller reads it the ordinary way). A mapping stays valid when a writer
    replaces the file: the writer renames a new file over it, and the mapped one lives on
    until unmapped."""
    import numpy as np

    try:
        info = archive.getinfo(f"{name}.npy")
        if info.compress_type != zipfile.ZIP_STORED:
            return None
        with path.open("rb") as file:
            file.seek(info.header_offset)
            signature, name_length, extra_length = _LOCAL_HEADER.unpack(
                file.read(_LOCAL_HEADER.size)
            )
            if signature != b"PK\x03\x04":
                return None
            start = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
            file.seek(start)
            version = np.lib.format.read_magic(file)
            if version == (1, 0):
                shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(file)
            elif version == (2, 0):
                shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(file)
            else:
                return None
            offset = file.tell()
        if dtype != np.float32 or fortran_order or len(shape) != 2:
            return None
        rows, dims = shape
        if offset - start + rows * dims * 4 > info.file_size or not rows or not dims:
            return None
        mapped: FloatMatrix = np.memmap(
            path, dtype=np.float32, mode="r", offset=offset, shape=(rows, dims)
        )
        return mapped
    except (KeyError, OSError, ValueError, struct.error):
        return None


# The similarity given to a removed tool's row: below any cosine similarity.
_NEVER_SIMILAR = -2.0


# A temporary file older than this was left by a process that died while writing; a live
# writer takes well under a second.
_STALE_TEMPORARY_S = 600.0


def _remove_stale_temporaries(path: Path) -> None:
    now = time.time()
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if now - leftover.stat().st_mtime > _STALE_TEMPORARY_S:
                leftover.unlink()


def _write_vectors(
    path: Path,
    model_id: str,
    keys: Sequence[str],
    distinct: _DistinctVectors,
    tool_rows: NDArray[np.int64],
    word_ids: Mapping[str, Sequence[int]],
    catalog: str,
) -> bool:
    """Write the vectors of the tools with definition ``keys``, tool ``i``'s being row
    ``tool_rows[i]`` of ``distinct``: one vector per distinct key. Says whether it was
    written."""
    import numpy as np

    unique: dict[str, int] = {}
    for i, key in enumerate(keys):
        unique.setdefault(key, i)
    rows = list(unique.values())
    position = {key: n for n, key in enumerate(unique)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(path)
        fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        logger.info("cannot write the search vector cache %s: %s", path, exc)
        return False
    try:
        with os.fdopen(fd, "wb") as out:
            np.savez(
                out,
                version=np.array(_VECTOR_FILE_VERSION),
                model=np.array(model_id),
                keys=np.array(list(unique), dtype="<U32"),
                vectors=distinct.at(tool_rows[rows]),
                catalog=np.array(catalog),
                order=np.fromiter((position[k] for k in keys), dtype=np.int32, count=len(keys)),
                **_word_arrays(word_ids),
            )
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp_name, path)
    except OSError as exc:
        logger.info("cannot write the search vector cache %s: %s", path, exc)
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        return False
    return True


def _word_arrays(word_ids: Mapping[str, Sequence[int]]) -> dict[str, Any]:
    """The word memory as three arrays (no pickles): words, their ids end to end, and how
    many ids each word has. Empty when the embedder keeps none."""
    import numpy as np

    words = [w for w in word_ids if len(w) <= _REMEMBERED_WORD_CHARS]
    if not words:
        return {}
    return {
        "words": np.array(words, dtype=str),
        "word_ids": np.fromiter((i for w in words for i in word_ids[w]), dtype=np.int32),
        "word_lengths": np.fromiter((len(word_ids[w]) for w in words), dtype=np.int32),
    }
