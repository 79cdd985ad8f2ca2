"""The semantic signal: the packaged model, the tool-vector cache and the hybrid ranking."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from catalog._counting_embedder import CountingEmbedder  # tests/ is on sys.path
from pi_mcp_adapter.catalog._metadata import ToolInfo
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_rankings import HybridRanking
from pi_mcp_adapter.catalog._search_semantic import (
    ToolVectors,
    WordLlamaEmbedder,
    semantic_available,
)

pytestmark = pytest.mark.skipif(
    not semantic_available(), reason="the semantic extra (wordllama) is not installed"
)


def tool(server: str, original: str, description: str) -> ToolInfo:
    return ToolInfo(
        name=f"{server}_{original}",
        original_name=original,
        server=server,
        description=description,
        input_schema={"type": "object", "properties": {}},
    )


CATALOG = [
    tool("music", "search_tracks", "Search the catalogue for tracks by title or artist."),
    tool("music", "get_album", "Get an album with its track list."),
    tool("podcasts", "search_episodes", "Search podcast episodes by keyword."),
    tool("files", "read_text_file", "Read the complete contents of a file as text."),
    tool("web", "fetch", "Fetches a URL from the internet and extracts its contents."),
]


def build(
    tools: Sequence[ToolInfo], cache: Path, model_id: str | None = None
) -> tuple[ToolVectors, CountingEmbedder]:
    embedder = CountingEmbedder(model_id)
    return ToolVectors(tools, embedder, cache_path=cache), embedder


def test_the_packaged_model_loads_from_its_files_without_the_network() -> None:
    # A fresh interpreter with every socket refused: loading and embedding still work, and
    # the wordllama package itself (which reconfigures logging on import) is never imported.
    script = textwrap.dedent(
        """
        import socket, sys
        def refuse(*args, **kwargs):
            raise OSError("network is off in this test")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        from pi_mcp_adapter.catalog._search_semantic import load_default_embedder
        model = load_default_embedder()
        vectors = model.embed(["find a song", "search tracks"])
        assert vectors.shape == (2, 256), vectors.shape
        assert abs(float((vectors[0] ** 2).sum()) - 1.0) < 1e-4
        assert "wordllama" not in sys.modules
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_warm_start_embeds_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "vectors.npz"
    cold, cold_embedder = build(CATALOG, cache)
    assert (cold.embedded, len(cold_embedder.texts)) == (len(CATALOG), len(CATALOG))
    assert cache.is_file()
    warm, warm_embedder = build(CATALOG, cache)
    assert (warm.embedded, warm_embedder.texts) == (0, [])
    query = ["find that song"]
    assert warm.similarities(query).tolist() == cold.similarities(query).tolist()


def test_a_changed_tool_is_the_only_one_embedded_again(tmp_path: Path) -> None:
    cache = tmp_path / "vectors.npz"
    build(CATALOG, cache)
    changed = [*CATALOG[:-1], tool("web", "fetch", "Download a web page as markdown.")]
    vectors, embedder = build(changed, cache)
    assert vectors.embedded == 1
    assert embedder.texts == ["fetch. fetch. Download a web page as markdown."]


def test_vectors_of_another_model_are_not_reused(tmp_path: Path) -> None:
    cache = tmp_path / "vectors.npz"
    build(CATALOG, cache, model_id="some-other-model")
    vectors, _ = build(CATALOG, cache)
    assert vectors.embedded == len(CATALOG)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"not a zip file at all", id="garbage"),
        pytest.param(b"PK\x03\x04truncated", id="truncated-zip"),
    ],
)
def test_a_damaged_cache_file_is_rebuilt(tmp_path: Path, content: bytes) -> None:
    cache = tmp_path / "vectors.npz"
    cache.write_bytes(content)
    vectors, _ = build(CATALOG, cache)
    assert vectors.embedded == len(CATALOG)
    again, _ = build(CATALOG, cache)
    assert again.embedded == 0


def test_a_failed_write_keeps_the_previous_file_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "vectors.npz"
    build(CATALOG[:2], cache)
    before = cache.read_bytes()

    def fail_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail_replace)
    vectors, _ = build(CATALOG, cache)  # three new tools: a rewrite is attempted and fails
    assert vectors.embedded == 3
    assert cache.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vectors.npz"]


def test_the_hybrid_ranking_knows_a_song_is_a_track() -> None:
    query = "find that song by Queen about a bicycle"
    lexical = SearchIndex(CATALOG, ranking="lexical").search(query, limit=3)
    hybrid = SearchIndex(CATALOG, ranking="hybrid").search(query, limit=3)
    assert lexical.hits[0].tool.original_name != "search_tracks"
    assert hybrid.hits[0].tool.original_name == "search_tracks"


def test_the_hybrid_ranking_answers_requests_with_no_catalog_word() -> None:
    # No word of the request occurs in the catalog: lexical has nothing, hybrid the closest
    # tools, flagged as weak.
    query = "tunes of Freddie Mercury"
    assert SearchIndex(CATALOG, ranking="lexical").search(query).hits == ()
    page = SearchIndex(CATALOG, ranking="hybrid").search(query, limit=2)
    assert not page.confident
    assert page.hits[0].tool.server == "music"


def test_hybrid_index_writes_its_vectors_to_the_given_cache(tmp_path: Path) -> None:
    cache = tmp_path / "agent" / "mcp-search-vectors.npz"
    index = SearchIndex(CATALOG, ranking="hybrid", vector_cache=cache)
    assert index.ranking == "hybrid"
    assert cache.is_file()
    ranking = HybridRanking(CATALOG, vector_cache=cache)
    assert ranking.semantic


def test_a_temporary_file_left_by_a_dead_writer_is_removed_by_the_next_one(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "vectors.npz"
    leftover = tmp_path / ".vectors.npz.abc123.tmp"
    leftover.write_bytes(b"half a file")
    recent = tmp_path / ".vectors.npz.def456.tmp"  # maybe a live writer's: kept
    recent.write_bytes(b"being written")
    hour_ago = leftover.stat().st_mtime - 3600
    os.utime(leftover, (hour_ago, hour_ago))
    build(CATALOG, cache)
    assert not leftover.exists()
    assert recent.exists()
    assert cache.is_file()


def test_a_query_in_the_catalogs_words_is_embedded_without_the_tokenizer(tmp_path: Path) -> None:
    from pi_mcp_adapter.catalog._search_semantic import (
        _LazyWordLlama,
        _wordllama_dir,
        read_packaged_model,
    )

    package_dir = _wordllama_dir()
    assert package_dir is not None
    cache = tmp_path / "vectors.npz"
    ToolVectors(CATALOG, _LazyWordLlama(package_dir), cache_path=cache)

    # A new process: the words' token ids come from the file, next to the vectors.
    fresh = _LazyWordLlama(package_dir)
    ToolVectors(CATALOG, fresh, cache_path=cache)
    queries = ["search tracks by artist", "Read a file.", "fetch the contents of a url"]
    vectors = fresh.embed(queries)
    assert fresh._model is None, "the tokenizer was read"

    reference = read_packaged_model()
    assert reference is not None
    assert (vectors == reference.embed(queries)).all()
    # A word no tool uses needs the tokenizer, and gives the tokenizer's vector.
    assert (fresh.embed(["play a song"]) == reference.embed(["play a song"])).all()
    assert fresh._model is not None


def test_an_embedder_that_forgets_its_words_embeds_as_before(tmp_path: Path) -> None:
    # After a large build the engine makes the default embedder forget what it read (its
    # words' ids, its tokenizer, the table's pages); it may do so from another thread while
    # this one is learning words.
    from pi_mcp_adapter.catalog._search_semantic import (
        _LazyWordLlama,
        _wordllama_dir,
        read_packaged_model,
    )

    package_dir = _wordllama_dir()
    assert package_dir is not None
    reference = read_packaged_model()
    assert reference is not None
    queries = ["search tracks by artist", "Read a file.", "play a song"]
    embedder = _LazyWordLlama(package_dir)
    before = embedder.embed(queries)
    embedder.forget_words()
    assert (embedder._model, embedder._table, embedder._word_ids) == (None, None, {})
    assert (embedder.embed(queries) == before).all()
    assert (before == reference.embed(queries)).all()

    class ForgettingMeanwhile(_LazyWordLlama):
        def _load(self) -> WordLlamaEmbedder:
            model = super()._load()
            self.forget_words()  # another thread, between learning and reading the ids
            return model

    words = ForgettingMeanwhile(package_dir).word_ids(["Read a file."])
    assert set(words) >= {"Read", "read", "file", "file.", "a"}
    assert words == _LazyWordLlama(package_dir).word_ids(["Read a file."])


def test_a_preloaded_tokenizer_serves_forks_without_reading_it_again() -> None:
    # The CLI's warm process preloads, then forks one child per command: a child's request in
    # words no tool uses is embedded from the tokenizer read before the fork.
    script = textwrap.dedent(
        """
        import os
        import tokenizers
        from pi_mcp_adapter.catalog import preload_default_embedder
        from pi_mcp_adapter.catalog._search_semantic import (
            load_default_embedder,
            read_packaged_model,
        )
        preload_default_embedder()
        expected = read_packaged_model().embed(["please repeat back what I typed"])
        def refuse(*args, **kwargs):
            raise OSError("the tokenizer was read again")
        tokenizers.Tokenizer.from_file = refuse
        child = os.fork()
        if child == 0:
            try:
                vectors = load_default_embedder().embed(["please repeat back what I typed"])
                os._exit(0 if (vectors == expected).all() else 3)
            except BaseException:
                os._exit(4)
        _, status = os.waitpid(child, 0)
        print(os.waitstatus_to_exitcode(status))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
