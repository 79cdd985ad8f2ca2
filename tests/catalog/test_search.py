"""Search behaviour on small hand-built catalogs (default ranking unless a test says otherwise)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.catalog._metadata import ToolInfo
from pi_mcp_adapter.catalog._search import (
    MAX_REGEX_LENGTH,
    SearchHit,
    SearchIndex,
    ToolSearchQuery,
    parse_tool_search_query,
)
from pi_mcp_adapter.catalog._search_text import split_clauses, split_words, stem


def tool(server: str, original: str, description: str = "", **params: str) -> ToolInfo:
    schema = {
        "type": "object",
        "properties": {name: {"type": "string", "description": d} for name, d in params.items()},
    }
    return ToolInfo(
        name=f"{server}_{original}",
        original_name=original,
        server=server,
        description=description,
        input_schema=schema,
    )


CATALOG = [
    tool("github", "search_code", "Search code across repositories", query="Search terms"),
    tool("github", "get_file_contents", "Read a file from a repository", path="File path"),
    tool("github", "search_repositories", "Find repositories by name or topic"),
    tool("github", "create_issue", "Open a new issue in a repository", title="Issue title"),
    tool("chrome-devtools", "take_screenshot", "Capture an image of the current page"),
    tool("chrome-devtools", "navigate_page", "Go to a URL in the browser"),
    tool("chrome-devtools", "list_pages", "List the open browser tabs"),
    tool("slack", "post_message", "Send a message to a Slack channel", channel="Channel id"),
    tool("slack", "list_channels", "List the channels of a workspace"),
    tool("weather", "get_forecast", "Weather forecast for a city", city="City name"),
]


@pytest.fixture(scope="module")
def index() -> SearchIndex:
    return SearchIndex(CATALOG)


def names(hits: Sequence[SearchHit]) -> list[str]:
    return [h.tool.name for h in hits]


@pytest.mark.parametrize(
    ("query", "expected_first"),
    [
        pytest.param("github_search_code", "github_search_code", id="prefixed-name"),
        pytest.param("search_code", "github_search_code", id="original-name"),
        pytest.param("searchCode", "github_search_code", id="camel-case-spelling"),
        pytest.param("SEARCH-CODE", "github_search_code", id="case-and-kebab"),
        pytest.param("list pages", "chrome-devtools_list_pages", id="words-of-the-name"),
    ],
)
def test_an_exact_or_near_exact_name_comes_first(
    index: SearchIndex, query: str, expected_first: str
) -> None:
    page = index.search(query)
    assert page.confident
    assert names(page.hits)[0] == expected_first


def test_a_name_spelled_another_way_is_still_that_exact_name() -> None:
    index = SearchIndex(
        [
            tool("web", "getURLs", "Collect every link on a page", page="Page address"),
            tool("web", "get_url_status", "Whether a URL answers"),
            tool("web", "fetch_url", "Fetch one URL"),
        ]
    )
    for query in ("get_urls", "GET-URLS", "get urls", "web_getURLs"):
        page = index.search(query)
        assert page.confident, query
        assert names(page.hits)[0] == "web_getURLs", query


def test_exact_name_beats_a_tool_whose_description_repeats_the_words() -> None:
    catalog = [
        tool("a", "helper", "post message post message post message to anything"),
        tool("b", "post_message", "Deliver text"),
    ]
    page = SearchIndex(catalog).search("post_message")
    assert names(page.hits)[0] == "b_post_message"


def test_any_query_word_may_match_and_tools_matching_more_words_rank_higher(
    index: SearchIndex,
) -> None:
    page = index.search("screenshot of the browser tabs")
    found = names(page.hits)
    # Each of these matches only part of the query (OR semantics) ...
    assert {"chrome-devtools_take_screenshot", "chrome-devtools_list_pages"} <= set(found)
    # ... and the one covering "browser" and "tabs" outranks one covering "browser" alone.
    assert found.index("chrome-devtools_list_pages") < found.index("chrome-devtools_navigate_page")


def test_identifier_words_are_found_inside_camel_snake_and_kebab_names() -> None:
    catalog = [
        tool("svc", "getUserProfile", "x"),
        tool("svc", "delete-user-account", "y"),
        tool("svc", "list.audit.events", "z"),
    ]
    idx = SearchIndex(catalog)
    assert names(idx.search("profile").hits) == ["svc_getUserProfile"]
    assert names(idx.search("account").hits) == ["svc_delete-user-account"]
    assert names(idx.search("audit events").hits)[0] == "svc_list.audit.events"


def test_inflected_query_words_meet_their_stems(index: SearchIndex) -> None:
    assert names(index.search("searching repository").hits)[0] == "github_search_repositories"
    assert names(index.search("forecasts").hits) == ["weather_get_forecast"]


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        pytest.param("files", "fil", id="plural"),
        pytest.param("file", "fil", id="singular-same-stem"),
        pytest.param("queries", "query", id="ies"),
        pytest.param("matches", "match", id="es"),
        pytest.param("searching", "search", id="ing"),
        pytest.param("mapping", "map", id="doubled-consonant"),
        pytest.param("created", "creat", id="ed"),
        pytest.param("creation", "creat", id="ation"),
        pytest.param("status", "status", id="us-kept"),
        pytest.param("string", "string", id="short-stem-kept"),
        pytest.param("s3", "s3", id="digits-kept"),
    ],
)
def test_stemmer_strips_common_inflections_only(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_identifiers_split_at_case_changes_and_separators() -> None:
    assert split_words("getUserProfile HTTPServer v2.0 s3-bucket_name") == [
        "get",
        "user",
        "profile",
        "http",
        "server",
        "v2",
        "0",
        "s3",
        "bucket",
        "name",
    ]


def test_an_acronyms_plural_is_its_singular() -> None:
    assert split_words("list the URLs, IDs and APIs of listPRs; HTTPSession TODOs") == [
        "list",
        "the",
        "url",
        "id",
        "and",
        "api",
        "of",
        "list",
        "pr",
        "http",
        "session",
        "todo",
    ]


def test_a_multi_step_request_splits_into_steps() -> None:
    steps = split_clauses(
        "First find the weather in Paris, then post it to Slack, and create an issue."
    )
    assert steps == ["First find the weather in Paris", "post it to Slack", "create an issue"]


def test_a_request_for_several_things_surfaces_a_tool_for_each_in_the_top_five() -> None:
    # Six tools match the long first step richly; by score alone they fill the top five.
    crowd = [
        tool("teamchat", f"{verb}_update", f"{verb.title()} a weekly team status update message")
        for verb in ("post", "edit", "pin", "delete", "schedule", "forward")
    ]
    page = SearchIndex([*CATALOG, *crowd]).search(
        "Post the weekly team status update message to the channel thread. "
        "Then capture an image of it. Finally open an issue."
    )
    top5 = names(page.hits[:5])
    assert top5[0] == "teamchat_post_update"
    assert {"chrome-devtools_take_screenshot", "github_create_issue"} <= set(top5)


def test_synonyms_of_common_verbs_find_the_tool(index: SearchIndex) -> None:
    # "fetch" is nowhere in the catalog; "get" is in the tool's name.
    assert names(index.search("fetch forecast").hits)[0] == "weather_get_forecast"


@pytest.mark.parametrize("ranking", ["lexical", "hybrid"])
def test_nonsense_is_answered_with_the_closest_tools_flagged_as_weak(ranking: str) -> None:
    # "page" is a catalog word, the rest is not: the partial match is shown, marked weak.
    page = SearchIndex(CATALOG, ranking=ranking).search(
        "recommend a succulent drip irrigation for my garden page"
    )
    assert not page.confident
    assert "chrome-devtools_list_pages" in names(page.hits)


def test_a_query_of_unknown_words_only_gets_nothing_from_the_lexical_ranking() -> None:
    page = SearchIndex(CATALOG, ranking="lexical").search("zzyzx qwertyuiop")
    assert (page.confident, page.hits) == (False, ())


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("forecast for Zermatt", id="capitalised-name"),
        pytest.param("forecast for PMID 31452104 and arXiv 1706.03762", id="identifiers"),
        pytest.param("save the forecast to ~/reports/q3-summary.md", id="path"),
        pytest.param('forecast titled "Frobnicated Quuxes"', id="quoted"),
        pytest.param("forecast from https://frobnicate.example/zzq", id="url"),
    ],
)
def test_values_in_a_request_do_not_count_as_unknown_words(query: str) -> None:
    page = SearchIndex(CATALOG, ranking="lexical").search(query, limit=3)
    assert page.confident
    assert names(page.hits)[0] == "weather_get_forecast"


def test_plain_words_the_catalog_never_uses_make_an_answer_weak() -> None:
    page = SearchIndex(CATALOG, ranking="lexical").search(
        "forecast succulent irrigation fertiliser mulch compost hydroponic trellis"
    )
    assert not page.confident
    assert names(page.hits)[0] == "weather_get_forecast"


def test_server_filter_keeps_only_that_servers_tools(index: SearchIndex) -> None:
    page = index.search("list", server="slack")
    assert names(page.hits) == ["slack_list_channels"]
    assert page.total == 1


def test_empty_query_with_a_server_lists_its_tools_by_name(index: SearchIndex) -> None:
    page = index.search("", server="chrome-devtools")
    assert names(page.hits) == [
        "chrome-devtools_list_pages",
        "chrome-devtools_navigate_page",
        "chrome-devtools_take_screenshot",
    ]
    assert all(h.score == 0.0 for h in page.hits)
    assert page.confident


def test_empty_query_without_a_server_is_a_usage_error(index: SearchIndex) -> None:
    with pytest.raises(UsageError, match="empty"):
        index.search("   ")


def test_paging_returns_consecutive_slices_and_a_next_offset(index: SearchIndex) -> None:
    full = index.search("", server="github")
    assert full.total == 4
    first = index.search("", server="github", limit=3)
    assert (len(first.hits), first.total, first.offset, first.next_offset) == (3, 4, 0, 3)
    second = index.search("", server="github", limit=3, offset=3)
    assert (len(second.hits), second.next_offset) == (1, None)
    assert names(first.hits) + names(second.hits) == names(full.hits)
    beyond = index.search("", server="github", limit=3, offset=10)
    assert (beyond.hits, beyond.next_offset, beyond.total) == ((), None, 4)


def test_ranked_paging_matches_the_unpaged_order(index: SearchIndex) -> None:
    full = names(index.search("repository").hits)
    assert len(full) >= 3
    paged = names(index.search("repository", limit=2).hits) + names(
        index.search("repository", limit=2, offset=2).hits
    )
    assert paged == full[:4]
    assert index.search("repository", limit=2).next_offset == 2


@pytest.mark.parametrize(
    ("limit", "offset"),
    [pytest.param(0, 0, id="zero-limit"), pytest.param(5, -1, id="negative-offset")],
)
def test_bad_paging_arguments_are_usage_errors(index: SearchIndex, limit: int, offset: int) -> None:
    with pytest.raises(UsageError):
        index.search("issue", limit=limit, offset=offset)


def test_regex_matches_name_original_name_or_description_in_catalog_order(
    index: SearchIndex,
) -> None:
    page = index.search("^list_|BROWSER", regex=True)
    assert names(page.hits) == [
        "chrome-devtools_navigate_page",
        "chrome-devtools_list_pages",
        "slack_list_channels",
    ]
    assert all(h.score == 0.0 for h in page.hits)


def test_regex_respects_the_server_filter_and_paging(index: SearchIndex) -> None:
    page = index.search("repositor", regex=True, server="github", limit=2)
    assert page.total == 4
    assert page.next_offset == 2


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        pytest.param("([a-z", "Invalid regular expression", id="invalid"),
        pytest.param("a" * (MAX_REGEX_LENGTH + 1), "limit is 256", id="too-long"),
        pytest.param("(a+)+$", "exponential", id="nested-quantifier"),
    ],
)
def test_bad_regexes_raise_a_clear_usage_error(
    index: SearchIndex, pattern: str, message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        index.search(pattern, regex=True)


def test_select_returns_exact_names_in_the_order_given(index: SearchIndex) -> None:
    chosen = index.select(
        ["slack_post_message", "github_create_issue", "nope", "slack_post_message"]
    )
    assert [t.name for t in chosen] == ["slack_post_message", "github_create_issue"]


def test_select_syntax_in_a_query_selects_in_order(index: SearchIndex) -> None:
    page = index.search("select: weather_get_forecast , github_search_code")
    assert names(page.hits) == ["weather_get_forecast", "github_search_code"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("  create issue ", ToolSearchQuery(keywords="create issue"), id="keywords"),
        pytest.param("select:a_b, c_d,a_b", ToolSearchQuery(selected=("a_b", "c_d")), id="select"),
        pytest.param("SELECT:x", ToolSearchQuery(selected=("x",)), id="select-any-case"),
    ],
)
def test_tool_search_queries_parse_into_keywords_or_selections(
    text: str, expected: ToolSearchQuery
) -> None:
    assert parse_tool_search_query(text) == expected


@pytest.mark.parametrize(
    "text", [pytest.param("", id="empty"), pytest.param("select: , ", id="no-names")]
)
def test_unusable_tool_search_queries_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError):
        parse_tool_search_query(text)


def test_unknown_ranking_is_a_usage_error_naming_the_known_ones() -> None:
    with pytest.raises(UsageError, match="bm25, default, hybrid, lexical, seed004"):
        SearchIndex(CATALOG, ranking="magic")


def test_an_empty_catalog_answers_with_nothing() -> None:
    page = SearchIndex([]).search("anything")
    assert (page.hits, page.total, page.confident) == ((), 0, False)


def test_chinese_text_is_split_into_character_pairs() -> None:
    assert split_words("获取天气信息") == ["获取", "取天", "天气", "气信", "信息"]
    assert split_words("weather天气API") == ["weather", "天气", "api"]
    assert split_words("查") == ["查"]


@pytest.mark.parametrize("ranking", ["lexical", "hybrid"])
def test_a_chinese_description_is_found_by_its_chinese_words(ranking: str) -> None:
    catalog = [
        tool("weather", "get_forecast", "获取城市的天气预报"),
        tool("weather", "get_alerts", "获取地区的气象预警信息"),
        tool("maps", "geocode", "Turn an address into coordinates"),
    ]
    page = SearchIndex(catalog, ranking=ranking).search("查询北京的天气预报")
    assert page.confident
    assert names(page.hits)[0] == "weather_get_forecast"


@pytest.mark.parametrize("ranking", ["lexical", "hybrid"])
def test_a_generic_tool_that_takes_the_requests_path_beats_a_specific_namesake(
    ranking: str,
) -> None:
    catalog = [
        tool("browser", "save_as_pdf", "Print the current page to PDF", scale="Zoom factor"),
        tool(
            "filesystem",
            "write_file",
            "Create a new file or overwrite an existing one with new content",
            path="Where to write",
            content="What to write",
        ),
        tool("browser", "list_pages", "List the open pages"),
    ]
    page = SearchIndex(catalog, ranking=ranking).search("save the report to ~/notes/q3.md")
    assert names(page.hits)[0] == "filesystem_write_file"


@pytest.mark.parametrize("ranking", ["lexical", "hybrid"])
def test_a_url_in_the_request_favours_the_tool_that_takes_urls(ranking: str) -> None:
    # The browser's tools handle "the current page" and "pages" but take no URL.
    browser = [t for t in CATALOG if t.original_name != "navigate_page"]
    fetch = tool("web", "fetch", "Fetches a URL from the internet as markdown", url="URL to fetch")
    catalog = [*browser, fetch]
    page = SearchIndex(catalog, ranking=ranking).search("grab the page at https://lwn.net")
    assert names(page.hits)[0] == "web_fetch"


def test_a_page_names_the_servers_that_match_best(index: SearchIndex) -> None:
    page = index.search("list repositories and browser pages", limit=2)
    servers = [m.server for m in page.servers]
    assert set(servers) >= {"github", "chrome-devtools"}
    by_name = {m.server: m for m in page.servers}
    assert by_name["github"].tools >= 2
    assert page.servers == tuple(sorted(page.servers, key=lambda m: -m.best_score))


def test_unranked_modes_name_no_servers(index: SearchIndex) -> None:
    assert index.search("^github_", regex=True).servers == ()
    assert index.search("", server="github").servers == ()


def test_a_query_with_a_long_run_of_letters_is_answered_in_linear_time(
    index: SearchIndex,
) -> None:
    # A pasted blob made the identifier pattern backtrack quadratically (minutes per query).
    query = "a" * 200_000 + " create_issue " + "Ab" * 50_000
    started = time.process_time()
    page = index.search(query, limit=5)
    assert time.process_time() - started < 2.0
    assert "github_create_issue" in names(page.hits)
