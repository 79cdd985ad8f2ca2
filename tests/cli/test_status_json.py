"""``pi-mcp status --json`` writes each server from a template instead of the generic encoder:
the text stays what ``json.dumps(..., indent=2, ensure_ascii=False)`` writes, byte for byte,
whatever the values (non-ASCII and control characters, floats, NaN, changed tools and their
diffs, an empty report)."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from pi_mcp_adapter.catalog import ToolDefinitionDiff
from pi_mcp_adapter.cli._status_output import server_json, status_json_text
from pi_mcp_adapter.cli._wording import to_camel_keys
from pi_mcp_adapter.engine import ServerStatus


def standard_text(rows: tuple[ServerStatus, ...], rest: dict[str, object]) -> str:
    document = {"servers": [to_camel_keys(dataclasses.asdict(r)) for r in rows], **rest}
    return json.dumps(document, indent=2, ensure_ascii=False, default=str)


ROWS = [
    pytest.param(ServerStatus("github", "cached", 12), id="a cached server"),
    pytest.param(
        ServerStatus(
            'zürich "db" ☃\n\t\x01',
            "failed",
            0,
            transport="stdio",
            error="exited with code 3: Fehler «x»\r\n",
            failed_ago_s=12.5,
        ),
        id="non-ASCII, quotes and control characters, a float",
    ),
    pytest.param(
        ServerStatus("flaky", "failed", 0, failed_ago_s=math.nan), id="NaN as json writes it"
    ),
    pytest.param(
        ServerStatus("slow", "failed", 0, failed_ago_s=1e-7), id="a float in exponent form"
    ),
    pytest.param(
        ServerStatus(
            "changed",
            "cached",
            3,
            lifecycle="eager",
            changed_tools=("create_issue", "delete_repo"),
            source="project",
            definition_changes=(
                ToolDefinitionDiff(
                    "create_issue",
                    "changed",
                    fields=("description",),
                    description="Creates an issue. Also reads your ~/.ssh.",
                    description_added=("Also reads your ~/.ssh.",),
                ),
                ToolDefinitionDiff("delete_repo", "added"),
            ),
        ),
        id="changed tools and their diffs",
    ),
    pytest.param(ServerStatus("off", "disabled", 0, lifecycle="keep-alive"), id="disabled"),
]


@pytest.mark.parametrize("row", ROWS)
def test_a_server_is_written_as_the_standard_encoder_writes_it(row: ServerStatus) -> None:
    rest: dict[str, object] = {"connected": 0, "configErrors": ["bad ✗"], "pool": None}

    assert status_json_text((row,), rest) == standard_text((row,), rest)
    # The object itself (compared as text: NaN equals nothing, itself included).
    assert json.dumps(server_json(row)) == json.dumps(to_camel_keys(dataclasses.asdict(row)))


def test_many_servers_of_every_kind_are_written_as_the_standard_encoder_writes_them() -> None:
    rows = tuple(row for p in ROWS for row in p.values if isinstance(row, ServerStatus)) * 3
    rest: dict[str, object] = {
        "enabled": 5,
        "tools": 15,
        "runningTasks": [{"taskId": "t-1", "startedAgoS": 0.25}],
        "projectTrust": {"mode": "ask", "files": []},
        "warmProcess": {"pid": 7, "nested": {"deep": [1, 2.5, None, True]}},
    }

    assert status_json_text(rows, rest) == standard_text(rows, rest)


@pytest.mark.parametrize(
    "rest", [pytest.param({}, id="nothing else"), pytest.param({"tools": 0}, id="a count")]
)
def test_a_report_without_servers_is_written_as_the_standard_encoder_writes_it(
    rest: dict[str, object],
) -> None:
    assert status_json_text((), rest) == standard_text((), rest)
