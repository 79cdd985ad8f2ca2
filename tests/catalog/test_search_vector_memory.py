"""The tool vectors hold one vector per distinct definition, whatever the catalog's size.

A large catalog repeats definitions (one server configured under several names, one tool
set behind many gateways); the vectors of such a catalog are counted, not timed: the number
held must follow the distinct definitions, opened from the stored file or built, and the
similarities must be those of one vector per tool.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pi_mcp_adapter.catalog._metadata import ToolInfo
from pi_mcp_adapter.catalog._search_semantic import (
    ToolVectors,
    load_default_embedder,
    semantic_available,
)

pytestmark = pytest.mark.skipif(
    not semantic_available(), reason="the semantic extra (wordllama) is not installed"
)

DEFINITIONS = [
    ("search_tracks", "Search the catalogue for tracks by title or artist."),
    ("get_album", "Get an album with its track list."),
    ("read_text_file", "Read the complete contents of a file as text."),
    ("fetch", "Fetches a URL from the internet and extracts its contents."),
]


def copies(count: int) -> list[ToolInfo]:
    """``count`` servers offering the same tools."""
    return [
        ToolInfo(
            name=f"copy{c}_{original}",
            original_name=original,
            server=f"copy{c}",
            description=description,
        )
        for c in range(count)
        for original, description in DEFINITIONS
    ]


def vectors(tools: list[ToolInfo], cache: Path) -> ToolVectors:
    embedder = load_default_embedder()
    assert embedder is not None
    return ToolVectors(tools, embedder, cache_path=cache)


def test_a_catalog_of_repeated_definitions_holds_one_vector_per_definition(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "vectors.npz"
    small, large = copies(2), copies(200)

    built = vectors(large, cache)
    opened = vectors(large, cache)  # from the file written for exactly these tools
    other = vectors(small, tmp_path / "other.npz")

    # One vector per definition, and the zero row removed tools point at.
    for held in (built, opened, other):
        assert held.distinct_vectors == len(DEFINITIONS) + 1
    assert opened.embedded == 0
    assert len(opened) == len(large)


def test_similarities_are_those_of_one_vector_per_tool(tmp_path: Path) -> None:
    tools = copies(3)
    held = vectors(tools, tmp_path / "vectors.npz")
    query = "find a song by its artist"

    similarity = held.embed([query]).similarity(0)

    alone = [vectors([t], tmp_path / f"alone{i}.npz") for i, t in enumerate(tools)]
    expected = np.array([v.embed([query]).similarity(0)[0] for v in alone])
    assert similarity == pytest.approx(expected, abs=1e-6)
    # Every copy of a definition scores the same; the best is the track search.
    assert int(np.argmax(similarity)) % len(DEFINITIONS) == 0


def test_a_removed_copy_never_ranks_and_the_other_copies_keep_their_score(
    tmp_path: Path,
) -> None:
    tools = copies(2)
    held = vectors(tools, tmp_path / "vectors.npz")
    before = held.embed(["tracks by an artist"]).similarity(0).copy()

    held.remove([0])  # copy0's search_tracks; copy1's shares its vector
    after = held.embed(["tracks by an artist"])

    full = after.similarity(0)
    assert full[0] < -1.0
    assert full[len(DEFINITIONS)] == pytest.approx(before[len(DEFINITIONS)])
    assert after.similarity(0, [0, len(DEFINITIONS)])[0] == 0.0


def test_appended_tools_take_the_next_rows_with_their_own_vectors(tmp_path: Path) -> None:
    tools = copies(1)
    held = vectors(tools, tmp_path / "vectors.npz")
    extra = copies(2)[len(DEFINITIONS) :]

    held.append(len(tools), held.prepare(extra))

    similarity = held.embed(["read a file"]).similarity(0)
    assert len(held) == len(tools) + len(extra)
    assert similarity[len(tools) + 2] == pytest.approx(similarity[2], abs=1e-6)


def test_opening_the_stored_vectors_maps_the_file_instead_of_reading_it_whole(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "vectors.npz"
    tools = copies(3)
    built = vectors(tools, cache)

    opened = vectors(tools, cache)

    assert not built.maps_its_file  # embedded here: nothing to map
    assert opened.maps_its_file
    assert opened.embedded == 0
    query = "read a file"
    assert opened.embed([query]).similarity(0) == pytest.approx(
        built.embed([query]).similarity(0), abs=1e-6
    )


def test_a_mapped_file_replaced_by_another_writer_keeps_answering_as_it_was_opened(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "vectors.npz"
    tools = copies(2)
    vectors(tools, cache)
    opened = vectors(tools, cache)
    before = opened.embed(["fetch a web page"]).similarity(0).copy()

    # Another process's catalog: the file is written again, renamed over the mapped one.
    other = [
        ToolInfo(name=f"x_{n}", original_name=n, server="x", description=f"Something {n}.")
        for n in ("alpha", "beta", "gamma")
    ]
    vectors(other, cache)

    assert opened.embed(["fetch a web page"]).similarity(0) == pytest.approx(before)
    assert vectors(tools, cache).embedded == len(tools)  # the file is now the other one's
