"""``pi-mcp auth SERVER`` (sign in with OAuth) and ``pi-mcp logout SERVER`` (forget the tokens).

``auth`` connects the one server with sign-in allowed: the authorization-code flow opens a
browser through :mod:`webbrowser` (``BROWSER`` decides), or prints the URL and reads the
redirect URL pasted on stdin when no browser can open; ``client_credentials`` needs neither.
On success the server's tools are cached, so ``tools``/``search`` see them at once. Nothing
printed here contains a token, code or secret.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from pi_mcp_adapter._errors import McpAdapterError

if TYPE_CHECKING:
    # OAuth pulls in the MCP SDK: loaded when auth or logout runs, not for every --help.
    from pi_mcp_adapter.engine import McpAdapter
    from pi_mcp_adapter.servers import OAuthState

from ._app import JsonOption, app, fail, get_context, print_json, report_config_problems


def _adapter_for(ctx: typer.Context, server: str) -> McpAdapter:
    from pi_mcp_adapter.engine import McpAdapter
    from pi_mcp_adapter.servers import AuthorizationPrompt, OAuthProviders

    cli = get_context(ctx)
    loaded = cli.load_config()
    report_config_problems(loaded)
    if server not in loaded.servers:
        invalid = loaded.invalid_servers.get(server)
        if invalid is not None:
            raise fail(f"server {server!r} cannot be used: {invalid}")
        known = ", ".join(sorted(loaded.servers)) or "none configured"
        raise fail(f"unknown MCP server {server!r} (configured: {known})")
    # Only this server: signing in must not start every other eager server too.
    only = dataclasses.replace(loaded, servers={server: loaded.servers[server]})
    environ = cli.environ
    # This command is the one place a pasted redirect is always read from stdin.
    oauth = OAuthProviders(
        only.servers,
        agent_dir=cli.agent_dir,
        settings=only.settings,
        environ=environ,
        prompt=AuthorizationPrompt(environ=environ, read_paste="always"),
    )
    return McpAdapter(
        config=only,
        agent_dir=cli.agent_dir,
        project_dir=cli.project_dir,
        connect_missing=False,
        environ=environ,
        oauth=oauth,
    )


def _expiry_text(state: OAuthState) -> str:
    if state.expires_at is None:
        return "no expiry given"
    left = state.expires_at - time.time()
    when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(state.expires_at))
    return f"expires {when}" if left > 0 else f"expired {when}"


@app.command()
def auth(
    ctx: typer.Context,
    server: Annotated[str, typer.Argument(help="The server to sign in to.")],
    as_json: JsonOption = False,
) -> None:
    """Sign in to a remote server with OAuth and store its tokens.

    Opens a browser (or prints the URL and reads the redirect URL pasted on stdin when none
    can open). Servers that use a bearer token or run locally are explained instead.
    """
    import anyio

    from pi_mcp_adapter.servers import allow_prompts
    from pi_mcp_adapter.surface._commands import auth_help

    adapter = _adapter_for(ctx, server)
    entry = adapter.servers[server]
    if entry.url is None or entry.oauth_mode is None:
        help_text = auth_help(adapter, server)
        if as_json:
            print_json({"server": server, "status": "not-oauth", "message": help_text})
        else:
            typer.echo(help_text)
        return
    if entry.untrusted is not None:
        raise fail(f"server {server!r} {entry.untrusted.message}")
    if not entry.is_enabled:
        raise fail(f"server {server!r} is disabled in the configuration")
    before = adapter.oauth.state(server)
    wanted = set((entry.oauth_config.scope or "").split())
    if before is not None and before.has_tokens and wanted - set((before.scope or "").split()):
        # The configured scope grew since the last sign-in: sign in again to get it.
        adapter.oauth.forget_tokens(server)

    async def main() -> int:
        async with adapter:
            with allow_prompts(True):
                metadata = await adapter.connect(server)
        return len(metadata.tools)

    try:
        tool_count = anyio.run(main)
    except McpAdapterError as exc:
        if as_json:
            print_json({"server": server, "status": "failed", "error": str(exc)})
            raise typer.Exit(1) from None
        raise fail(str(exc)) from None
    after = adapter.oauth.state(server)
    assert after is not None
    provider = adapter.oauth.provider(server)
    signed_in = provider is not None and provider.authorization_count > 0
    status = (
        "authorized"
        if signed_in
        else "already-authorized"
        if after.has_tokens
        else "no-authorization-needed"
    )
    if as_json:
        report: dict[str, Any] = {
            "server": server,
            "status": status,
            "tools": tool_count,
            **after.as_json(),
            "hadTokens": bool(before and before.has_tokens),
        }
        print_json(report)
        return
    if status == "no-authorization-needed":
        typer.echo(f"{server} did not ask for authorization; connected ({tool_count} tools).")
        return
    verb = "Signed in to" if signed_in else "Already signed in to"
    scope = f", scope {after.scope!r}" if after.scope else ""
    typer.echo(
        f"{verb} {server} ({tool_count} tools{scope}; token {_expiry_text(after)}).\n"
        f"Tokens are stored in {after.location}; `pi-mcp logout {server}` removes them."
    )


@app.command()
def logout(
    ctx: typer.Context,
    server: Annotated[str, typer.Argument(help="The server whose tokens to forget.")],
    as_json: JsonOption = False,
) -> None:
    """Delete the OAuth tokens and client registration stored for a server."""
    adapter = _adapter_for(ctx, server)
    entry = adapter.servers[server]
    if entry.url is None:
        raise fail(f"{server} is a local (stdio) server; it has no stored sign-in")
    try:
        location = adapter.oauth.store.location(server)
        removed = adapter.oauth.logout(server)
    except McpAdapterError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print_json({"server": server, "removed": removed, "location": location})
    elif removed:
        typer.echo(f"Removed the stored OAuth tokens of {server} ({location}).")
    else:
        typer.echo(f"No OAuth tokens were stored for {server} ({location}).")
