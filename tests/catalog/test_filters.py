from __future__ import annotations

import pytest

from pi_mcp_adapter.catalog import Catalog, ServerMetadata, ToolFilter, build_tool_infos
from pi_mcp_adapter.config._models import ServerEntry, Settings

METADATA = ServerMetadata(
    tools=(
        {"name": "read_file"},
        {"name": "write_file"},
        {"name": "delete_file"},
        {"name": "get-sum"},
        {"name": "list_dir"},
    ),
    resources=({"uri": "fs://readme", "name": "readme"},),
)


def names(include: list[str] | None, exclude: list[str] | None) -> list[str]:
    entry = ServerEntry(command="x", include_tools=include, exclude_tools=exclude)
    return [i.name for i in build_tool_infos("fs", METADATA, entry=entry, settings=Settings())]


@pytest.mark.parametrize(
    ("include", "exclude", "expected"),
    [
        pytest.param(
            None,
            None,
            [
                "fs_read_file",
                "fs_write_file",
                "fs_delete_file",
                "fs_get-sum",
                "fs_list_dir",
                "fs_read_readme",
            ],
            id="no-filters-keep-everything",
        ),
        pytest.param(["read_file"], None, ["fs_read_file"], id="include-by-original-name"),
        pytest.param(["fs_write_file"], None, ["fs_write_file"], id="include-by-prefixed-name"),
        pytest.param(
            ["*_file"], None, ["fs_read_file", "fs_write_file", "fs_delete_file"], id="include-glob"
        ),
        pytest.param(
            None,
            ["delete_*", "fs_write_?ile"],
            ["fs_read_file", "fs_get-sum", "fs_list_dir", "fs_read_readme"],
            id="exclude-globs",
        ),
        pytest.param(
            ["*_file"], ["delete_file"], ["fs_read_file", "fs_write_file"], id="include-exclude"
        ),
        pytest.param(["read_*"], None, ["fs_read_file", "fs_read_readme"], id="resources-filtered"),
        pytest.param(["get_sum"], None, ["fs_get-sum"], id="underscore-pattern-selects-hyphen"),
        pytest.param(
            [],
            None,
            [
                "fs_read_file",
                "fs_write_file",
                "fs_delete_file",
                "fs_get-sum",
                "fs_list_dir",
                "fs_read_readme",
            ],
            id="empty-include-keeps-everything",
        ),
        pytest.param(["READ_FILE"], None, [], id="case-sensitive"),
        pytest.param(["nothing"], None, [], id="include-matching-nothing"),
    ],
)
def test_include_and_exclude_select_tools(
    include: list[str] | None, exclude: list[str] | None, expected: list[str]
) -> None:
    assert names(include, exclude) == expected


def test_filtered_tools_never_enter_the_catalog() -> None:
    entry = ServerEntry(command="x", exclude_tools=["delete_file"])
    catalog = Catalog.build({"fs": METADATA}, {"fs": entry}, Settings())

    assert catalog.get("fs_delete_file") is None
    assert "fs_delete_file" not in [t.name for t in catalog.tools()]
    with pytest.raises(Exception, match="not found"):
        catalog.lookup("delete_file")


def test_a_filter_is_equal_to_another_with_the_same_patterns() -> None:
    assert ToolFilter(include=("a*",)) == ToolFilter(include=("a*",))
    assert ToolFilter().is_empty
    assert not ToolFilter(exclude=("x",)).is_empty
