from __future__ import annotations

import re

import pytest

from pi_mcp_adapter.catalog import (
    ServerMetadata,
    build_tool_infos,
    format_tool_name,
    resource_tool_name,
    server_prefix,
)
from pi_mcp_adapter.config._models import ServerEntry, Settings

VALID_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@pytest.mark.parametrize(
    ("server", "mode", "expected"),
    [
        pytest.param("github", "server", "github", id="server-mode-keeps-the-name"),
        pytest.param("chrome-devtools", "server", "chrome-devtools", id="server-keeps-hyphens"),
        pytest.param("my.server", "server", "my_2e_server", id="server-mode-escapes-dots"),
        pytest.param("a b", "server", "a_20_b", id="server-mode-escapes-spaces"),
        pytest.param("xcodebuild-mcp", "short", "xcodebuild", id="short-strips-dash-mcp"),
        pytest.param("xcodebuild_mcp", "short", "xcodebuild", id="short-strips-underscore-mcp"),
        pytest.param("githubMCP", "short", "github", id="short-strips-mcp-any-case"),
        pytest.param("mcp", "short", "mcp", id="short-of-only-mcp-is-mcp"),
        pytest.param("-mcp", "short", "mcp", id="short-that-empties-is-mcp"),
        pytest.param("mcp-tools", "short", "mcp-tools", id="short-keeps-a-leading-mcp"),
        pytest.param("github", "none", "", id="none-mode-has-no-prefix"),
    ],
)
def test_server_prefix_follows_the_prefix_mode(server: str, mode: str, expected: str) -> None:
    assert server_prefix(server, mode) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tool", "server", "mode", "separator", "expected"),
    [
        pytest.param("search", "github", "server", "_", "github_search", id="server-prefix"),
        pytest.param("search", "github", "server", "__", "github__search", id="double-separator"),
        pytest.param("search", "github-mcp", "short", "_", "github_search", id="short-prefix"),
        pytest.param("search", "github", "none", "_", "search", id="no-prefix"),
        pytest.param("get-sum", "everything", "server", "_", "everything_get-sum", id="hyphen"),
        pytest.param("files.read", "fs", "server", "_", "fs_files_read", id="dot-to-underscore"),
        pytest.param("a/b c", "fs", "server", "_", "fs_a_b_c", id="slash-and-space"),
        pytest.param("日本", "fs", "server", "_", "fs___", id="non-ascii"),
        pytest.param("github_search", "github", "server", "_", "github_search", id="prefixed-once"),
        pytest.param("github_search", "github", "server", "__", "github_search", id="prefixed-dbl"),
        pytest.param("github_", "github", "server", "_", "github_github_", id="only-prefix"),
        pytest.param("githubsearch", "github", "server", "_", "github_githubsearch", id="no-sep"),
        pytest.param(
            "find", "jetbrains-index", "server", "__", "jetbrains_index__find", id="dbl-no-hyphen"
        ),
        pytest.param("find", "jetbrains-index", "server", "_", "jetbrains-index_find", id="hyphen"),
        pytest.param("find", "jet-brains-mcp", "short", "__", "jet_brains__find", id="short-dbl"),
    ],
)
def test_tool_names_are_prefixed_and_sanitised(
    tool: str, server: str, mode: str, separator: str, expected: str
) -> None:
    name = format_tool_name(tool, server, mode=mode, separator=separator)  # type: ignore[arg-type]
    assert name == expected
    assert VALID_NAME.match(name)


def test_names_longer_than_64_characters_are_cut_with_a_stable_hash_suffix() -> None:
    long_a = "describe_the_current_state_of_every_single_thing_in_the_world_" + "a" * 20
    long_b = "describe_the_current_state_of_every_single_thing_in_the_world_" + "b" * 20

    name_a = format_tool_name(long_a, "server")
    name_b = format_tool_name(long_b, "server")

    assert len(name_a) == len(name_b) == 64
    assert VALID_NAME.match(name_a)
    assert name_a != name_b
    assert name_a[:55] == name_b[:55] == f"server_{long_a}"[:55]
    assert re.fullmatch(r"_[0-9a-f]{8}", name_a[55:])
    assert format_tool_name(long_a, "server") == name_a


def test_a_64_character_name_is_not_cut() -> None:
    tool = "t" * (64 - len("server_"))
    assert format_tool_name(tool, "server") == f"server_{tool}"


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        pytest.param("Static Resource 1", "read_static_resource_1", id="spaces-and-case"),
        pytest.param("docs/README.md", "read_docs_readme_md", id="path-like"),
        pytest.param("__x__", "read_x", id="trimmed"),
        pytest.param("42", "read_resource_42", id="leading-digit"),
        pytest.param("!!!", "read_resource", id="nothing-left"),
    ],
)
def test_resource_tool_names_are_normalised(resource: str, expected: str) -> None:
    assert resource_tool_name(resource) == expected


METADATA = ServerMetadata(
    tools=(
        {
            "name": "search",
            "description": "Search things",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True},
        },
        {"name": "fetch", "title": "Fetch a page"},
        {"description": "a tool without a name is skipped"},
        {"name": ""},
        {"name": 42},
    ),
    resources=(
        {"uri": "demo://readme", "name": "README", "description": "The project readme"},
        {"uri": "demo://plain", "name": "plain"},
        {"name": "no uri"},
    ),
)


def test_build_tool_infos_keeps_every_field_of_a_tool() -> None:
    infos = build_tool_infos("demo", METADATA, entry=None, settings=Settings())
    search = infos[0]

    assert search.name == "demo_search"
    assert search.original_name == "search"
    assert search.server == "demo"
    assert search.description == "Search things"
    assert search.input_schema == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert search.output_schema == {"type": "object"}
    assert search.annotations == {"readOnlyHint": True}
    assert not search.is_resource


def test_a_tool_without_description_is_described_by_its_title_and_gets_an_empty_schema() -> None:
    infos = build_tool_infos("demo", METADATA, entry=None, settings=Settings())
    fetch = infos[1]

    assert fetch.description == "Fetch a page"
    assert fetch.input_schema == {"type": "object", "properties": {}}


def test_tools_without_a_usable_name_are_skipped() -> None:
    infos = build_tool_infos("demo", METADATA, entry=None, settings=Settings())
    assert [i.name for i in infos] == [
        "demo_search",
        "demo_fetch",
        "demo_read_readme",
        "demo_read_plain",
    ]


def test_resources_become_read_tools_with_their_uri_in_the_description() -> None:
    infos = build_tool_infos("demo", METADATA, entry=None, settings=Settings())
    readme, plain = infos[2], infos[3]

    assert readme.name == "demo_read_readme"
    assert readme.original_name == "read_readme"
    assert readme.resource_uri == "demo://readme"
    assert readme.is_resource
    assert readme.description == "Read resource: demo://readme - The project readme"
    assert readme.input_schema == {"type": "object", "properties": {}}
    assert plain.description == "Read resource: demo://plain"


def test_expose_resources_false_hides_resources() -> None:
    entry = ServerEntry(command="x", expose_resources=False)
    infos = build_tool_infos("demo", METADATA, entry=entry, settings=Settings())
    assert [i.name for i in infos] == ["demo_search", "demo_fetch"]


@pytest.mark.parametrize(
    ("global_mode", "server_mode", "separator", "expected"),
    [
        pytest.param("server", None, "_", "demo-mcp_search", id="global-server"),
        pytest.param("short", None, "_", "demo_search", id="global-short"),
        pytest.param("none", None, "_", "search", id="global-none"),
        pytest.param("none", "server", "_", "demo-mcp_search", id="per-server-overrides"),
        pytest.param("server", "short", "__", "demo__search", id="per-server-short-double"),
    ],
)
def test_prefix_mode_is_global_or_per_server(
    global_mode: str, server_mode: str | None, separator: str, expected: str
) -> None:
    settings = Settings(tool_prefix=global_mode, tool_separator=separator)  # type: ignore[arg-type]
    entry = ServerEntry(command="x", tool_prefix=server_mode)  # type: ignore[arg-type]
    infos = build_tool_infos("demo-mcp", METADATA, entry=entry, settings=settings)
    assert infos[0].name == expected
