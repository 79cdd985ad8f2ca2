"""Commands that run the engine: status, tools, search, describe, call, connect, reconnect,
tokens and demo.

Each command touches only the servers it needs: ``status`` connects nothing; ``search``,
``describe`` and ``tools`` answer from the metadata cache and connect only servers that have
never been listed (the first run), in parallel under :data:`BOOTSTRAP_DEADLINE_S`; ``call``
connects the called tool's server. A server that failed recently, in this run or an earlier
one, is skipped at once until its backoff ends (``pi-mcp reconnect`` retries now).

SIGINT, SIGTERM and SIGHUP close every server before the command exits (130, 143, 129).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer

from ._app import (
    EXIT_FAILED,
    EXIT_USAGE,
    CliContext,
    JsonOption,
    ToolArgsArgument,
    ToolNameArgument,
    app,
    fail,
    get_context,
    only_error,
    print_error,
    print_json,
    print_warning,
    report_config_problems,
    require_known_server,
)
from ._terminal import inert_on_terminal, write_control
from ._wording import cli_wording, to_camel_keys

if TYPE_CHECKING:
    from pi_mcp_adapter._shared_state import SharedState
    from pi_mcp_adapter.config import LoadedConfig
    from pi_mcp_adapter.config._trust import ProjectTrust
    from pi_mcp_adapter.engine import McpAdapter, SearchResults, StatusReport, ToolResult
    from pi_mcp_adapter.surface._arguments import ArgumentPairs

T = TypeVar("T")

BOOTSTRAP_DEADLINE_S = 10.0
"""How long a command waits, in all, for servers that were never listed before (the first
run). A server whose ``startupTimeoutMs`` is longer and that is still starting then is
reported as still starting, with nothing held against it (the next command, or
``pi-mcp connect NAME``, which waits its whole start-up time, starts it afresh); one whose
start-up time is over failed and backs off."""


class _Progress:
    """Collects the outcome of connects at start; failures are reported once, at the end."""

    def __init__(self, *, live: bool) -> None:
        self._live = live
        self.failed: dict[str, str] = {}
        self.still_starting: dict[str, str] = {}
        self.concerns: Callable[[str], bool] = lambda _server: True
        """Whether a server's failure matters to the command: ``describe`` of one server's
        tool is not told, run after run, about another server that failed an hour ago."""

    def __call__(self, server: str, phase: str, detail: str | None) -> None:
        if phase == "failed":
            self.failed[server] = (detail or "unknown error").splitlines()[0]
        elif phase == "still-starting":
            self.still_starting[server] = (detail or "still starting").splitlines()[0]
        elif phase == "connecting" and self._live:
            write_control(sys.stderr, f"connecting {inert_on_terminal(server)}…\r")
            sys.stderr.flush()

    def report(self) -> None:
        if self._live:
            write_control(sys.stderr, "\x1b[2K")
        starting = sorted(name for name in self.still_starting if self.concerns(name))
        if starting:
            lines = [f"{len(starting)} server(s) still starting, not listed yet:"]
            lines += [f"  {name}: {cli_wording(self.still_starting[name])}" for name in starting]
            lines.append(
                f"Run the command again, or `pi-mcp connect {starting[0]}` to wait for its "
                "whole start-up time."
            )
            print_warning("\n".join(lines))
        names = sorted(name for name in self.failed if self.concerns(name))
        if not names:
            return
        lines = [f"could not list the tools of {len(names)} server(s):"]
        lines += [f"  {name}: {cli_wording(self.failed[name])}" for name in names]
        lines.append(
            f"Retry one with `pi-mcp connect {names[0]}`, or every server with `pi-mcp reconnect`."
        )
        print_warning("\n".join(lines))


def _report_warnings(adapter: McpAdapter, shown: set[str]) -> None:
    for message in adapter.cache.warnings:
        if message not in shown:
            shown.add(message)
            print_warning(message)


def create_adapter(
    cli: CliContext,
    *,
    connect_missing: bool,
    quiet: bool,
    ask_trust: bool = True,
    config_environ: Mapping[str, str] | None = None,
) -> tuple[McpAdapter, _Progress]:
    """The adapter a command works with; config problems are reported once, here.

    With ``ask_trust`` (commands that may start servers), untrusted project files are put to
    the person at a terminal first, before anything of them can run. ``config_environ``: the
    environment the configuration is loaded with, when not the command's own.
    """
    from pi_mcp_adapter.engine import McpAdapter

    from ._ask import ask_on_terminal
    from ._elicit import elicit_on_terminal
    from ._project_trust import ask_project_trust

    def load() -> LoadedConfig:
        return cli.load_config(environ=config_environ)

    config = load()
    if ask_trust and ask_project_trust(config, agent_dir=cli.agent_dir, environ=cli.environ):
        config = load()
    progress = _Progress(live=sys.stderr.isatty() and not quiet)
    adapter = McpAdapter(
        config=config,
        config_loader=load,
        agent_dir=cli.agent_dir,
        project_dir=cli.project_dir,
        config_path=cli.config_path,
        connect_missing=connect_missing,
        connect_eager=False,
        start_deadline_s=BOOTSTRAP_DEADLINE_S,
        on_progress=progress,
        environ=cli.environ,
        ask=ask_on_terminal,
        elicit=elicit_on_terminal,
    )
    report_config_problems(adapter.config)
    return adapter, progress


@asynccontextmanager
async def open_adapter(adapter: McpAdapter, progress: _Progress) -> AsyncIterator[McpAdapter]:
    shown: set[str] = set()
    try:
        await adapter.start()
    finally:
        progress.report()
        _report_warnings(adapter, shown)
    try:
        yield adapter
    finally:
        await adapter.stop()
        _report_warnings(adapter, shown)


def run(
    ctx: typer.Context,
    body: Callable[[McpAdapter], Awaitable[T]],
    *,
    connect_missing: bool = True,
    quiet: bool = False,
    prepared: tuple[McpAdapter, _Progress] | None = None,
    ask_trust: bool = True,
) -> T:
    """Run ``body`` with a started adapter; signals and errors end the command cleanly."""
    import anyio

    from pi_mcp_adapter._errors import McpAdapterError, UsageError
    from pi_mcp_adapter._signals import stop_on_signal

    cli = get_context(ctx)
    received: list[signal.Signals] = []
    outcome: list[T] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            body_scope = anyio.CancelScope()
            body_running = False

            def stop() -> None:
                if body_running:
                    # Only the body: the call unwinds while its server's connection still
                    # lives, so a task it started is cancelled on the server (tasks/cancel);
                    # the adapter then stops as on any exit.
                    body_scope.cancel()
                else:
                    tg.cancel_scope.cancel()

            await tg.start(stop_on_signal, stop, received)
            async with open_adapter(*started) as ready:
                with body_scope:
                    body_running = True
                    try:
                        outcome.append(await body(ready))
                    finally:
                        body_running = False
            tg.cancel_scope.cancel()

    try:
        started = prepared or create_adapter(
            cli, connect_missing=connect_missing, quiet=quiet, ask_trust=ask_trust
        )
        try:
            anyio.run(main)
        except BaseExceptionGroup as group:
            # The signal watcher's task group wraps what the body raised; unwrap a lone error.
            raise only_error(group) from None
    except UsageError as exc:
        raise fail(cli_wording(str(exc)), code=EXIT_USAGE) from None
    except McpAdapterError as exc:
        raise fail(cli_wording(str(exc))) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    if received or not outcome:
        # 128 + the signal's number, as the shell reports a process the signal ended.
        raise typer.Exit(128 + (received[0] if received else signal.SIGINT))
    return outcome[0]


def run_from_cache(
    ctx: typer.Context,
    body: Callable[[McpAdapter], T],
    *,
    quiet: bool,
    concerns: Callable[[McpAdapter, str], bool] | None = None,
    config_environ: Mapping[str, str] | None = None,
    after_cached: Callable[[McpAdapter], object] | None = None,
) -> T:
    """Run ``body``, a read-only use of the catalog, from the metadata cache when it has every
    server it could list: no event loop, no manager, nothing connected (the common case, and
    the one that must answer in a blink). Otherwise as :func:`run`, listing what is missing.

    ``concerns(adapter, server)`` says whether ``server`` failing matters to this command
    (default: every server does); failures of the others are not reported.
    ``config_environ``: as :func:`create_adapter`'s. ``after_cached`` is called once ``body``
    ran from the cache alone."""
    from pi_mcp_adapter._errors import McpAdapterError, UsageError

    adapter, progress = create_adapter(
        get_context(ctx), connect_missing=True, quiet=quiet, config_environ=config_environ
    )
    if concerns is not None:
        progress.concerns = lambda server: concerns(adapter, server)
    try:
        adapter.load_cached()
        if not _servers_to_list(adapter, progress):
            result = body(adapter)
            _report_warnings(adapter, set())
            if after_cached is not None:
                after_cached(adapter)
            return result
    except UsageError as exc:
        raise fail(cli_wording(str(exc)), code=EXIT_USAGE) from None
    except McpAdapterError as exc:
        raise fail(cli_wording(str(exc))) from None

    async def in_loop(started: McpAdapter) -> T:
        return body(started)

    return run(ctx, in_loop, quiet=quiet, prepared=(adapter, progress))


def _servers_to_list(adapter: McpAdapter, progress: _Progress) -> list[str]:
    """Enabled servers missing from the cache that are not backing off after a failure."""
    import time

    missing = adapter.servers_not_cached()
    wanted = []
    for name in missing:
        waiting = adapter.backing_off(name)
        if waiting is None:
            wanted.append(name)
            continue
        record, remaining_s = waiting
        ago_s = max(0.0, time.time() - record.failed_at)
        progress(
            name,
            "failed",
            f"last failed {ago_s:.0f} s ago ({record.reason}); retried "
            f"automatically after {remaining_s:.0f} s",
        )
    if missing and not wanted:
        progress.report()
    return wanted


def result_json(result: ToolResult) -> dict[str, Any]:
    from pi_mcp_adapter.engine import AudioPart, ImagePart, TextPart

    content: list[dict[str, Any]] = []
    for part in result.content:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart | AudioPart):
            content.append({"type": part.type, "mimeType": part.mime_type, "data": part.data})
    return {"isError": result.is_error, "content": content, "details": dict(result.details)}


def result_text(result: ToolResult) -> str:
    from pi_mcp_adapter.engine import TextPart

    lines = []
    for part in result.content:
        if isinstance(part, TextPart):
            lines.append(part.text.rstrip("\n"))
        else:
            lines.append(f"[{part.type}: {part.mime_type}, {len(part.data)} base64 chars]")
    return "\n".join(lines) + "\n"


def emit_result(result: ToolResult, *, as_json: bool, wording: bool = True) -> None:
    """Print a result: JSON on stdout, or its text (on stderr when it is an error, exit 1)."""
    if as_json:
        print_json(result_json(result))
    elif result.is_error:
        print_error(cli_wording(result.text_content) if wording else result.text_content)
    else:
        text = result_text(result)
        sys.stdout.write(cli_wording(text) if wording else text)
    if result.is_error:
        raise typer.Exit(EXIT_FAILED)


def _shared_state_json(shared: SharedState | None) -> dict[str, object]:
    if shared is None:
        return {}
    shared.ping()
    state = shared.status()
    return {
        "sharedState": {
            "url": state.url,
            "reachable": state.reachable,
            "pendingWrites": state.pending_writes,
            "error": state.error,
            # persistent | volatile (loses everything on restart) | unknown | None (unreachable)
            "persistence": state.persistence,
        }
    }


@app.command(short_help="Each server's state; connects nothing.")
def status(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Each server's state and tool count (from the cache; connects nothing)."""
    from pi_mcp_adapter._errors import McpAdapterError, UsageError

    cli = get_context(ctx)
    try:
        # Taken before the configuration is loaded, if it is: facts are kept only when the
        # files are the same after the load.
        files_before = _config_files_digest(cli)
        kept = _status_from_kept_facts(cli, files_before, as_json=as_json)
        if kept == "shown":
            return
        # Status runs nothing, so it shows `untrusted` rather than asking. The load notes the
        # variables it reads, for the facts kept for the next status.
        from pi_mcp_adapter.config import RecordingEnviron
        from pi_mcp_adapter.engine import keep_status_facts, status_facts

        recording = RecordingEnviron(cli.environ)
        adapter, _progress = create_adapter(
            cli, connect_missing=False, quiet=as_json, ask_trust=False, config_environ=recording
        )
        facts, keepable = status_facts(adapter, recording)
        # From the files alone: no event loop, no manager, and no catalog (each server's
        # count is in the cache's summary of it, a failed connect in the failures file).
        view = adapter.cached_status(facts)
        _show_status(
            view,
            as_json=as_json,
            agent_dir=adapter.agent_dir,
            trust=adapter.config.project_trust,
            shared=adapter.shared_state,
        )
        _report_warnings(adapter, set())

        def key_of(names: Sequence[str]) -> str | None:
            from pi_mcp_adapter.config import inputs_digest

            files = _config_files_digest(cli)  # changed while loading: nothing is kept
            return inputs_digest(files, cli.environ, names) if files == files_before else None

        if keepable and kept != "current":
            keep_status_facts(adapter.agent_dir, facts, sorted(recording.read), key_of)
    except UsageError as exc:
        raise fail(cli_wording(str(exc)), code=EXIT_USAGE) from None
    except McpAdapterError as exc:
        raise fail(cli_wording(str(exc))) from None


def _config_files_digest(cli: CliContext) -> str:
    """:func:`~pi_mcp_adapter.config.files_digest` of the configuration the command loads."""
    from pi_mcp_adapter._warm import install_identity
    from pi_mcp_adapter.config import files_digest

    return files_digest(
        agent_dir=cli.agent_dir,
        project_dir=cli.project_dir,
        config_path=cli.config_path,
        home=None,
        environ=cli.environ,
        exclusive=None,
        code=install_identity(),
    )


def _status_from_kept_facts(
    cli: CliContext, files: str, *, as_json: bool
) -> Literal["shown", "current", "none"]:
    """Show the status from the facts the last status kept, when the configuration is still
    the one they were made from (``files``: its files' digest now; see
    ``engine/_status_facts.py``): ``shown``; ``current`` when they are, but a server's status
    needs its entry; ``none`` when there are none."""
    from pi_mcp_adapter.config import inputs_digest
    from pi_mcp_adapter.engine import kept_cached_status

    environ = cli.environ
    # As create_adapter's adapter: it relays elicitation to the terminal, not sampling.
    kept = kept_cached_status(
        cli.agent_dir, key_of=lambda names: inputs_digest(files, environ, names), relay=True
    )
    if kept is None:
        return "none"
    if kept.report is None:
        return "current"
    _report_kept_config_problems(environ, kept.facts.errors, kept.facts.warnings)
    _show_status(
        kept.report,
        as_json=as_json,
        agent_dir=cli.agent_dir,
        trust=kept.facts.project_trust,
        shared=None,
    )
    for message in kept.cache_warnings:
        print_warning(message)
    return "shown"


def _show_status(
    view: StatusReport,
    *,
    as_json: bool,
    agent_dir: Path,
    trust: ProjectTrust,
    shared: SharedState | None,
) -> None:
    from pi_mcp_adapter.surface._render import render_status

    from ._pool_cmds import (
        current_pool,
        describe_pool,
        describe_warm_process,
        pool_json,
        pool_tasks,
        warm_process,
    )
    from ._project_trust import project_trust_json
    from ._status_output import status_json_text

    pool = current_pool(agent_dir)
    # Calls made through the pool run their tasks there; this process shows them too.
    view = replace(view, running_tasks=view.running_tasks + pool_tasks(pool))
    if as_json:
        # Written by its own encoder: one object per server, 5.5 MB at 19,641 servers.
        rest = {
            "connected": view.connected,
            "enabled": view.enabled,
            "tools": view.tool_count,
            "configErrors": list(view.config_errors),
            "runningTasks": [to_camel_keys(asdict(t)) for t in view.running_tasks],
            "projectTrust": project_trust_json(trust),
            "pool": pool_json(pool),
            "warmProcess": warm_process(agent_dir),
            **_shared_state_json(shared),
        }
        sys.stdout.write(status_json_text(view.servers, rest) + "\n")
        sys.stdout.flush()
        return
    # The config errors are on stderr already (create_adapter); once is enough.
    shown = replace(view, config_errors=())
    sys.stdout.write(cli_wording(render_status(shown)) + "\n")
    if not view.servers:
        sys.stdout.write(
            "Add one with `pi-mcp add NAME -- COMMAND [ARGS...]` (or a URL), or take "
            "the servers of your other MCP hosts with `pi-mcp init`.\n"
        )
    if pool is not None:
        sys.stdout.write(describe_pool(pool) + "\n")
    warm = warm_process(agent_dir)
    if warm is not None:
        sys.stdout.write(describe_warm_process(warm) + "\n")
    if shared is not None:
        shared.ping()
        sys.stdout.write(shared.describe() + "\n")


@app.command(short_help="List the known tools.")
def tools(
    ctx: typer.Context,
    server: Annotated[
        str | None, typer.Argument(metavar="SERVER", help="Only this server's tools.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List known tools (servers never listed before are connected once).

    In a pipe each tool is one line, name, server and description separated by tabs, never cut.
    """

    def body(adapter: McpAdapter) -> None:
        require_known_server(adapter.servers, server)
        found = adapter.tools(server)
        if as_json:
            print_json(
                [
                    {
                        "name": t.name,
                        "server": t.server,
                        "originalName": t.original_name,
                        "description": t.description,
                        "resourceUri": t.resource_uri,
                    }
                    for t in found
                ]
            )
            return
        if not found:
            print_warning("no tools known; `pi-mcp status` shows why")
            return
        rows = [(t.name, t.server, (t.description.splitlines() or [""])[0]) for t in found]
        if not sys.stdout.isatty():
            # For grep and cut: whole names, one tool per line.
            sys.stdout.write("".join(f"{n}\t{s}\t{d}\n" for n, s, d in rows))
            return
        from rich.console import Console
        from rich.table import Table

        table = Table("name", "server", "description", box=None, pad_edge=False)
        table.columns[0].no_wrap = True
        table.columns[0].min_width = max(len(n) for n, _, _ in rows)
        table.columns[2].overflow = "ellipsis"
        table.columns[2].no_wrap = True
        for name, srv, description in rows:
            table.add_row(name, srv, description)
        Console().print(table)

    def concerns(_adapter: McpAdapter, failed: str) -> bool:
        return server is None or failed == server

    run_from_cache(ctx, body, quiet=as_json, concerns=concerns)


@app.command()
def search(
    ctx: typer.Context,
    words: Annotated[
        list[str],
        typer.Argument(
            metavar="QUERY",
            help="Words (ranked; quotes optional) or, with --regex, a pattern.",
        ),
    ],
    server: Annotated[
        str | None, typer.Option("--server", metavar="SERVER", help="Only this server.")
    ] = None,
    regex: Annotated[bool, typer.Option("--regex", help="Treat QUERY as a regex.")] = False,
    limit: Annotated[
        int, typer.Option("--limit", metavar="N", min=1, help="Show at most N tools.")
    ] = 12,
    offset: Annotated[
        int, typer.Option("--offset", metavar="K", min=0, help="Skip the first K matches.")
    ] = 0,
    no_schemas: Annotated[bool, typer.Option("--no-schemas", help="Names only.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Search tools by words, ranked, from the metadata cache."""
    from pi_mcp_adapter.engine import kept_index_answers

    query = " ".join(words)
    cli = get_context(ctx)
    # Ranked words, or one server's tools, can be answered from the index a search kept
    # (see ``engine/_search_facts.py``); the other searches need the catalog.
    keeps = not regex and kept_index_answers(query)
    files_before = _config_files_digest(cli) if keeps else None
    if files_before is not None:
        kept = _search_kept_index(
            cli, files_before, query, server=server, limit=limit, offset=offset
        )
        if kept is not None:
            from pi_mcp_adapter.surface import search_results_result

            result = search_results_result(
                query, kept, server=server, include_schemas=not no_schemas
            )
            emit_result(_past_the_end(result, query, limit, offset), as_json=as_json)
            return

    from pi_mcp_adapter.config import RecordingEnviron

    recording = RecordingEnviron(cli.environ)

    def body(adapter: McpAdapter) -> ToolResult:
        from pi_mcp_adapter.surface import ProxyTool

        if not regex and adapter.settings.search_ranking != "lexical":
            _import_numpy_with_one_blas_thread()
        result = ProxyTool(adapter).search_result(
            query,
            server=server,
            regex=regex,
            include_schemas=not no_schemas,
            limit=limit,
            offset=offset,
        )
        return _past_the_end(result, query, limit, offset)

    def keep(adapter: McpAdapter) -> None:
        if files_before is None:
            return
        from pi_mcp_adapter.config import inputs_digest
        from pi_mcp_adapter.engine import keep_search_facts

        def key_of(names: Sequence[str]) -> str | None:
            files = _config_files_digest(cli)  # changed while loading: nothing is kept
            return inputs_digest(files, cli.environ, names) if files == files_before else None

        keep_search_facts(adapter, recording, key_of)

    result = run_from_cache(ctx, body, quiet=as_json, config_environ=recording, after_cached=keep)
    emit_result(result, as_json=as_json)


def _search_kept_index(
    cli: CliContext, files: str, query: str, *, server: str | None, limit: int, offset: int
) -> SearchResults | None:
    """The search's results from the index an earlier search kept, when the configuration
    and the cache are still those it was kept for (``files``: the configuration files'
    digest now); None when they are not, or the page is empty (which says why servers are
    missing, from the catalog)."""
    from pi_mcp_adapter._errors import UsageError
    from pi_mcp_adapter.config import inputs_digest
    from pi_mcp_adapter.engine import kept_search

    environ = cli.environ

    def before_open(ranking: str) -> None:
        if ranking != "lexical":
            _import_numpy_with_one_blas_thread()

    kept = kept_search(
        cli.agent_dir,
        key_of=lambda names: inputs_digest(files, environ, names),
        # As create_adapter's adapter: it relays elicitation to the terminal, not sampling.
        relay=True,
        before_open=before_open,
    )
    if kept is None:
        return None
    try:
        results = kept.search(query, server=server, limit=limit, offset=offset)
    except (LookupError, UsageError):
        return None
    if results is None or not results.page.hits:
        return None
    _report_kept_config_problems(environ, kept.facts.errors, kept.facts.warnings)
    for message in kept.cache_warnings:
        print_warning(message)
    return results


def _report_kept_config_problems(
    environ: Mapping[str, str], errors: Sequence[str], warnings: Sequence[str]
) -> None:
    """What :func:`report_config_problems` shows of a configuration, from facts kept of it
    (shown as they were kept, masked), with the environment's secrets registered as the
    load would have."""
    from pi_mcp_adapter._secrets import register_environment_secrets

    register_environment_secrets(environ)
    for error in errors:
        print_warning(f"config: {error}")
    for warning in warnings:
        print_warning(warning)


def _past_the_end(result: ToolResult, query: str, limit: int, offset: int) -> ToolResult:
    """``result``, or what to do instead when ``offset`` is past its last match."""
    from pi_mcp_adapter.engine import ToolResult

    total = result.details.get("count", 0)
    if offset and not result.details.get("matches") and total:
        text = (
            f"--offset {offset} is past the end: {total} tool{'s' if total != 1 else ''} "
            f'match "{query}", so the highest valid offset is {total - 1} '
            f"(--offset {max(0, total - limit)} shows the last page)."
        )
        return ToolResult.text(text, details=result.details)
    return result


def _import_numpy_with_one_blas_thread() -> None:
    """Import numpy (the hybrid ranking's arrays) with OpenBLAS limited to one thread.

    OpenBLAS starts a thread per core, and sets up each, as numpy loads: for one query over
    small arrays (its products avoid BLAS anyway) that is pure start-up cost, about 30 ms of
    CPU and more of wall time on a busy machine. Only this process is affected, and only
    where the person set no thread count; the variable is removed again at once, so servers
    this command starts do not inherit it.
    """
    import importlib.util
    import os

    if "numpy" in sys.modules or importlib.util.find_spec("numpy") is None:
        return
    unset = "OPENBLAS_NUM_THREADS" not in os.environ
    if unset:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        if unset:
            os.environ.pop("OPENBLAS_NUM_THREADS", None)


@app.command()
def describe(
    ctx: typer.Context,
    names: Annotated[
        list[str],
        typer.Argument(
            metavar="NAME...", help="Tool names (prefixed or original) or server names."
        ),
    ],
    signatures: Annotated[
        bool,
        typer.Option(
            "--signatures",
            help="One name(params) -> result line per tool (implied by several names or a server).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Show a tool's description, parameters and signature; or many tools' signatures."""

    def body(adapter: McpAdapter) -> ToolResult:
        from pi_mcp_adapter.engine import ToolResult
        from pi_mcp_adapter.surface import ProxyTool

        proxy = ProxyTool(adapter)
        if signatures or len(names) != 1 or names[0] in adapter.servers:
            return proxy.signatures_result(names)
        name = names[0]
        result = proxy.describe_result(name)
        if as_json and not result.is_error:
            tool = adapter.lookup(name)
            details = {
                **result.details,
                "description": tool.description,
                "originalName": tool.original_name,
                "inputSchema": dict(tool.input_schema),
                "resourceUri": tool.resource_uri,
            }
            return ToolResult(result.content, details=details)
        return result

    def concerns(adapter: McpAdapter, failed: str) -> bool:
        from pi_mcp_adapter._errors import McpAdapterError

        for name in names:
            if name == failed:
                return True
            try:
                if adapter.lookup(name).server == failed:
                    return True
            except McpAdapterError:
                return True  # an unknown tool may be one the failed server would have listed
        return False

    emit_result(run_from_cache(ctx, body, quiet=as_json, concerns=concerns), as_json=as_json)


def read_arguments(words: Sequence[str] | None) -> dict[str, Any] | ArgumentPairs:
    """Arguments from the command line: one JSON object, ``-`` (stdin), ``@file``, or
    ``key=value`` words (typed once the tool is known: see ``surface._arguments``).

    Raises:
        UsageError: not a JSON object, unreadable file, nesting too deep, a word that is not
            ``key=value``, a key given twice.
    """
    from pi_mcp_adapter.surface._arguments import read_argument_words

    if words and len(words) == 1 and words[0][:1] in ("-", "@"):
        return _read_json_arguments(words[0])
    return read_argument_words(words or ())


def _read_json_arguments(raw: str) -> dict[str, Any]:
    from pi_mcp_adapter._errors import UsageError
    from pi_mcp_adapter.surface._proxy import parse_args

    text = raw
    if raw == "-":
        text = sys.stdin.read()
    elif raw.startswith("@"):
        path = Path(raw[1:]).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read arguments from {path}: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise UsageError(f"cannot read arguments from {path}: not UTF-8 text") from exc
    return parse_args(text)


@app.command(short_help="Call a tool and print its result.")
def call(
    ctx: typer.Context,
    name: ToolNameArgument,
    args_json: ToolArgsArgument = None,
    full: Annotated[
        bool, typer.Option("--full", help="Print the whole result, past the output limit.")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option("--output", metavar="FILE", help="Write the whole result to FILE."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Call a tool and print its converted result (exit 1 when the tool reports an error)."""
    from pi_mcp_adapter._errors import McpAdapterError

    try:
        arguments = read_arguments(args_json)
    except McpAdapterError as exc:
        raise fail(str(exc), code=EXIT_USAGE) from None

    async def body(adapter: McpAdapter) -> ToolResult:
        from pi_mcp_adapter.surface._arguments import arguments_for
        from pi_mcp_adapter.surface._guard import guarded_call

        await _list_servers_for(adapter, name)
        return await guarded_call(adapter, name, arguments_for(adapter, name, arguments))

    result = run(ctx, body, connect_missing=False, quiet=as_json)
    whole = _whole_text(result) if (full or output is not None) else None
    if output is not None and whole is not None:
        try:
            output.expanduser().write_text(whole, encoding="utf-8")
        except OSError as exc:
            raise fail(f"cannot write {output}: {exc.strerror or exc}") from None
        sys.stderr.write(f"wrote {len(whole.encode())} bytes to {output}\n")
        if result.is_error:
            raise typer.Exit(EXIT_FAILED)
        return
    if whole is not None and not as_json:
        (sys.stderr if result.is_error else sys.stdout).write(whole.rstrip("\n") + "\n")
        if result.is_error:
            raise typer.Exit(EXIT_FAILED)
        return
    # Hints the adapter wrote (unknown tool, bad arguments) in CLI syntax; tool output as is.
    emit_result(result, as_json=as_json, wording=bool(result.details.get("error")))


async def _list_servers_for(adapter: McpAdapter, name: str) -> None:
    """Make ``name`` known when its server was never listed, connecting as few as possible.

    A cached tool needs nothing here: the call connects its server alone. Otherwise the
    never-listed servers whose name starts the tool name are listed, or, failing that, all
    of them (the first run), under the start deadline.
    """
    from pi_mcp_adapter._errors import ToolLookupError

    try:
        adapter.lookup(name)
    except ToolLookupError:
        pass
    else:
        return
    never_listed = [
        n for n in adapter.enabled_servers() if adapter.server_status(n).status == "not-cached"
    ]
    likely = [n for n in never_listed if name.startswith(n)]
    # The server a tool name points at is needed, not surveyed: it gets its whole
    # startupTimeoutMs, as the call itself would.
    await adapter.connect_uncached(likely or never_listed, whole_startup=bool(likely))


def _whole_text(result: ToolResult) -> str:
    """The result's text before the output guard cut it (read back from its spill file)."""
    path = result.details.get("fullOutputPath")
    if isinstance(path, str):
        try:
            return Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
    return result_text(result)


@app.command()
def connect(
    ctx: typer.Context,
    server: Annotated[str, typer.Argument(metavar="SERVER", help="Server to connect and refresh.")],
    as_json: JsonOption = False,
) -> None:
    """Connect a server, refresh its tools and update the cache."""

    async def body(adapter: McpAdapter) -> ToolResult:
        from pi_mcp_adapter.surface import ProxyTool

        return await ProxyTool(adapter).connect_result(server)

    emit_result(run(ctx, body, connect_missing=False, quiet=as_json), as_json=as_json)


@app.command(short_help="Restart a server (or all), ending any backoff.")
def reconnect(
    ctx: typer.Context,
    server: Annotated[
        str | None, typer.Argument(metavar="SERVER", help="Server (default: all).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Close and reopen a server (or all), clearing any failure backoff."""

    async def body(adapter: McpAdapter) -> dict[str, str | None]:
        return await adapter.reconnect(server)

    results = run(ctx, body, connect_missing=False, quiet=as_json)
    if as_json:
        print_json({name: {"ok": err is None, "error": err} for name, err in results.items()})
    else:
        for name, err in sorted(results.items()):
            if err is None:
                sys.stdout.write(f"✓ {name}\n")
            else:
                print_error(f"{name}: {cli_wording(err)}")
    if any(err is not None for err in results.values()):
        raise typer.Exit(EXIT_FAILED)


@app.command(short_help="Token cost of each surface.")
def tokens(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """What the model-facing surface costs in tokens (o200k), against registering every tool."""
    from pi_mcp_adapter.surface._tokens_report import TokenReport, measure_tokens

    async def body(adapter: McpAdapter) -> TokenReport:
        return measure_tokens(adapter)

    report = run(ctx, body, quiet=as_json)
    if as_json:
        print_json(to_camel_keys(asdict(report)))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("surface", "tokens", "vs. every tool", box=None, pad_edge=False)
    every = report.all_tools_tokens

    def ratio(n: int) -> str:
        return f"{every / n:.1f}x smaller" if n and every else "-"

    table.add_row("mcp proxy tool", str(report.proxy_tokens), ratio(report.proxy_tokens))
    table.add_row("ToolSearch tool", str(report.toolsearch_tokens), ratio(report.toolsearch_tokens))
    table.add_row(f"direct tools ({report.direct_tool_count})", str(report.direct_tokens), "")
    if report.namespace_tool_count:
        label = f"namespace tools ({report.namespace_tool_count})"
        table.add_row(label, str(report.namespace_tokens), "")
    table.add_row(f"every tool registered ({report.tool_count})", str(every), "1x")
    Console(soft_wrap=False).print(table)
    servers = Table("what the model reads", "tokens", box=None, pad_edge=False)
    servers.add_row(f"mcp({{}}) status ({report.server_count} servers)", str(report.status_tokens))
    servers.add_row("  the same, every server listed", str(report.status_unbounded_tokens))
    servers.add_row("status line", str(report.status_line_tokens))
    Console(soft_wrap=False).print(servers)


@app.command(short_help="Run the end-to-end demo with real servers.")
def demo(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Run real servers end to end: status, search, describe, call and the token saving."""
    from ._demo import run_demo

    run_demo(get_context(ctx), as_json=as_json)
