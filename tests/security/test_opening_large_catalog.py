"""Attacks on opening a large catalog: the configuration's fast reading, the batched read of
cached entries, and the export streamed from the store.

What is defended: a comment or trailing comma is blanked exactly where the character-by-
character scan blanks it, and text inside strings that looks like one (``"//"``, ``",]"``) is
left alone; a broken server among thousands is still named by file, line and field; a row
whose summary was forged to look valid is judged again from its entry, and a server name
that looks like SQL stays data in the batched query; an unreadable row costs that server
only; the export stays one valid JSON document byte for byte whatever the entries hold.
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata, config_hash
from pi_mcp_adapter.config import _jsonc, load_config
from pi_mcp_adapter.config._models import ServerEntry

METADATA = ServerMetadata(tools=({"name": "search", "description": "Search."},))


def slow_blank(text: str) -> str | None:
    """What the character-by-character scan blanks (``None``: it rejects the text)."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(_jsonc, "_has_jsonc_extras", lambda _text: True)
        try:
            return _jsonc.blank_jsonc(text)
        except _jsonc.JsoncSyntaxError:
            return None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"url": "https://example.test//a/*b*/", "x": ",]"}', id="lookalikes"),
        pytest.param('{"a": "\\"//", "b": [1, // c\n]}', id="escaped-quote-then-comment"),
        pytest.param('{"a": "open\n, ]}', id="raw-newline-ends-a-string"),
        pytest.param('{"a": [1,\t\r\n]}', id="trailing-comma"),
        pytest.param('\ufeff{"a": 1}', id="byte-order-mark"),
    ],
)
def test_a_comment_or_trailing_comma_is_blanked_where_the_full_scan_blanks_it(text: str) -> None:
    assert _jsonc.blank_jsonc(text) == slow_blank(text)


def test_no_mix_of_quotes_escapes_slashes_and_commas_fools_the_plain_json_shortcut() -> None:
    alphabet = ['"', "\\", "/", "*", ",", "]", "}", "[", "{", " ", "\n", "\r", "\t", "a", ":"]
    rng = random.Random(20261127)
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        try:
            fast: str | None = _jsonc.blank_jsonc(text)
        except _jsonc.JsoncSyntaxError:
            fast = None
        assert fast == slow_blank(text), repr(text)


def test_a_broken_server_among_thousands_is_named_by_file_line_and_field(tmp_path: Path) -> None:
    servers = {f"server-{s:05d}": {"command": "/bin/false", "args": [str(s)]} for s in range(3000)}
    lines = ['{"mcpServers": {']
    lines += [f"  {json.dumps(name)}: {json.dumps(body)}," for name, body in servers.items()]
    lines.append('  "broken": {"command": "/bin/false", "args": "not-a-list"}')
    lines.append("}}")
    config = tmp_path / "mcp.json"
    config.write_text("\n".join(lines), encoding="utf-8")

    loaded = load_config(
        agent_dir=tmp_path / "agent", project_dir=tmp_path, config_path=config, home=tmp_path
    )

    assert len(loaded.servers) == 3000
    (error,) = [e for e in loaded.errors if "broken" in str(e)] or loaded.invalid_servers.values()
    assert error.path == str(config)
    assert error.line == len(lines) - 1
    assert error.field is not None
    assert "args" in error.field


def forge(agent_dir: Path, server: str, **changes: object) -> None:
    """Rewrite ``server``'s row in the store behind the cache's back."""
    with sqlite3.connect(agent_dir / "mcp-cache.db") as db:
        for column, value in changes.items():
            db.execute(f"UPDATE servers SET {column} = ? WHERE name = ?", (value, server))


def test_a_summary_forged_to_look_valid_is_judged_again_from_its_entry(tmp_path: Path) -> None:
    path = tmp_path / "mcp-cache.json"
    mine, theirs = ServerEntry(command="server", args=("mine",)), ServerEntry(command="other")
    cache = MetadataCache(path)
    cache.store("srv", theirs, METADATA)
    cache.flush()
    summary = json.loads(
        sqlite3.connect(tmp_path / "mcp-cache.db")
        .execute("SELECT summary FROM servers WHERE name = 'srv'")
        .fetchone()[0]
    )
    summary["configHash"] = config_hash(mine)  # the summary claims the entry is for mine
    forge(tmp_path, "srv", summary=json.dumps(summary))

    assert MetadataCache(path).get_many({"srv": mine}) == {}


def test_a_server_name_that_looks_like_sql_is_data_in_the_batched_read(tmp_path: Path) -> None:
    path = tmp_path / "mcp-cache.json"
    hostile = "x') OR 1=1; DROP TABLE servers; --"
    entries = {name: ServerEntry(command="server", args=(name,)) for name in (hostile, "plain")}
    cache = MetadataCache(path)
    for name, entry in entries.items():
        cache.store(name, entry, METADATA)
    cache.flush()

    found = MetadataCache(path).get_many(entries)

    assert found == {hostile: METADATA, "plain": METADATA}
    assert MetadataCache(path).servers == (hostile, "plain")


def test_an_unreadable_row_costs_its_server_only(tmp_path: Path) -> None:
    path = tmp_path / "mcp-cache.json"
    entries = {f"s{i}": ServerEntry(command="server", args=(str(i),)) for i in range(5)}
    cache = MetadataCache(path)
    for name, entry in entries.items():
        cache.store(name, entry, METADATA)
    cache.flush()
    forge(tmp_path, "s2", entry='{"configHash": "truncated')

    reader = MetadataCache(path)
    found = reader.get_many(entries)

    assert set(found) == {"s0", "s1", "s3", "s4"}
    assert any("'s2'" in warning for warning in reader.warnings)


def test_the_export_stays_one_json_document_whatever_the_entries_hold(tmp_path: Path) -> None:
    path = tmp_path / "mcp-cache.json"
    hostile = ServerMetadata(
        tools=tuple(
            {"name": f"t{i}", "description": '"}},{"version":2,"servers":{"x":' + "é" * i}
            for i in range(10)
        )
    )
    cache = MetadataCache(path)
    for s in range(600):  # a few batches of the store's rows
        cache.store(f'srv "{s}"', ServerEntry(command="server", args=(str(s),)), hostile)
    cache.flush()

    written = path.read_bytes()
    document = json.loads(written)
    assert document["version"] == 1
    assert len(document["servers"]) == 600
    assert written == json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
