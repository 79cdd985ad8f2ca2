"""How search reads a request: steps, a named server, other languages, destinations, and
words that must not count. Small hand-built catalogs; each test asserts a ranking."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pi_mcp_adapter.catalog._metadata import ToolInfo
from pi_mcp_adapter.catalog._search import SearchHit, SearchIndex
from pi_mcp_adapter.catalog._search_rankings import FieldRanking
from pi_mcp_adapter.catalog._search_text import (
    cjk_glosses,
    find_values,
    named_products,
    split_clauses,
)

RANKINGS = ["lexical", "hybrid"]


def tool(server: str, original: str, description: str = "", *params: str) -> ToolInfo:
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in params}}
    return ToolInfo(
        name=f"{server}_{original}",
        original_name=original,
        server=server,
        description=description,
        input_schema=schema,
    )


def names(hits: Sequence[SearchHit]) -> list[str]:
    return [h.tool.name for h in hits]


GIT_AND_FILES = [
    tool("git", "git_status", "Shows the working tree status", "repo_path"),
    tool("git", "git_diff_staged", "Shows changes that are staged for commit", "repo_path"),
    tool("git", "git_diff", "Shows differences between branches or commits", "repo_path"),
    tool("git", "git_diff_unstaged", "Shows changes in the working directory", "repo_path"),
    tool("git", "git_show", "Shows the contents of a commit", "repo_path", "revision"),
    tool("git", "git_log", "Shows the commit logs", "repo_path"),
    tool("git", "git_commit", "Records changes to the repository", "repo_path", "message"),
    tool("files", "read_file", "Read the complete contents of a file as text", "path"),
    tool("files", "write_file", "Create a new file or overwrite a file with content", "path"),
    tool("files", "list_directory", "List the files and directories in a path", "path"),
    tool("time", "get_current_time", "Get the current time in a timezone", "timezone"),
]


# -- steps --------------------------------------------------------------------------------


@pytest.mark.parametrize("ranking", RANKINGS)
def test_a_step_whose_words_a_first_step_tool_mentions_still_gets_its_own_tool(
    ranking: str,
) -> None:
    # git_diff_staged's description says "commit": that must not count as serving the
    # second step, whose own best tool is git_commit.
    page = SearchIndex(GIT_AND_FILES, ranking=ranking).search(
        "Show the diff of what I've staged, then commit it as 'refactor: split parser'", limit=5
    )
    top5 = names(page.hits)
    assert top5[0] == "git_git_diff_staged"
    assert "git_git_commit" in top5


def test_a_request_is_not_split_inside_a_code_block_or_a_quote() -> None:
    request = 'Run this:\n```\nx = load()\nplt.close()\n```\nthen send "Done. Thanks!" to Anna'
    assert split_clauses(request) == [
        "Run this:\n```\nx = load()\nplt.close()\n```",
        'send "Done. Thanks!" to Anna',
    ]


def test_a_path_or_url_ends_before_the_punctuation_after_it() -> None:
    assert split_clauses("Fetch https://example.com/post/42, summarise it") == [
        "Fetch https://example.com/post/42",
        "summarise it",
    ]


def test_a_condition_joins_the_step_it_conditions() -> None:
    assert split_clauses("List the datasheets. If it doesn't exist, create it.") == [
        "List the datasheets",
        "If it doesn't exist, create it",
    ]
    assert split_clauses("Find the issues. For each issue, add a label") == [
        "Find the issues",
        "For each issue, add a label",
    ]
    # A condition that holds its own step after a comma stays a step.
    assert split_clauses("Start the instance. Once it runs, tell me its ID. Then stop it") == [
        "Start the instance",
        "Once it runs, tell me its ID",
        "Then stop it",
    ]


def test_a_part_with_no_words_of_its_own_joins_its_neighbour() -> None:
    # "First" and "Thank you" ask for nothing; a line of quoted JSON belongs to its step.
    assert split_clauses("First. List the topics. Then post a summary. Thank you.") == [
        "First. List the topics",
        "Then post a summary. Thank you",
    ]
    assert split_clauses('Validate this config:\n"type": "bar"\nThen save it') == [
        'Validate this config:\n"type": "bar"',
        "save it",
    ]


def test_chinese_requests_split_at_their_sequencing_words_and_punctuation() -> None:
    assert split_clauses("读取 ~/notes.md，然后用 git 提交") == ["读取 ~/notes.md", "用 git 提交"]
    assert split_clauses("查看状态。写入文件") == ["查看状态", "写入文件"]


# -- a named server -----------------------------------------------------------------------


def test_the_word_after_use_with_on_or_via_is_offered_as_a_server_name() -> None:
    # "GitHub" is the server "github" and also "git hub" as a server's name splits it.
    assert named_products("use Slack to tell the team, then on GitHub open an issue") == [
        "slack",
        "github",
        "git",
    ]
    assert named_products("post it with the Discord bot via webhooks") == ["discord", "webhook"]
    # "in" and "to" introduce places and recipients far more often than products.
    assert named_products("the weather in Paris sent to Anna") == []


CHAT = [
    tool("discord", "send_message", "Send a message to a channel", "channel", "text"),
    tool("discord", "list_channels", "List the channels of a guild"),
    tool("chat", "send_text", "Send text to a room", "room", "text"),
    tool("chat", "rooms", "Rooms of the workspace"),
    tool("mail", "send_email", "Send an email", "to", "body"),
]


@pytest.mark.parametrize("ranking", RANKINGS)
def test_use_x_to_do_y_favours_server_x(ranking: str) -> None:
    query = "use chat to send a message"
    assert names(SearchIndex(CHAT, ranking=ranking).search(query).hits)[0] == "chat_send_text"


def test_without_the_cue_the_better_described_tool_still_wins() -> None:
    # The same words without "on": the gain comes from the cue, not the server word alone.
    page = SearchIndex(CHAT, ranking="lexical").search("send a chat message")
    assert names(page.hits)[0] == "discord_send_message"


def test_a_word_many_servers_share_names_none_of_them() -> None:
    catalog = [
        tool(f"{vendor} api", "lookup", f"Look up a {vendor} record") for vendor in "abcdefgh"
    ]
    ranking = FieldRanking(catalog)
    assert ranking._named_server_tools("use the api to look up a record") == set()
    assert ranking._named_server_tools("use the c api to look up a record") == {2}
    assert ranking._named_server_tools("on h, look up a record") == {7}


def test_a_subject_that_names_a_server_is_not_taken_for_it() -> None:
    # "knowledge" names the server "knowledge", but other servers' tools use the word too.
    catalog = [
        tool("knowledge", "search_nodes", "Search the knowledge graph"),
        tool("wiki", "search", "Search articles of knowledge"),
        tool("papers", "search", "Search papers, the sum of knowledge"),
        tool("slack", "post", "Post a message"),
    ]
    ranking = FieldRanking(catalog)
    assert ranking._named_server_tools("answer from knowledge I have") == set()
    assert ranking._named_server_tools("post it on slack") == {3}


# -- other languages ----------------------------------------------------------------------


def test_common_chinese_words_have_english_glosses() -> None:
    assert cjk_glosses("读取文件，然后发送邮件") == ["read", "file", "send", "email"]
    assert cjk_glosses("read the file") == []


@pytest.mark.parametrize("ranking", RANKINGS)
def test_a_chinese_request_finds_an_english_tool(ranking: str) -> None:
    page = SearchIndex(GIT_AND_FILES, ranking=ranking).search("读取 ~/notes/todo.md 的内容")
    assert page.confident
    assert names(page.hits)[0] == "files_read_file"


@pytest.mark.parametrize("ranking", RANKINGS)
def test_an_english_request_finds_a_chinese_description(ranking: str) -> None:
    catalog = [
        tool("tianqi", "forecast", "获取城市的天气预报", "city"),
        tool("ditu", "geocode", "把地址转换为坐标", "address"),
        tool("files", "read_file", "Read a file", "path"),
    ]
    page = SearchIndex(catalog, ranking=ranking).search("weather forecast for Beijing")
    assert names(page.hits)[0] == "tianqi_forecast"


@pytest.mark.parametrize("ranking", RANKINGS)
def test_a_chinese_multi_step_request_gets_a_tool_for_each_step(ranking: str) -> None:
    page = SearchIndex(GIT_AND_FILES, ranking=ranking).search(
        "读取 ~/notes.md，然后用 git 提交", limit=5
    )
    assert {"files_read_file", "git_git_commit"} <= set(names(page.hits))


def test_chinese_character_pairs_the_catalog_lacks_do_not_make_a_request_weak() -> None:
    # 帮我 ("help me"), 一下 ("a bit"), 内容 ("contents") are in no tool's text.
    page = SearchIndex(GIT_AND_FILES, ranking="lexical").search("帮我读取一下文件内容")
    assert page.confident
    assert names(page.hits)[0] == "files_read_file"


# -- destinations and generic file tools ----------------------------------------------------


@pytest.mark.parametrize("ranking", RANKINGS)
def test_a_path_after_to_or_into_is_where_something_is_written(ranking: str) -> None:
    index = SearchIndex(GIT_AND_FILES, ranking=ranking)
    for query in ("put the release notes into ~/notes/v2.md", "keep the summary as ./summary.txt"):
        assert names(index.search(query).hits)[0] == "files_write_file", query


@pytest.mark.parametrize("ranking", RANKINGS)
def test_a_path_to_go_to_is_not_a_destination(ranking: str) -> None:
    index = SearchIndex(GIT_AND_FILES, ranking=ranking)
    assert names(index.search("go to ~/notes and list it").hits)[0] == "files_list_directory"


FOLDERS = [
    tool("files", "read_text_file", "Read the contents of a file as text", "path"),
    tool("files", "get_file_info", "Metadata about a file: size, times", "path"),
    tool("files", "list_directory", "List the entries of a directory", "path"),
    tool("files", "create_directory", "Create a new directory", "path"),
    tool("images", "describe_image", "Describe what an image shows", "url"),
]


@pytest.mark.parametrize("ranking", RANKINGS)
def test_a_path_without_an_extension_is_a_folder(ranking: str) -> None:
    index = SearchIndex(FOLDERS, ranking=ranking)
    assert names(index.search("what's in ~/inbox?").hits)[0] == "files_list_directory"
    assert names(index.search("what's in ~/inbox/notes.md?").hits)[0] != "files_list_directory"


def test_dates_addresses_and_hashes_are_values() -> None:
    request = (
        "from 2021-03-15 to March 30th, 2021 show commit a1b2c3d9 and the owner of "
        "0x5FbDB2315678afecb367f032d93F642f64180aa3, not deadbeef, abc123 or 2021"
    )
    spans = {request[v.start : v.end]: v.kind for v in find_values(request)}
    assert spans == {
        "2021-03-15": "date",
        "March 30th, 2021": "date",
        "a1b2c3d9": "hash",
        "0x5FbDB2315678afecb367f032d93F642f64180aa3": "address",
    }


@pytest.mark.parametrize("ranking", RANKINGS)
@pytest.mark.parametrize(
    ("request_text", "description", "taking"),
    [
        ("show commit a1b2c3d", "Shows a commit", "revision"),
        ("entries from March 15, 2021 to 2021-06-30", "Lists time entries", "start_date"),
        ("who owns 0x5FbDB2315678afecb367f032d93F642f64180aa3", "Who owns it", "wallet_address"),
    ],
)
def test_of_two_tools_alike_the_one_taking_the_value_given_comes_first(
    ranking: str, request_text: str, description: str, taking: str
) -> None:
    alike = [
        tool("s", "first", description, "name"),
        tool("s", "second", description, "name", taking),
    ]
    hits = SearchIndex([*alike, *FOLDERS], ranking=ranking).search(request_text).hits
    assert names(hits)[:2] == ["s_second", "s_first"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("make a folder ~/projects/demo", "files_create_directory", id="folder"),
        pytest.param("what does this picture show", "images_describe_image", id="picture"),
    ],
)
def test_everyday_names_of_things_meet_the_catalogs_words(query: str, expected: str) -> None:
    assert names(SearchIndex(FOLDERS, ranking="lexical").search(query).hits)[0] == expected


def test_forget_asks_to_delete_and_remember_to_store() -> None:
    catalog = [
        tool("memory", "delete_entities", "Delete entities from the graph", "names"),
        tool("memory", "read_graph", "Read the whole graph"),
        tool("notes", "store_note", "Store a note", "text"),
    ]
    index = SearchIndex(catalog, ranking="lexical")
    assert names(index.search("forget everything about Bob").hits)[0] == "memory_delete_entities"
    assert names(index.search("remember that Bob likes tea").hits)[0] == "notes_store_note"


# -- words that must not count ----------------------------------------------------------------


ARITHMETIC = [
    tool("workbench", "add", "Add two integers and return the sum.", "a", "b"),
    tool("workbench", "scale", "Multiply a number", "x", "factor"),
    tool("planner", "book_flight", "Book a flight between two airports", "origin"),
]


@pytest.mark.parametrize("ranking", RANKINGS)
def test_a_one_letter_word_does_not_find_a_one_letter_parameter(ranking: str) -> None:
    index = SearchIndex(ARITHMETIC, ranking=ranking)
    assert names(index.search("plan b for the flight").hits)[:1] == ["planner_book_flight"]
    lexical = SearchIndex(ARITHMETIC, ranking="lexical")
    assert "workbench_scale" not in names(lexical.search("an x ray of the flight").hits)
    assert "workbench_add" not in names(lexical.search("plan b for the flight").hits)


def test_longer_parameter_names_are_still_searched() -> None:
    page = SearchIndex(ARITHMETIC, ranking="lexical").search("factor")
    assert names(page.hits) == ["workbench_scale"]


@pytest.mark.parametrize("ranking", RANKINGS)
def test_a_request_understood_only_through_a_synonym_is_a_weak_match(ranking: str) -> None:
    # "create" reaches add() only as a synonym; "github" and "issue" are nowhere.
    index = SearchIndex(ARITHMETIC, ranking=ranking)
    weak = index.search("create a github issue")
    assert not weak.confident
    assert names(weak.hits)[0] == "workbench_add"
    assert index.search("add 17 and 25").confident


@pytest.mark.parametrize("ranking", RANKINGS)
def test_a_word_the_catalog_lacks_is_read_through_the_words_that_begin_as_it_does(
    ranking: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "differing" is nowhere; git_diff's "differences" begins as it does.
    assert names(SearchIndex(GIT_AND_FILES, ranking=ranking).search("differing").hits)[0] == (
        "git_git_diff"
    )
    assert FieldRanking(GIT_AND_FILES)._relatives("differ") == ["differenc"]
    assert FieldRanking(GIT_AND_FILES)._relatives("diff") == []  # too short to say
    # Without that reading, the lexical ranking has nothing to go on.
    monkeypatch.setattr(FieldRanking, "relative_prefix", 99)
    assert SearchIndex(GIT_AND_FILES, ranking="lexical").search("differing").hits == ()


# -- phrases and long requests ------------------------------------------------------------

PRICES = [
    tool("market", "get_avg_price", "Get the average price of a symbol over five minutes"),
    # Both words, but not as the phrase: a price history whose average is one of its fields.
    tool("quotes", "get_price_history", "Price candles for a symbol, each with its average"),
    tool("quotes", "get_ticker", "Latest trade of a symbol"),
]


@pytest.mark.parametrize("ranking", RANKINGS)
def test_a_phrase_of_the_request_in_a_description_is_stronger_than_its_words_apart(
    ranking: str,
) -> None:
    index = SearchIndex(PRICES, ranking=ranking)
    hits = names(index.search("what is the average price of a symbol", limit=3).hits)
    assert hits[0] == "market_get_avg_price"


def test_without_the_phrase_its_words_still_count() -> None:
    index = SearchIndex(PRICES, ranking="lexical")
    hits = names(index.search("price average", limit=3).hits)
    assert set(hits[:2]) == {"market_get_avg_price", "quotes_get_price_history"}


def test_a_long_request_gives_the_semantic_signal_a_smaller_share() -> None:
    ranking = FieldRanking(PRICES)
    short = "get the average price of a symbol"
    long = " ".join(["get the average price of each symbol in my watch list"] * 6)
    assert ranking._whole_semantic_weight(short) == ranking.semantic_weight
    assert 0.0 < ranking._whole_semantic_weight(long) < ranking.semantic_weight
    longer = f"{long} {long}"
    assert ranking._whole_semantic_weight(longer) < ranking._whole_semantic_weight(long)


def test_a_stray_backtick_does_not_swallow_the_words_up_to_the_next_quote() -> None:
    request = "`Decompile the function at `0x1000` and save it as `out.c` in `/tmp/x`"
    spans = [request[v.start : v.end] for v in find_values(request)]
    assert spans == ["`0x1000`", "`out.c`", "`/tmp/x`"]


@pytest.mark.parametrize("ranking", RANKINGS)
@pytest.mark.parametrize(
    ("request_text", "meant"),
    [("merge my PR", "merge_pull_request"), ("merge the repo's branches", "merge_repository")],
)
def test_shorthand_the_catalog_lacks_reads_as_the_words_it_stands_for(
    ranking: str, request_text: str, meant: str
) -> None:
    catalog = [
        tool("git", "merge_branch", "Merge a branch into another", "branch"),
        tool("git", "merge_pull_request", "Merge a pull request", "number"),
        tool("git", "merge_repository", "Merge every branch of a repository", "name"),
        *FOLDERS,
    ]
    page = SearchIndex(catalog, ranking=ranking).search(request_text)
    assert page.hits[0].tool.original_name == meant
    assert page.confident  # shorthand is understood for certain, not through a guess


def test_shorthand_the_catalog_uses_is_read_as_it_is() -> None:
    catalog = [
        tool("git", "get_pr", "Show a PR", "number"),
        tool("git", "get_pull_request_review", "Show the review of a pull request", "number"),
        *FOLDERS,
    ]
    hits = SearchIndex(catalog, ranking="lexical").search("show PR").hits
    assert [h.tool.original_name for h in hits[:1]] == ["get_pr"]


@pytest.mark.parametrize("path", [r"C:\Users\anna\report.docx", "C:/data/x.csv", "~/notes/q3.md"])
def test_a_path_is_one_value_drive_letter_included(path: str) -> None:
    request = f"open {path} now"
    assert [(request[v.start : v.end], v.kind) for v in find_values(request)] == [(path, "path")]


WORLD_CLOCK = [
    tool(
        "time",
        "convert_time",
        "Convert time between timezones",
        "source_timezone",
        "time",
        "target_timezone",
    ),
    tool("time", "get_current_time", "Get current time in a specific timezone", "timezone"),
]


@pytest.mark.parametrize("ranking", RANKINGS)
@pytest.mark.parametrize(
    "query", ["what time is it in New York?", "what's the time in Lisbon", "when is it in Oslo"]
)
def test_a_question_asks_for_the_tool_that_gets(ranking: str, query: str) -> None:
    index = SearchIndex(WORLD_CLOCK, ranking=ranking)
    assert names(index.search(query).hits)[0] == "time_get_current_time"
    assert names(index.search("convert 9am New York time to Oslo").hits)[0] == "time_convert_time"
