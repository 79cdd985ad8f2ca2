"""settings.searchRanking, and the tool vectors the hybrid ranking keeps beside the cache."""

from __future__ import annotations

import pytest

from pi_mcp_adapter.catalog._search_semantic import VECTOR_CACHE_NAME, semantic_available

from .conftest import Workspace, time_entry


@pytest.mark.slow
async def test_the_lexical_setting_searches_without_the_model(workspace: Workspace) -> None:
    workspace.write_config({"time": time_entry()}, settings={"searchRanking": "lexical"})
    async with workspace.adapter() as adapter:
        await adapter.connect("time")
        assert adapter.index.ranking == "lexical"
        page = adapter.search("current time").page
        assert page.hits[0].tool.name == "time_get_current_time"
    assert not (workspace.agent_dir / VECTOR_CACHE_NAME).exists()


@pytest.mark.slow
@pytest.mark.skipif(not semantic_available(), reason="the semantic extra is not installed")
async def test_hybrid_search_caches_tool_vectors_and_a_restart_reuses_them(
    workspace: Workspace,
) -> None:
    workspace.write_config({"time": time_entry()})  # no setting: hybrid when installed
    async with workspace.adapter() as adapter:
        await adapter.connect("time")
        assert adapter.index.ranking == "hybrid"
        assert adapter.search("what time is it in Tokyo").page.confident
    vectors = workspace.agent_dir / VECTOR_CACHE_NAME
    written = vectors.stat().st_mtime_ns
    # A new engine over the cached metadata: same vectors, nothing embedded or rewritten.
    async with workspace.adapter() as restarted:
        assert restarted.index.ranking == "hybrid"
        page = restarted.search("convert 9am New York time to Berlin").page
        assert page.hits[0].tool.name == "time_convert_time"
    assert vectors.stat().st_mtime_ns == written
