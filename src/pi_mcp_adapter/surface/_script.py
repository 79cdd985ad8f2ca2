"""The ``mcp_script`` tool: one Python script that calls many tools, in a sandbox.

Multi-call work through ``mcp`` costs one model turn per call, and every intermediate result
passes through the model's context. A script does the chaining itself and only its result
comes back. Inside a script (the sandbox of :mod:`._sandbox`) three host functions exist:

- ``await call(name, args)``: a catalog tool, through the engine's one call pipeline
  (readiness, argument checks, definition-change block, approval, statistics, trace). It
  returns what the ``mcp`` proxy shows, each text parsed when it is JSON (structured content
  when it carries more than the text); a failure raises an exception whose message says what
  went wrong, with the right parameters or result shape when the script got them wrong.
- ``await search(words, server=None, limit=None)``: ranked tools, as a list of dicts.
- ``await describe(name)``: a tool's description, its ``signature`` (its parameters as a
  Python ``TypedDict``, notes as comments) and what a call ``returns``.

The person is asked about a tool that needs approval once per script, not once per call. The
value of the last expression (or of a variable named ``result``) is the tool's result, shown
after what the script printed and cut by the output guard like any result.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from pi_mcp_adapter._errors import McpAdapterError
from pi_mcp_adapter._secrets import redact_data
from pi_mcp_adapter.catalog import (
    one_line,
    render_call_line,
    render_result_type,
    render_signature,
    value_shape,
)
from pi_mcp_adapter.config import Settings
from pi_mcp_adapter.config._validate import json_type
from pi_mcp_adapter.engine import (
    ApprovalScope,
    McpAdapter,
    TextPart,
    ToolDefinition,
    ToolResult,
)
from pi_mcp_adapter.engine._telemetry import script_span

from ._calls import render_outcome
from ._guard import guard_execute
from ._output_guard import guard_output, output_guard_limits
from ._proxy import observed_shape
from ._sandbox import (
    Charge,
    HostFunction,
    ScriptLimits,
    ScriptRun,
    ValueNotShown,
    json_size,
    plain,
    run_sandboxed,
    sandbox_available,
)

__all__ = [
    "SCRIPT_TOOL_NAME",
    "ScriptTool",
    "ToolCallFailed",
    "render_signature",
    "script_enabled",
]

SCRIPT_TOOL_NAME = "mcp_script"

# Paid for on every request of every conversation, like the proxy's description, so every
# token here is read many times: what a model needs to write a correct script the first time
# (how to find tools and their signatures, what a call returns, that a wrong guess fails with
# the right shape), and no more. The test suite holds the definition under 150 o200k tokens.
SCRIPT_DESCRIPTION = (
    "Run Python that calls MCP tools, in one turn: only its prints and last expression come "
    "back. await search('words') -> [{name, signature: 'name(params) -> result'}]; "
    "await call(name, {args}) -> result as mcp shows it, JSON parsed; failures raise, a wrong "
    "argument or key with the right shape; await describe(name) for notes. Python subset: "
    "json, re, math, datetime, asyncio.gather; no files, network or imports."
)

SCRIPT_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {"code": {"type": "string"}},
    "required": ["code"],
}


def script_enabled(settings: Settings) -> bool:
    """``settings.scriptMode``, which defaults to on when the sandbox is installed."""
    if settings.script_mode is None:
        return sandbox_available()
    return settings.script_mode


class ToolCallFailed(Exception):
    """A tool called from a script failed; the script sees it as ``Exception(message)``."""


class ScriptTool:
    """Runs scripts for one adapter and renders their ends as tool results."""

    def __init__(self, adapter: McpAdapter, *, limits: ScriptLimits | None = None) -> None:
        self._adapter = adapter
        self.limits = limits or ScriptLimits()

    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=SCRIPT_TOOL_NAME,
            description=SCRIPT_DESCRIPTION,
            parameters=SCRIPT_PARAMETERS,
            execute=guard_execute(SCRIPT_TOOL_NAME, self.execute),
        )

    async def execute(self, params: object) -> ToolResult:
        if not isinstance(params, Mapping):
            return _usage_error(f"expected an object, got {json_type(params)}")
        code = params.get("code")
        if not isinstance(code, str) or not code.strip():
            got = "nothing" if code is None else json_type(code)
            return _usage_error(f'"code" must be the script\'s Python source, got {got}')
        return self.render(await self.run(code))

    async def run(
        self,
        code: str,
        *,
        on_print: Callable[[str], None] | None = None,
        limits: ScriptLimits | None = None,
    ) -> ScriptRun:
        """Run ``code`` with ``call``, ``search`` and ``describe`` bound to this adapter.

        The tools the code names (``call("server_tool", ...)``) that need approval are asked
        about before it runs: the person reads the script and answers once per tool, and a
        client that can only be asked before anything runs (a 2026-07-28 client of the
        gateway) gets every question at once. A tool named some other way is asked about at
        its first call."""
        scope = ApprovalScope(script=code)
        # One span for the run: its approvals, searches and calls are its children.
        with script_span():
            await self._adapter.ask_approvals(named_tools(code), scope=scope)
            functions = _ScriptFunctions(self._adapter, scope)
            bound = {"call": functions.call, "search": functions.search}
            run = await run_sandboxed(
                code,
                {**bound, "describe": functions.describe},
                limits=limits or self.limits,
                on_print=on_print,
            )
        return _with_shapes(run, functions.shapes)

    def render(self, run: ScriptRun) -> ToolResult:
        """The result a model reads: what the script printed, then its value or its error."""
        return render_script_run(self._adapter.settings, run)


_NAMED_CALL = re.compile(r"""\bcall\(\s*(["'])([^"'\\\n]+)\1""")


def named_tools(code: str) -> list[str]:
    """The tool names ``code`` passes to ``call`` as string literals, in order, once each."""
    return list(dict.fromkeys(match.group(2) for match in _NAMED_CALL.finditer(code)))


def render_script_run(settings: Settings, run: ScriptRun) -> ToolResult:
    """``run`` as a tool result: what the script printed, then its value or its error.

    The output guard cuts what was printed first, so the value or the error after it stays
    in view however much the script printed; a value too long on its own is cut in turn.
    """
    if run.ok:
        tail = render_value(run.value) if run.value is not None or not run.output else ""
    else:
        stats = f"{run.calls} call{'s' if run.calls != 1 else ''}"
        if run.budget is not None:
            tail = f"Script stopped: {run.error}. It had made {stats}."
        elif run.error_kind == "unavailable":
            tail = run.error
        else:
            tail = f"Script failed: {run.error}. It had made {stats}."
    details: dict[str, Any] = {
        "mode": "script",
        "calls": run.calls,
        "bytesMoved": run.bytes_moved,
        "durationMs": round(run.duration_ms, 1),
    }
    if not run.ok:
        details["error"] = run.error_kind
        if run.budget is not None:
            details["budget"] = run.budget
    limits = output_guard_limits(settings)
    parts: list[TextPart] = []
    output = run.output.rstrip("\n")
    if output:
        printed = ToolResult.text(output)
        if limits is not None and tail:
            room_bytes = max(1, limits[0] - len(tail.encode("utf-8", "replace")) - 1)
            room_lines = max(1, limits[1] - tail.count("\n") - 1)
            printed = guard_output(printed, limit_bytes=room_bytes, limit_lines=room_lines)
            details.update({k: v for k, v in printed.details.items() if k != "mode"})
        parts += [p for p in printed.content if isinstance(p, TextPart)]
    if tail or not parts:
        parts.append(TextPart(tail))
    text = "\n".join(p.text for p in parts)
    result = ToolResult.text(text, is_error=not run.ok, details=details)
    if limits is not None:
        result = guard_output(result, limit_bytes=limits[0], limit_lines=limits[1])
    return result


def render_value(value: Any) -> str:
    """A script's value as text: a string as it is, anything else as JSON."""
    if value is None:
        return "(no result)"
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _usage_error(message: str) -> ToolResult:
    return ToolResult.text(
        f"Invalid parameters: {message}. Pass {{code: '...'}}.",
        is_error=True,
        details={"mode": "script", "error": "usage"},
    )


class _ScriptFunctions:
    """``call``, ``search`` and ``describe`` for one script run."""

    def __init__(self, adapter: McpAdapter, approvals: ApprovalScope) -> None:
        self._adapter = adapter
        self._approvals = approvals
        self.shapes: dict[str, str] = {}
        """The shape (types and keys, no values) of what each tool's last call returned."""

    def call(self, charge: Charge) -> HostFunction:
        adapter = self._adapter

        # Positional only, so a tool parameter may be called ``name`` or ``tool`` as a keyword.
        async def call(*positional: Any, **kwargs: Any) -> Any:
            if not 1 <= len(positional) <= 2:
                raise TypeError("call(tool, args): give the tool's name and one dict of arguments")
            name, args = positional[0], (positional[1] if len(positional) == 2 else None)
            if not isinstance(name, str) or not name:
                raise TypeError("call(tool, args): tool must be a tool name (a string)")
            if args is None:
                args = kwargs
            elif kwargs:
                raise TypeError("call(tool, args): pass the arguments as one dict, or as keywords")
            if not isinstance(args, Mapping):
                raise TypeError(f"call({name!r}, args): args must be a dict, got {json_type(args)}")
            # Tuples, sets and dates a script builds become what JSON can carry.
            try:
                arguments = {str(k): plain(v) for k, v in args.items()}
            except ValueNotShown as exc:
                raise TypeError(
                    f"call({name!r}, args): the arguments cannot be sent: {exc}"
                ) from None
            charge.bytes(json_size(arguments), f"call({name!r})")
            outcome = await adapter.call(name, arguments, approval_scope=self._approvals)
            result = render_outcome(adapter, outcome) if outcome.error_kind else None
            if result is not None:
                raise ToolCallFailed(result.text_content)
            # Redacted before the script sees it: a script could otherwise reshape a secret
            # (reverse, encode) past the redaction of the result the model reads.
            value, error = _call_value(outcome.result)
            value = redact_data(value)
            charge.bytes(json_size(value), f"the result of {name}")
            if error:
                raise ToolCallFailed(f"{name} reported an error: {value}")
            self.shapes[name] = value_shape(value)
            return value

        return call

    def search(self, charge: Charge) -> HostFunction:
        adapter = self._adapter

        async def search(
            words: Any = None, server: Any = None, limit: Any = None, regex: Any = False
        ) -> Any:
            if not isinstance(words, str):
                raise TypeError("search(words): words must be a string")
            if server is not None and not isinstance(server, str):
                raise TypeError("search(words, server=...): server must be a string")
            if limit is not None and (not isinstance(limit, int) or limit < 1):
                raise TypeError("search(words, limit=...): limit must be a positive integer")
            await adapter.ready_to_search()
            try:
                results = adapter.search(words, server=server, limit=limit, regex=bool(regex))
            except McpAdapterError as exc:
                raise ToolCallFailed(str(exc)) from None
            hits = [
                {
                    "name": hit.tool.name,
                    "server": hit.tool.server,
                    "description": one_line(hit.tool.description, 200),
                    # Enough to call the tool in the same script, without a describe().
                    "signature": render_call_line(hit.tool, observed_shape(adapter, hit.tool)),
                    "score": round(hit.score, 3),
                }
                for hit in results.page.hits
            ]
            charge.bytes(json_size(hits), f"search({words!r})")
            return hits

        return search

    def describe(self, charge: Charge) -> HostFunction:
        adapter = self._adapter

        async def describe(name: Any = None) -> Any:
            if not isinstance(name, str) or not name:
                raise TypeError("describe(tool): tool must be a tool name (a string)")
            await adapter.ready()
            try:
                tool = adapter.lookup_explained(name)
            except McpAdapterError as exc:
                raise ToolCallFailed(str(exc)) from None
            # The signature carries the parameters (types, required keys, defaults, notes):
            # the JSON schema beside it would double what a script that prints it costs.
            described = {
                "name": tool.name,
                "server": tool.server,
                "description": tool.description,
                "signature": render_signature(tool, observed_shape(adapter, tool)),
                "returns": render_result_type(tool, observed_shape(adapter, tool)),
            }
            charge.bytes(json_size(described), f"describe({name!r})")
            return described

        return describe


_SHAPE_ERRORS = ("TypeError:", "KeyError:", "AttributeError:", "IndexError:")


def _with_shapes(run: ScriptRun, shapes: Mapping[str, str]) -> ScriptRun:
    """``run``, its error followed by what each tool returned when the script failed on a
    value's shape (indexing a text as a dict, a missing key): the next script gets it right
    without another call to look."""
    if run.error_kind != "error" or not shapes or not run.error.startswith(_SHAPE_ERRORS):
        return run
    returned = "; ".join(f"{name} -> {shape}" for name, shape in shapes.items())
    return replace(run, error=f"{run.error}. The calls returned: {returned}")


def _call_value(result: Any) -> tuple[Any, bool]:
    """What a script gets for a server's answer, and whether the server reported an error.

    One rule for every server: what the ``mcp`` proxy shows, each text block parsed when it is
    JSON (several blocks are a list). The proxy's conversion is reused, so an image is the
    same note, an embedded resource the same ``[Resource: <uri>]`` and text, a blob the same
    saved file, and structured content alone the same JSON. Structured content beside text
    replaces it only when it carries more than the text: a tool whose text is a summary and
    whose data is structured. Content that just wraps the text (``{"result": text}`` from SDK
    servers, ``{"content": text}`` from server-filesystem) is the text, as the proxy shows it.
    """
    import mcp_types

    from ._content import EMPTY_RESULT_TEXT, convert_call_result, convert_read_resource_result

    if isinstance(result, mcp_types.ReadResourceResult):
        converted = convert_read_resource_result(result)
        structured: Any = None
    else:
        converted = convert_call_result(result, accepts_images=False)
        structured = None if result.is_error or not result.content else result.structured_content
    if not converted.details and texts_of(converted) == [EMPTY_RESULT_TEXT]:
        return None, converted.is_error  # the proxy's "(empty result)" is nothing to a script
    value = _texts_value(texts_of(converted))
    if structured is not None and isinstance(value, str) and not _wraps(structured, value):
        return structured, False
    return value, converted.is_error


def texts_of(result: ToolResult) -> list[str]:
    return [p.text for p in result.content if isinstance(p, TextPart)]


def _wraps(structured: Any, text: str) -> bool:
    """Whether ``structured`` is only ``text`` under one key."""
    if not isinstance(structured, Mapping) or len(structured) != 1:
        return False
    (inner,) = structured.values()
    return isinstance(inner, str) and inner.strip() == text.strip()


def _texts_value(texts: list[str]) -> Any:
    values = [_json_or_text(t) for t in texts]
    if len(values) == 1:
        return values[0]
    return values


def _json_or_text(text: str) -> Any:
    stripped = text.strip()
    if stripped[:1] in ("{", "[") or stripped in ("true", "false", "null"):
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError):
            return text
    return text
