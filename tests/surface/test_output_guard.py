from __future__ import annotations

import os
import re
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_mcp_adapter.config import Settings
from pi_mcp_adapter.engine import AudioPart, ContentPart, ImagePart, TextPart, ToolResult
from pi_mcp_adapter.surface import _output_guard
from pi_mcp_adapter.surface._output_guard import guard_output, output_guard_limits

IMAGE = ImagePart("aGVsbG8=", "image/png")


def numbered_lines(count: int, start: int = 1) -> str:
    return "\n".join(f"line {i}" for i in range(start, start + count))


def shown_text(result: ToolResult) -> str:
    """The text the model sees, without the guard's note."""
    return "\n".join(p.text for p in result.content[:-1] if isinstance(p, TextPart))


def note(result: ToolResult) -> str:
    last = result.content[-1]
    assert isinstance(last, TextPart)
    return last.text


def full_output(result: ToolResult) -> str:
    return Path(result.details["fullOutputPath"]).read_bytes().decode("utf-8")


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(ToolResult.text("small"), id="small"),
        pytest.param(ToolResult.text(numbered_lines(2000)), id="exactly-the-line-limit"),
        pytest.param(ToolResult.text("x" * 50 * 1024), id="exactly-the-byte-limit"),
        pytest.param(ToolResult.text(numbered_lines(2000) + "\n"), id="final-newline-is-no-line"),
        pytest.param(ToolResult((IMAGE,)), id="no-text"),
        pytest.param(ToolResult(()), id="nothing"),
    ],
)
def test_a_result_within_the_limits_is_returned_unchanged(result: ToolResult) -> None:
    assert guard_output(result) is result


def _within(result: ToolResult, limit_bytes: int, limit_lines: int) -> bool:
    """The whole text the model gets, note included, fits the limits."""
    text = result.text_content
    lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    return len(text.encode()) <= limit_bytes and lines <= limit_lines


def test_too_many_lines_are_cut_and_the_full_text_is_saved(tmp_path: Path) -> None:
    text = numbered_lines(5000)
    guarded = guard_output(ToolResult.text(text), spill_dir=tmp_path)
    shown_lines = guarded.details["shownLines"]
    assert 1990 <= shown_lines < 2000  # the note takes its lines from the 2000
    assert shown_text(guarded) == numbered_lines(shown_lines) + "\n"
    assert _within(guarded, 50 * 1024, 2000)
    assert full_output(guarded) == text
    assert guarded.details == {
        "truncated": True,
        "fullOutputPath": guarded.details["fullOutputPath"],
        "totalLines": 5000,
        "totalBytes": len(text.encode()),
        "shownLines": shown_lines,
        "shownBytes": len((numbered_lines(shown_lines) + "\n").encode()),
    }
    assert Path(guarded.details["fullOutputPath"]).parent == tmp_path
    assert f"lines 1-{shown_lines} of 5000" in note(guarded)
    assert f"from line {shown_lines + 1}" in note(guarded)


def test_too_many_bytes_are_cut_after_a_whole_line(tmp_path: Path) -> None:
    text = "\n".join("é" * 99 for _ in range(1000))  # 199 bytes per line with its newline
    guarded = guard_output(ToolResult.text(text), limit_bytes=2000, spill_dir=tmp_path)
    shown = shown_text(guarded)
    whole_lines = guarded.details["shownBytes"] // 199
    assert whole_lines >= 5
    assert shown == ("é" * 99 + "\n") * whole_lines
    assert _within(guarded, 2000, 2000)
    assert full_output(guarded) == text


@pytest.mark.parametrize("limit_bytes", [700, 701, 702, 1001, 4096])
def test_a_single_long_line_is_cut_between_characters(tmp_path: Path, limit_bytes: int) -> None:
    text = '{"k": "' + "日本🙂" * 2000 + '"}'  # minified JSON: one line, multi-byte characters
    guarded = guard_output(ToolResult.text(text), limit_bytes=limit_bytes, spill_dir=tmp_path)
    shown = shown_text(guarded)
    assert shown
    assert text.startswith(shown)  # a whole character, never half of one
    assert _within(guarded, limit_bytes, 2000)
    assert "line 1 of 1 is longer than the limit" in note(guarded)
    assert f"from byte {len(shown.encode()) + 1}" in note(guarded)


@pytest.mark.parametrize("limit_bytes", [1, 2, 100])
def test_a_limit_smaller_than_the_note_shows_only_the_note(
    tmp_path: Path, limit_bytes: int
) -> None:
    text = "x" * 5000
    guarded = guard_output(ToolResult.text(text), limit_bytes=limit_bytes, spill_dir=tmp_path)
    assert shown_text(guarded) == ""
    assert "showing nothing of 1 lines" in note(guarded)
    assert full_output(guarded) == text


def test_the_note_fits_inside_a_tight_line_limit(tmp_path: Path) -> None:
    guarded = guard_output(ToolResult.text(numbered_lines(50)), limit_lines=5, spill_dir=tmp_path)
    assert _within(guarded, 50 * 1024, 5)
    assert shown_text(guarded).startswith("line 1\n")


def test_non_text_parts_keep_their_place_and_later_text_is_dropped(tmp_path: Path) -> None:
    audio = AudioPart("AAAA", "audio/wav")
    parts: tuple[ContentPart, ...] = (
        TextPart(numbered_lines(30)),
        IMAGE,
        TextPart(numbered_lines(30, start=31)),
        audio,
        TextPart("tail"),
    )
    guarded = guard_output(ToolResult(parts), limit_lines=40, spill_dir=tmp_path)
    second = guarded.details["shownLines"] - 30  # the note takes a few of the 40 lines
    assert second > 0
    assert guarded.content[:-1] == (
        TextPart(numbered_lines(30)),
        IMAGE,
        TextPart(numbered_lines(second, start=31) + "\n"),
        audio,
    )
    assert full_output(guarded) == ToolResult(parts).text_content


def test_error_flag_and_details_are_kept(tmp_path: Path) -> None:
    result = ToolResult.text(numbered_lines(50), is_error=True, details={"mode": "call"})
    guarded = guard_output(result, limit_lines=10, spill_dir=tmp_path)
    assert guarded.is_error
    assert guarded.details["mode"] == "call"
    assert guarded.details["truncated"] is True


@pytest.fixture
def system_temp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh system temp dir, so files saved in the default place are cleaned up."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(_output_guard, "_default_dir", None)
    return tmp_path


def test_the_command_in_the_note_prints_the_next_lines(system_temp: Path) -> None:
    guarded = guard_output(ToolResult.text(numbered_lines(1000)), limit_lines=100)
    [command] = re.findall(r"`(sed [^`]+)`", note(guarded))
    printed = subprocess.run(command, shell=True, capture_output=True, text=True, check=True)
    assert printed.stdout.splitlines()[0] == f"line {guarded.details['shownLines'] + 1}"
    assert len(printed.stdout.splitlines()) == 200


def test_by_default_the_file_is_private_in_a_private_temp_dir(system_temp: Path) -> None:
    guarded = guard_output(ToolResult.text(numbered_lines(30)), limit_lines=10)
    path = Path(guarded.details["fullOutputPath"])
    assert path.parent.parent == system_temp
    assert path.parent.name.startswith("pi-mcp-output-")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_missing_spill_dir_is_created_private(tmp_path: Path) -> None:
    spill_dir = tmp_path / "new" / "spill"
    guarded = guard_output(ToolResult.text("a\nb\nc"), limit_lines=1, spill_dir=spill_dir)
    assert Path(guarded.details["fullOutputPath"]).parent == spill_dir
    assert stat.S_IMODE(spill_dir.stat().st_mode) == 0o700


def test_when_the_file_cannot_be_written_the_note_says_so(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    text = numbered_lines(10)
    guarded = guard_output(ToolResult.text(text), limit_lines=5, spill_dir=not_a_dir)
    assert shown_text(guarded) == "line 1\nline 2\n"
    assert guarded.details["fullOutputPath"] is None
    assert "could not be saved" in note(guarded)


def test_a_limit_of_zero_means_no_limit_of_that_kind() -> None:
    big = ToolResult.text(numbered_lines(5000))
    assert guard_output(big, limit_bytes=0, limit_lines=0) is big
    by_lines = guard_output(big, limit_bytes=0, limit_lines=10)
    assert by_lines.details["truncated"] is True
    assert numbered_lines(5000).startswith(shown_text(by_lines))
    assert len(by_lines.text_content.splitlines()) <= 10
    by_bytes = guard_output(big, limit_bytes=100, limit_lines=0)
    assert len(shown_text(by_bytes).encode()) <= 100


def test_every_process_spills_into_one_private_dir_per_user(system_temp: Path) -> None:
    first = Path(guard_output(ToolResult.text("a\nb"), limit_lines=1).details["fullOutputPath"])
    _output_guard._default_dir = None  # as a new process would start
    second = Path(guard_output(ToolResult.text("c\nd"), limit_lines=1).details["fullOutputPath"])
    assert first.parent == second.parent == system_temp / f"pi-mcp-output-{os.getuid()}"


def test_spill_files_older_than_a_day_are_removed_when_a_process_starts_using_the_dir(
    system_temp: Path,
) -> None:
    shared = system_temp / f"pi-mcp-output-{os.getuid()}"
    shared.mkdir(mode=0o700)
    old, recent = shared / "output-old.txt", shared / "output-recent.txt"
    old.write_text("old")
    recent.write_text("recent")
    two_days_ago = time.time() - 2 * 86400
    os.utime(old, (two_days_ago, two_days_ago))
    guard_output(ToolResult.text("a\nb"), limit_lines=1)
    assert not old.exists()
    assert recent.exists()


def test_a_shared_dir_others_can_read_is_not_used(system_temp: Path) -> None:
    shared = system_temp / f"pi-mcp-output-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o755)
    path = Path(guard_output(ToolResult.text("a\nb"), limit_lines=1).details["fullOutputPath"])
    assert path.parent != shared
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


_texts = st.text(st.characters(codec="utf-8"), max_size=60) | st.text("ab\n", max_size=60)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(_texts, min_size=1, max_size=4),
    with_image=st.booleans(),
    limit_bytes=st.integers(1, 80),
    limit_lines=st.integers(1, 8),
)
def test_shown_text_is_a_prefix_within_the_limits_and_the_file_holds_everything(
    tmp_path_factory: pytest.TempPathFactory,
    texts: list[str],
    with_image: bool,
    limit_bytes: int,
    limit_lines: int,
) -> None:
    parts: list[ContentPart] = [TextPart(t) for t in texts]
    if with_image:
        parts.insert(1, IMAGE)
    result = ToolResult(tuple(parts))
    spill_dir = tmp_path_factory.mktemp("spill")
    guarded = guard_output(
        result, limit_bytes=limit_bytes, limit_lines=limit_lines, spill_dir=spill_dir
    )
    if guarded is result:
        return
    full = result.text_content
    shown = shown_text(guarded)
    assert full.startswith(shown)
    assert len(shown.encode()) <= limit_bytes
    assert shown.count("\n") <= limit_lines
    assert full_output(guarded) == full
    assert (IMAGE in guarded.content) == with_image


@pytest.mark.parametrize(
    ("output_guard", "environ", "expected"),
    [
        pytest.param(True, {}, (50 * 1024, 2000), id="default"),
        pytest.param(False, {}, None, id="setting-false"),
        pytest.param(True, {"MCP_OUTPUT_GUARD": "0"}, None, id="env-0"),
        pytest.param(True, {"MCP_OUTPUT_GUARD": " OFF "}, None, id="env-off"),
        pytest.param(False, {"MCP_OUTPUT_GUARD": "1"}, (50 * 1024, 2000), id="env-1-wins"),
        pytest.param(True, {"MCP_OUTPUT_GUARD": "maybe"}, (50 * 1024, 2000), id="env-unknown"),
        pytest.param({"maxBytes": 1000, "maxLines": 0}, {}, (1000, 2000), id="object-tunes"),
        pytest.param({"maxBytes": 1000.7}, {}, (1000, 2000), id="fraction-rounded-down"),
        pytest.param({"maxLines": 0.9}, {}, (50 * 1024, 2000), id="fraction-below-one-ignored"),
        pytest.param({"maxBytes": -3.5}, {}, (50 * 1024, 2000), id="negative-fraction-ignored"),
    ],
)
def test_the_guard_honours_the_setting_and_the_environment_switch(
    output_guard: object, environ: dict[str, str], expected: tuple[int, int] | None
) -> None:
    settings_ = Settings.model_validate({"outputGuard": output_guard})
    assert output_guard_limits(settings_, environ) == expected


def test_a_fractional_limit_in_a_config_file_loads_rounded_down(tmp_path: Path) -> None:
    from pi_mcp_adapter.config import load_config

    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "mcp.json").write_text('{"settings": {"outputGuard": {"maxBytes": 1000.7}}}')
    loaded = load_config(
        agent_dir=agent_dir, project_dir=tmp_path, home=tmp_path, environ={}, exclusive=True
    )
    assert not loaded.errors
    assert output_guard_limits(loaded.settings, {}) == (1000, 2000)
