"""Plain-text renderings of engine state for the model (and for the CLI's non-JSON output).

Formats are compact on purpose: every character here is paid for in the model's context.
"""

from __future__ import annotations

from collections.abc import Sequence

from pi_mcp_adapter.catalog import ToolDefinitionDiff, ToolInfo, render_parameters, render_shape
from pi_mcp_adapter.catalog._search import SearchPage
from pi_mcp_adapter.engine import ServerStatus, StatusReport

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


def render_status(report: StatusReport) -> str:
    """The status view: a summary line, one line per server, changes and config errors."""
    lines = [
        f"MCP: {report.connected}/{report.enabled} servers connected, {report.tool_count} tools",
        "",
    ]
    lines += [describe_server(row) for row in report.servers]
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
        lines.append('mcp({server: "name"}) lists tools; mcp({search: "words"}) finds tools.')
    return "\n".join(lines)


MAX_CHANGED_TOOLS_SHOWN = 10


def render_definition_changes(row: ServerStatus) -> list[str]:
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
    for diff in diffs[:MAX_CHANGED_TOOLS_SHOWN]:
        lines.append("  " + render_definition_diff(diff))
    if len(diffs) > MAX_CHANGED_TOOLS_SHOWN:
        lines.append(f"  … and {len(diffs) - MAX_CHANGED_TOOLS_SHOWN} more")
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


def render_describe(tool: ToolInfo) -> str:
    lines = [tool.name, f"Server: {tool.server}"]
    if tool.original_name != tool.name:
        lines[-1] += f" (its own name: {tool.original_name})"
    if tool.is_resource:
        lines.append(f"Type: resource (reads {tool.resource_uri})")
    lines += ["", tool.description.strip() or "(no description)", ""]
    if tool.is_resource:
        lines.append("No parameters required (resource tool).")
        return "\n".join(lines)
    shape = render_shape(tool.input_schema)
    if shape is not None:
        lines += ["Shape:", f"  {shape}", ""]
    lines.append(render_parameters(tool.input_schema))
    return "\n".join(lines).rstrip()


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
