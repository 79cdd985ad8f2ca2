from __future__ import annotations

import time

import pytest

from _large_catalog import counted_calls  # tests/ is on sys.path
from pi_mcp_adapter import AmbiguousToolError, ToolNotFoundError
from pi_mcp_adapter.catalog import Catalog, NameCollision, ServerMetadata, ToolInfo
from pi_mcp_adapter.config._models import ServerEntry, Settings


def meta(*tool_names: str, resources: tuple[tuple[str, str], ...] = ()) -> ServerMetadata:
    return ServerMetadata(
        tools=tuple({"name": n, "description": f"does {n}"} for n in tool_names),
        resources=tuple({"uri": uri, "name": name} for uri, name in resources),
    )


def entry(**fields: object) -> ServerEntry:
    return ServerEntry(command="x", **fields)  # type: ignore[arg-type]


@pytest.fixture
def catalog() -> Catalog:
    return Catalog.build(
        {
            "github": meta("search_code", "get_file_contents", "search_repositories", "github_me"),
            "chrome-devtools": meta("take_screenshot", "navigate_page", "list_pages"),
            "everything": meta("echo", "get-sum", resources=(("demo://doc", "Doc One"),)),
            "gitlab": meta("search_code", "create_issue"),
        },
        {name: entry() for name in ("github", "chrome-devtools", "everything", "gitlab")},
        Settings(),
    )


def test_tools_keep_server_order_then_the_servers_own_order(catalog: Catalog) -> None:
    assert catalog.servers == ("github", "chrome-devtools", "everything", "gitlab")
    assert [t.name for t in catalog.tools("everything")] == [
        "everything_echo",
        "everything_get-sum",
        "everything_read_doc_one",
    ]
    assert len(catalog) == len(catalog.tools()) == 12
    assert catalog.tools("nope") == ()


def test_get_finds_exact_names_only(catalog: Catalog) -> None:
    tool = catalog.get("github_search_code")
    assert tool is not None
    assert (tool.server, tool.original_name) == ("github", "search_code")
    assert catalog.get("GITHUB_SEARCH_CODE") is None
    assert catalog.get("search_code") is None
    assert "github_search_code" in catalog


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        pytest.param("github_search_code", "github_search_code", id="exact-prefixed-name"),
        pytest.param("take_screenshot", "chrome-devtools_take_screenshot", id="unique-original"),
        pytest.param("echo", "everything_echo", id="unique-original-short"),
        pytest.param("github__search_code", "github_search_code", id="double-separator"),
        pytest.param(
            "chrome_devtools_take_screenshot",
            "chrome-devtools_take_screenshot",
            id="underscore-for-hyphen-in-server",
        ),
        pytest.param("everything_get_sum", "everything_get-sum", id="underscore-for-hyphen"),
        pytest.param("get_sum", "everything_get-sum", id="original-with-underscore"),
        pytest.param("everything.get-sum", "everything_get-sum", id="dot-separator"),
        pytest.param("github_me", "github_me", id="self-prefixed-tool"),
        pytest.param("GitHub_Search_Code", "github_search_code", id="case-insensitive"),
        pytest.param("TAKE-SCREENSHOT", "chrome-devtools_take_screenshot", id="case-and-hyphen"),
        pytest.param("read_doc_one", "everything_read_doc_one", id="resource-tool"),
    ],
)
def test_lookup_resolves_what_a_model_types(catalog: Catalog, typed: str, expected: str) -> None:
    assert catalog.lookup(typed).name == expected


def test_lookup_restricted_to_a_server_picks_that_servers_tool(catalog: Catalog) -> None:
    assert catalog.lookup("search_code", server="gitlab").name == "gitlab_search_code"
    assert catalog.lookup("search_code", server="github").name == "github_search_code"


def test_lookup_with_a_server_that_does_not_offer_the_name_fails(catalog: Catalog) -> None:
    with pytest.raises(ToolNotFoundError, match='on server "gitlab"'):
        catalog.lookup("github_search_code", server="gitlab")
    with pytest.raises(ToolNotFoundError, match='no server "nope"'):
        catalog.lookup("echo", server="nope")


def test_an_ambiguous_original_name_fails_closed_listing_candidates(catalog: Catalog) -> None:
    with pytest.raises(AmbiguousToolError) as caught:
        catalog.lookup("search_code")

    assert caught.value.candidates == ("github_search_code", "gitlab_search_code")
    assert "github_search_code (server github)" in str(caught.value)
    assert "gitlab_search_code (server gitlab)" in str(caught.value)


@pytest.mark.parametrize(
    ("typed", "expected_first"),
    [
        pytest.param("github_serch_code", "github_search_code", id="typo-after-prefix"),
        pytest.param("screenshot", "chrome-devtools_take_screenshot", id="one-word"),
        pytest.param("navigate", "chrome-devtools_navigate_page", id="word-of-name"),
        pytest.param("getsum", "everything_get-sum", id="missing-separator"),
        pytest.param("create_issues", "gitlab_create_issue", id="plural"),
    ],
)
def test_a_miss_suggests_close_names(catalog: Catalog, typed: str, expected_first: str) -> None:
    with pytest.raises(ToolNotFoundError) as caught:
        catalog.lookup(typed)

    suggestions = caught.value.suggestions
    assert suggestions[0] == expected_first
    assert 1 <= len(suggestions) <= 5
    assert f"Did you mean: {expected_first}" in str(caught.value)


def test_suggestions_strip_the_server_prefix_first(catalog: Catalog) -> None:
    suggestions = catalog.suggest("github_search")
    assert set(suggestions[:2]) == {"github_search_code", "gitlab_search_code"}


def test_suggestions_are_limited_to_five_and_to_the_server(catalog: Catalog) -> None:
    many = Catalog.build({"s": meta(*(f"get_{n}" for n in "abcdefgh"))}, {}, Settings())
    assert len(many.suggest("get_x")) == 5
    assert catalog.suggest("search_cod", server="gitlab") == ["gitlab_search_code"]


def test_a_miss_without_anything_close_says_how_to_find_tools(catalog: Catalog) -> None:
    with pytest.raises(ToolNotFoundError) as caught:
        catalog.lookup("zzzzqqq")
    assert caught.value.suggestions == ()
    assert "Search the catalog" in str(caught.value)


def test_an_empty_catalog_finds_nothing() -> None:
    empty = Catalog()
    assert empty.tools() == ()
    with pytest.raises(ToolNotFoundError):
        empty.lookup("anything")


# ---------------------------------------------------------------------------------- collisions


def test_colliding_names_are_resolved_by_server_order_and_reported() -> None:
    settings = Settings(tool_prefix="none")
    catalog = Catalog.build(
        {"alpha": meta("search", "only_alpha"), "beta": meta("search")},
        {"alpha": entry(), "beta": entry()},
        settings,
    )
    kept = catalog.get("search")
    assert kept is not None
    assert kept.server == "alpha"

    (collision,) = catalog.collisions
    assert isinstance(collision, NameCollision)
    assert collision.name == "search"
    assert collision.kept_by == "alpha"
    assert (collision.server, collision.original_name) == ("beta", "search")
    renamed = catalog.get(collision.assigned_name)
    assert renamed is not None
    assert renamed.server == "beta"
    assert collision.assigned_name.startswith("search_")
    assert len({t.name for t in catalog.tools()}) == len(catalog.tools())


def test_collision_resolution_is_deterministic_and_follows_entry_order() -> None:
    metadata = {"alpha": meta("search"), "beta": meta("search")}
    settings = Settings(tool_prefix="none")

    first = Catalog.build(metadata, {"alpha": entry(), "beta": entry()}, settings)
    again = Catalog.build(metadata, {"alpha": entry(), "beta": entry()}, settings)
    swapped = Catalog.build(metadata, {"beta": entry(), "alpha": entry()}, settings)

    assert [t.name for t in first.tools()] == [t.name for t in again.tools()]
    assert first.collisions == again.collisions
    assert swapped.collisions[0].kept_by == "beta"
    # beta's renamed tool keeps its name no matter which other tools exist.
    assert first.collisions[0].assigned_name != swapped.collisions[0].assigned_name


def test_a_tool_colliding_with_a_prefixed_name_of_another_server_is_renamed() -> None:
    catalog = Catalog.build(
        {"a": meta("b_x"), "a_b": meta("x")}, {"a": entry(), "a_b": entry()}, Settings()
    )
    assert [c.name for c in catalog.collisions] == ["a_b_x"]
    assert {t.server for t in catalog.tools()} == {"a", "a_b"}


def test_collisions_within_one_server_are_resolved_too() -> None:
    catalog = Catalog.build({"s": meta("a.b", "a_b")}, {"s": entry()}, Settings())
    assert len(catalog.tools()) == 2
    assert [c.original_name for c in catalog.collisions] == ["a_b"]


def test_disabled_servers_are_left_out() -> None:
    catalog = Catalog.build(
        {"on": meta("a"), "off": meta("b")},
        {"on": entry(), "off": entry(disabled=True)},
        Settings(),
    )
    assert catalog.servers == ("on",)


def test_a_server_in_metadata_without_an_entry_comes_after_configured_ones() -> None:
    catalog = Catalog.build(
        {"extra": meta("a"), "configured": meta("b")}, {"configured": entry()}, Settings()
    )
    assert catalog.servers == ("configured", "extra")


def test_a_catalog_can_be_built_from_tool_infos_directly() -> None:
    catalog = Catalog([ToolInfo(name="x_a", original_name="a", server="x")], servers=["x", "empty"])
    assert catalog.servers == ("x", "empty")
    assert catalog.lookup("a").name == "x_a"


# --------------------------------------------------------------------------------- scale


def _numbered_catalog(servers: range) -> Catalog:
    metadata = {
        f"server-{s:03d}": meta(*(f"action_{t:03d}_on_thing_{s:03d}" for t in range(100)))
        for s in servers
    }
    entries = {name: entry() for name in metadata}
    return Catalog.build(metadata, entries, Settings())


@pytest.fixture(scope="module")
def big_catalog() -> Catalog:
    return _numbered_catalog(range(250))


def test_a_25000_tool_catalog_looks_names_up_as_a_500_tool_one_does(big_catalog: Catalog) -> None:
    # Counted in Python calls, not timed: a busy machine makes each call slower, not more
    # numerous.
    small = _numbered_catalog(range(121, 126))
    assert (len(small), len(big_catalog)) == (500, 25_000)
    typed = [
        "server-123_action_042_on_thing_123",  # exact
        "action_042_on_thing_123",  # original
        "server_123__action_042_on_thing_123",  # separators
        "SERVER-123_ACTION_042_ON_THING_123",  # case
    ]
    counts = []
    for catalog in (small, big_catalog):
        for name in typed:  # what each rule makes on first use is made
            catalog.lookup(name)
        with counted_calls() as calls:
            for name in typed:
                assert catalog.lookup(name).server == "server-123"
        counts.append(calls[0])
    assert counts[1] == counts[0], counts


def test_a_miss_in_a_25000_tool_catalog_still_suggests_quickly(big_catalog: Catalog) -> None:
    big_catalog.suggest("warm up the index")
    started = time.perf_counter()
    with pytest.raises(ToolNotFoundError) as caught:
        big_catalog.lookup("server-007_acton_042_on_thing_007")
    elapsed_s = time.perf_counter() - started
    assert caught.value.suggestions[0] == "server-007_action_042_on_thing_007"
    assert elapsed_s < 1.0, f"{elapsed_s:.2f} s for a miss"


@pytest.mark.parametrize(
    "typed",
    [
        pytest.param("everything_get_doc_one", id="prefixed"),
        pytest.param("get_doc_one", id="own-name"),
        pytest.param("everything__GET_doc_one", id="double-separator-any-case"),
    ],
)
def test_a_get_spelling_of_a_resource_tool_resolves_to_the_read_tool(
    catalog: Catalog, typed: str
) -> None:
    assert catalog.lookup(typed).name == "everything_read_doc_one"


def test_a_get_spelling_never_shadows_a_real_tool_or_reaches_a_non_resource() -> None:
    built = Catalog.build(
        {"docs": meta("get_readme", "read_log", resources=(("docs://readme", "readme"),))},
        {"docs": entry()},
        Settings(),
    )
    assert built.lookup("docs_get_readme").name == "docs_get_readme"
    assert built.lookup("docs_read_readme").resource_uri == "docs://readme"
    with pytest.raises(ToolNotFoundError):
        built.lookup("docs_get_log")  # read_log is a tool, not a resource


def test_with_a_double_separator_hyphens_in_server_names_become_underscores() -> None:
    built = Catalog.build(
        {"jetbrains-index": meta("find", resources=(("idx://status", "status"),))},
        {"jetbrains-index": entry()},
        Settings(tool_separator="__"),
    )
    assert [t.name for t in built.tools()] == [
        "jetbrains_index__find",
        "jetbrains_index__read_status",
    ]
    assert built.lookup("jetbrains-index_find").name == "jetbrains_index__find"
    assert built.lookup("jetbrains_index__get_status").name == "jetbrains_index__read_status"


def test_a_servers_tools_listed_apart_stay_together_and_collide_in_listing_order() -> None:
    tools = [
        ToolInfo(name="x_a", original_name="a", server="x"),
        ToolInfo(name="y_b", original_name="b", server="y"),
        ToolInfo(name="x_c", original_name="c", server="x"),
        ToolInfo(name="x_a", original_name="a", server="y"),
        ToolInfo(name="y_d", original_name="d", server="y"),
    ]
    catalog = Catalog(tools, servers=["x", "y"])
    assert [t.name for t in catalog.tools("x")] == ["x_a", "x_c"]
    assert [t.original_name for t in catalog.tools("y")] == ["b", "a", "d"]
    assert [t.server for t in catalog.tools()] == ["x", "y", "x", "y", "y"]
    (collision,) = catalog.collisions
    assert (collision.name, collision.kept_by, collision.server) == ("x_a", "x", "y")
    assert catalog.get("x_a") is tools[0]
    assert catalog.get(collision.assigned_name) == ToolInfo(
        name=collision.assigned_name, original_name="a", server="y"
    )
    assert len(catalog) == 5
