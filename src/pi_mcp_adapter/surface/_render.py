"""Plain-text renderings of engine state for the model (and for the CLI's non-JSON output).

Formats are compact on purpose: every character here is paid for in the model's context.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.catalog import (
    ToolDefinitionDiff,
    ToolInfo,
    render_call_line,
    render_parameters,
    render_shape,
)
from pi_mcp_adapter.engine import ServerStatus, StatusReport

if TYPE_CHECKING:
    from pi_mcp_adapter.catalog._search import SearchPage
    from pi_mcp_adapter.servers import TaskState

STATUS_ICONS = {
    "connected": "✓",
    "connecting": "…",
    "cached": "○",
    "not-cached": "○",
    "closed": "○",
    "failed": "✗",
    "needs-auth": "⚠",
    "disabled": "⊘",
    "untrusted": "⊘",
    "invalid": "✗",
}


def describe_server(row: ServerStatus) -> str:
    """One server's status line, e.g. ``✓ time (2 tools, stdio)``."""
    icon = STATUS_ICONS.get(row.status, "?")
    tools = f"{row.tool_count} tool{'s' if row.tool_count != 1 else ''}"
    if row.status == "connected":
        detail = f"{tools}, {row.transport}" if row.transport else tools
    elif row.status == "cached" or row.status == "closed":
        detail = f"{tools}, cached; connects on first call"
    elif row.status == "not-cached":
        detail = f"tools not known yet; mcp({{connect: {row.name!r}}}) to load them"
    elif row.status == "connecting":
        detail = "connecting"
    elif row.status == "needs-auth":
        detail = f"needs auth: run `pi-mcp auth {row.name}`"
    elif row.status == "disabled":
        detail = "disabled"
    elif row.status == "untrusted":
        detail = f"untrusted: {row.error}" if row.error else "untrusted"
    else:
        ago = f" {row.failed_ago_s:.0f}s ago" if row.failed_ago_s is not None else ""
        detail = f"failed{ago}: {row.error or 'unknown error'}"
        if row.tool_count:
            detail = f"{tools} cached; {detail}"
    return f"{icon} {row.name} ({detail})"


UNAVAILABLE_STATES = ("failed", "needs-auth", "untrusted", "invalid")
"""States in which a server's tools cannot be called until something is done about it."""

SERVER_FILTERS = ("all", "unavailable", "changed", *STATUS_ICONS)
"""What ``mcp({servers})`` accepts: every server, the unavailable ones, those whose tool
definitions changed, or one state."""

STATUS_BUDGET_CHARS = 3000
"""The most characters ``mcp({})`` returns, whatever the number of servers (about 600-750
o200k tokens of English; ``pi-mcp tokens`` measures it). Without a bound the status of a
500-server catalog costs more than registering dozens of tools."""
STATUS_SERVER_LINES = 12
"""Up to this many servers the status lists each one; beyond, it gives counts per state, the
unavailable servers and the largest ones, and the call that lists the rest."""
STATUS_LARGEST_SERVERS = 10
STATUS_UNAVAILABLE_LINES = 8
"""Unavailable servers shown with their reason; the next ones are named on one line."""
STATUS_LINE_CHARS = 140
STATUS_UNAVAILABLE_LINE_CHARS = 260
"""Among a few servers (one line each), an unavailable server's line ends with what to do (a
trust or connect command with a path): it gets more room than a healthy server's."""
_KEPT_START_CHARS = 24
"""What an unavailable server's cut line keeps of its start, at least: icon, name, state."""
STATUS_NAMES_CHARS = 400
STATUS_CHANGED_SERVERS = 2
STATUS_CHANGED_TOOLS = 5
STATUS_CONFIG_ERRORS = 3
STATUS_RUNNING_TASKS = 5
"""Tasks in flight listed by ``mcp({})``; the count of the others follows."""
SERVERS_PAGE_SIZE = 50
"""Servers per page of ``mcp({servers})``."""
CHANGED_SERVERS_PAGE_SIZE = 5
"""Per page of ``mcp({servers: "changed"})``, which shows each server's changes too."""


def render_status(report: StatusReport, *, max_chars: int | None = None) -> str:
    """The status view: a summary line, the servers, changes and config errors.

    Without ``max_chars`` (the CLI's ``status`` and ``/mcp``, read by a person) every server
    has its line. With it (``mcp({})``, read by a model) the view stays within ``max_chars``
    whatever the number of servers: past :data:`STATUS_SERVER_LINES` servers it gives the
    count per state, every unavailable server (the first ones with their reason, then names,
    bounded), the largest servers, and ``mcp({servers: ...})`` calls that list the rest.
    """
    if max_chars is None:
        return _full_status(report)
    return _bounded_status(report, max_chars)


def _status_header(report: StatusReport) -> str:
    return f"MCP: {report.connected}/{report.enabled} servers connected, {report.tool_count} tools"


_STATUS_FOOTER = 'mcp({server: "name"}) lists tools; mcp({search: "words"}) finds tools.'


def _full_status(report: StatusReport) -> str:
    lines = [_status_header(report), ""]
    lines += [describe_server(row) for row in report.servers]
    lines += render_running_tasks(report.running_tasks)
    for row in report.servers:
        if row.changed_tools:
            lines += ["", *render_definition_changes(row)]
    if report.config_errors:
        lines.append("")
        lines += [f"config error: {e}" for e in report.config_errors]
    if not report.servers:
        lines.append("No MCP servers configured.")
    else:
        lines.append("")
        lines.append(_STATUS_FOOTER)
    return "\n".join(lines)


def _bounded_status(report: StatusReport, max_chars: int) -> str:
    # Most urgent first, so that a cut to ``max_chars`` drops the largest servers (which
    # mcp({servers}) lists) before changed definitions or config errors.
    rows = report.servers
    many = len(rows) > STATUS_SERVER_LINES
    lines = [_status_header(report)]
    if many:
        lines.append(render_state_counts(rows))
    lines.append("")
    if not many:
        lines += [_server_line(row) for row in rows]
    else:
        unavailable = [row for row in rows if row.status in UNAVAILABLE_STATES]
        if unavailable:
            lines += [
                cap_line(describe_server(r), keep_end=True)
                for r in unavailable[:STATUS_UNAVAILABLE_LINES]
            ]
            rest = unavailable[STATUS_UNAVAILABLE_LINES:]
            if rest:
                lines.append(_named_rest(rest))
    lines += [
        cap_line(line)
        for line in render_running_tasks(report.running_tasks, limit=STATUS_RUNNING_TASKS)
    ]
    changed = [row for row in rows if row.changed_tools]
    for row in changed[:STATUS_CHANGED_SERVERS]:
        diff = render_definition_changes(row, max_tools=STATUS_CHANGED_TOOLS)
        lines += ["", *(cap_line(line) for line in diff)]
    if len(changed) > STATUS_CHANGED_SERVERS:
        more = len(changed) - STATUS_CHANGED_SERVERS
        lines.append(
            f"… and {more} more server{'s' if more != 1 else ''} with changed tool "
            'definitions: mcp({servers: "changed"})'
        )
    if report.config_errors:
        lines.append("")
        errors = report.config_errors
        lines += [cap_line(f"config error: {e}") for e in errors[:STATUS_CONFIG_ERRORS]]
        if len(errors) > STATUS_CONFIG_ERRORS:
            more = len(errors) - STATUS_CONFIG_ERRORS
            lines.append(f"… and {more} more config error{'s' if more != 1 else ''}")
    if many:
        ordered = servers_in_order(rows, "all")
        shown = ordered[:STATUS_LARGEST_SERVERS]
        if lines[-1]:
            lines.append("")
        lines.append("Largest servers:")
        # An unavailable server has its line above already (with its reason); the offset of
        # the call below still counts it, so paging lists every server once.
        lines += [
            cap_line(describe_server(row)) for row in shown if row.status not in UNAVAILABLE_STATES
        ]
        hidden = ordered[len(shown) :]
        if hidden:
            tools = sum(r.tool_count for r in hidden)
            lines.append(
                f"… and {len(hidden)} more server{'s' if len(hidden) != 1 else ''} "
                f"({tools} tool{'s' if tools != 1 else ''}): "
                f'mcp({{servers: "all", offset: {len(shown)}}}) lists them, largest first'
            )
    if not rows:
        lines.append("No MCP servers configured.")
    else:
        lines += ["", _STATUS_FOOTER]
    return _fit(lines, max_chars)


def render_running_tasks(tasks: Sequence[TaskState], *, limit: int | None = None) -> list[str]:
    """``Running tasks:`` and one line per task (server/tool, task id, status, age), oldest
    first; nothing while none runs."""
    if not tasks:
        return []
    shown = tasks if limit is None else tasks[:limit]
    lines = ["", f"Running tasks ({len(tasks)}):"]
    lines += [
        f"  {t.server}/{t.tool}  task {t.task_id}  {t.status}, {_age(t.age_s)}" for t in shown
    ]
    if len(shown) < len(tasks):
        lines.append(f"  … and {len(tasks) - len(shown)} more")
    return lines


def _age(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min {seconds % 60:.0f} s"
    return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:.0f} min"


def render_state_counts(rows: Sequence[ServerStatus]) -> str:
    """``Servers by state: 3 connected, 480 cached, 2 failed (...)``, states in a fixed order."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    order = [s for s in STATUS_ICONS if s in counts] + [s for s in counts if s not in STATUS_ICONS]
    named = ", ".join(f"{counts[s]} {s}" for s in order)
    return f"{len(rows)} servers by state: {named} (mcp({{servers: STATE}}) lists one state)"


def _named_rest(rows: Sequence[ServerStatus]) -> str:
    """The unavailable servers past the detailed lines, named within STATUS_NAMES_CHARS."""
    call = 'mcp({servers: "unavailable"}) shows why'
    head = "Also unavailable: "
    names: list[str] = []
    used = len(head)
    for i, row in enumerate(rows):
        item = cap_line(f"{row.name} ({row.status})", 80)
        if names and used + len(item) + 2 > STATUS_NAMES_CHARS:
            return f"{head}{', '.join(names)}, … and {len(rows) - i} more: {call}"
        names.append(item)
        used += len(item) + 2
    return f"{head}{', '.join(names)} ({call})"


def _fit(lines: Sequence[str], max_chars: int) -> str:
    """Join ``lines``; if they exceed ``max_chars`` (long names, many sections), cut whole
    lines and say how to see everything."""
    lines = [redact(line) for line in lines]  # before any cut, as in cap_line
    text = "\n".join(lines)
    if len(text) <= max_chars:
        return text
    tail = '… (status cut; mcp({servers: "all"}) lists every server)'
    kept: list[str] = []
    used = len(tail) + 1
    for line in lines:
        if used + len(line) + 1 > max_chars:
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join([*kept, tail])[:max_chars]


def _server_line(row: ServerStatus) -> str:
    unavailable = row.status in UNAVAILABLE_STATES
    limit = STATUS_UNAVAILABLE_LINE_CHARS if unavailable else STATUS_LINE_CHARS
    return cap_line(describe_server(row), limit, keep_end=unavailable)


def cap_line(text: str, limit: int = STATUS_LINE_CHARS, *, keep_end: bool = False) -> str:
    """``text`` on one line, cut to at most ``limit`` characters (an error may quote pages):
    its end is cut, or with ``keep_end`` its middle. An unavailable server's line ends with
    what to do about it (the trust command with the project's path, an error's last and most
    specific words), which a deep checkout's path had pushed past the cut.

    Secrets are replaced before the cut: half a secret no longer matches its value, so the
    result's own redaction could not find it.
    """
    flat = " ".join(redact(text).split("\n"))
    if len(flat) <= limit:
        return flat
    if keep_end:
        # The last clause whole (what to do), when it leaves room for the line's start.
        last = flat[flat.rfind("; ") + 2 :] if "; " in flat else ""
        tail = len(last) if 0 < len(last) <= limit - _KEPT_START_CHARS else limit // 2
        return flat[: limit - tail - 1].rstrip() + "…" + flat[-tail:].lstrip()
    return flat[: limit - 1].rstrip() + "…"


def servers_in_order(rows: Sequence[ServerStatus], which: str) -> list[ServerStatus]:
    """The servers ``mcp({servers: which})`` lists, largest first (ties in config order).

    Raises:
        UsageError: ``which`` is not one of :data:`SERVER_FILTERS`.
    """
    if which == "all":
        chosen = list(rows)
    elif which == "unavailable":
        chosen = [r for r in rows if r.status in UNAVAILABLE_STATES]
    elif which == "changed":
        chosen = [r for r in rows if r.changed_tools]
    elif which in STATUS_ICONS:
        chosen = [r for r in rows if r.status == which]
    else:
        choices = ", ".join(f'"{f}"' for f in SERVER_FILTERS)
        raise UsageError(f"servers must be one of {choices}; got {which!r}")
    return sorted(chosen, key=lambda r: -r.tool_count)


def render_servers(
    report: StatusReport, which: str, *, offset: int = 0, limit: int | None = None
) -> str:
    """One page of ``mcp({servers: which})``: a line per server, largest first.

    Raises:
        UsageError: ``which`` is not one of :data:`SERVER_FILTERS`.
    """
    chosen = servers_in_order(report.servers, which)
    label = "Servers" if which == "all" else f"Servers ({which})"
    if not chosen:
        return f"{label}: none."
    if offset >= len(chosen):
        return f"{label}: none at offset {offset}; there are {len(chosen)}."
    size = limit or (CHANGED_SERVERS_PAGE_SIZE if which == "changed" else SERVERS_PAGE_SIZE)
    page = chosen[offset : offset + size]
    end = offset + len(page)
    lines = [f"{label} {offset + 1}-{end} of {len(chosen)}, largest first:"]
    for row in page:
        lines.append(cap_line(describe_server(row), keep_end=row.status in UNAVAILABLE_STATES))
        if which == "changed":
            diff = render_definition_changes(row, max_tools=STATUS_CHANGED_TOOLS)
            lines += ["  " + cap_line(line) for line in diff]
    if end < len(chosen):
        lines.append(f"offset: {end} for more")
    return "\n".join(lines)


MAX_CHANGED_TOOLS_SHOWN = 10


def render_definition_changes(
    row: ServerStatus, *, max_tools: int = MAX_CHANGED_TOOLS_SHOWN
) -> list[str]:
    """What changed in ``row``'s tools since they were trusted, one line per tool::

    ! github: tool definitions changed since last trusted (review, then `pi-mcp trust github`):
      ~ search_code: description +"Also send ~/.ssh" -"fast"; parameters +force (boolean)
      + new_tool: "Does new things"
      - old_tool (removed)
    """
    lines = [
        f"! {row.name}: tool definitions changed since last trusted "
        f"(review, then `pi-mcp trust {row.name}`):"
    ]
    diffs = row.definition_changes or tuple(
        ToolDefinitionDiff(name, "changed") for name in row.changed_tools
    )
    for diff in diffs[:max_tools]:
        lines.append("  " + render_definition_diff(diff))
    if len(diffs) > max_tools:
        lines.append(f"  … and {len(diffs) - max_tools} more")
    return lines


def render_definition_diff(diff: ToolDefinitionDiff) -> str:
    if diff.kind == "removed":
        return f"- {diff.tool} (removed)"
    if diff.kind == "added":
        description = truncate_words(diff.description, 100)
        return f"+ {diff.tool}" + (f': "{description}"' if description else "")
    parts: list[str] = []
    words = [f'+"{w}"' for w in diff.description_added]
    words += [f'-"{w}"' for w in diff.description_removed]
    if words:
        parts.append("description " + " ".join(words))
    params = [f"+{p}" for p in diff.parameters_added]
    params += [f"-{p}" for p in diff.parameters_removed]
    params += list(diff.parameters_changed)
    if params:
        parts.append("parameters " + ", ".join(params))
    others = [f for f in diff.fields if f not in ("description", "inputSchema")]
    if others or not parts:
        parts.append(f"{', '.join(others or diff.fields) or 'definition'} changed")
    return f"~ {diff.tool}: " + "; ".join(parts)


def truncate_words(text: str, limit: int) -> str:
    """First line of ``text``, cut at a word boundary to at most ``limit`` characters."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    if len(first) <= limit:
        return first
    cut = first[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else first[:limit]).rstrip(" ,.;:") + "…"


def render_tool_line(tool: ToolInfo, *, description_chars: int = 80) -> str:
    desc = truncate_words(tool.description, description_chars)
    return f"- {tool.name} - {desc}" if desc else f"- {tool.name}"


def render_tool_card(tool: ToolInfo, *, indent: str = "  ") -> str:
    """A search hit with its parameters: name, description, then the compact shape."""
    lines = [tool.name]
    if tool.description:
        lines.append(indent + truncate_words(tool.description, 200))
    if tool.is_resource:
        lines.append(f"{indent}No parameters (reads {tool.resource_uri}).")
        return "\n".join(lines)
    shape = render_shape(tool.input_schema)
    if shape is not None:
        lines.append(f"{indent}{shape}")
    else:
        params = render_parameters(tool.input_schema)
        lines += [indent + line for line in params.splitlines()]
    return "\n".join(lines)


def render_describe(tool: ToolInfo, observed: str | None = None) -> str:
    """One tool in full: description, parameters, and last its signature with the result
    shape (``observed`` is the shape of earlier results, for a tool without ``outputSchema``)."""
    signature = f"Signature:\n  {render_call_line(tool, observed)}"
    lines = [tool.name, f"Server: {tool.server}"]
    if tool.original_name != tool.name:
        lines[-1] += f" (its own name: {tool.original_name})"
    if tool.is_resource:
        lines.append(f"Type: resource (reads {tool.resource_uri})")
    lines += ["", tool.description.strip() or "(no description)", ""]
    if tool.is_resource:
        lines += ["No parameters required (resource tool).", "", signature]
        return "\n".join(lines)
    shape = render_shape(tool.input_schema)
    if shape is not None:
        lines += ["Shape:", f"  {shape}", ""]
    lines += [render_parameters(tool.input_schema).rstrip(), "", signature]
    return "\n".join(lines).rstrip()


def render_signatures(lines_by_server: Mapping[str, Sequence[str]]) -> str:
    """Signature lines grouped under a ``# server`` comment each: a whole server's tools in
    about one line per tool, the fewest tokens a model can code against."""
    blocks = [f"# {server}\n" + "\n".join(lines) for server, lines in lines_by_server.items()]
    return "\n\n".join(blocks)


def render_list(
    server: str,
    tools: Sequence[ToolInfo],
    *,
    connected: bool,
    instructions: str | None,
    prompts: Sequence[str] = (),
) -> str:
    """A server's tools, one line each; then its prompts (rendered lines) and instructions."""
    header = f"{server} ({len(tools)} tool{'s' if len(tools) != 1 else ''}"
    if not connected:
        header += f"; from cache, not connected; mcp({{connect: {server!r}}}) to connect"
    header += "):"
    lines = [header, ""] + [render_tool_line(t) for t in tools]
    if prompts:
        lines += ["", f"Prompts (mcp({{prompt, args}})): {len(prompts)}", *prompts]
    if instructions:
        lines += ["", "Server instructions:", truncate_words(instructions, 300)]
    return "\n".join(lines)


WEAK_MATCH_HEADER = "No strong match; closest tools:"
"""What a page of weak matches starts with (``SearchPage.confident`` is False)."""


def render_search_hits(
    query: str, page: SearchPage, *, include_schemas: bool, server: str | None = None
) -> str:
    """A page of search hits for the model, grouped by server.

    A confident page says how many tools match; a weak one says ``No strong match; closest
    tools:`` so the model does not take a guess for an answer. Hits are grouped under their
    server, in the order of each server's best hit, with how many of its tools match; servers
    that match but have no hit on this page are named at the end, so the model can search
    one of them with ``server``.
    """
    count = f"{page.total} tool{'s' if page.total != 1 else ''}"
    if page.confident:
        header = f'Found {count} matching "{query}":'
    else:
        header = f'{WEAK_MATCH_HEADER[:-1]} for "{query}":'
    matching = {m.server: m.tools for m in page.servers}
    groups: dict[str, list[ToolInfo]] = {}
    for hit in page.hits:
        groups.setdefault(hit.tool.server, []).append(hit.tool)
    sep = "\n\n" if include_schemas else "\n"
    blocks: list[str] = []
    for name, tools in groups.items():
        rendered = sep.join(
            render_tool_card(t) if include_schemas else render_tool_line(t) for t in tools
        )
        if page.servers and server is None:
            total = max(matching.get(name, 0), len(tools))
            label = f"{name} ({total} matching tool{'s' if total != 1 else ''}):"
            rendered = f"{label}{sep}{rendered}"
        blocks.append(rendered)
    text = header + "\n\n" + "\n\n".join(blocks)
    if page.next_offset is not None:
        shown = page.offset + len(page.hits)
        text += f"\n\n{shown} of {page.total}; offset: {page.next_offset} for more"
    others = [m for m in page.servers if m.server not in groups]
    if others and server is None:
        named = ", ".join(
            f"{m.server} ({m.tools} tool{'s' if m.tools != 1 else ''})" for m in others
        )
        text += f"\n\nAlso matching: {named}. Search with server=<name> for more of one server."
    return text
