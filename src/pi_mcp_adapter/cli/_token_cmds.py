"""``pi-mcp token set|status|remove SERVER``: the bearer tokens of ``bearerTokenStore`` servers.

The token never passes through argv (other users can read command lines): ``set`` reads it
from stdin when stdin is a pipe, else from a hidden prompt on the terminal. It is stored in the
backend OAuth tokens use (``settings.oauthStore``: a 0600 file, or the OS keyring) bound to the
server's current URL, and registered as a secret, so no output of this process shows it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ._app import EXIT_USAGE, JsonOption, app, fail, get_context, print_json

if TYPE_CHECKING:
    from pi_mcp_adapter.config import LoadedConfig, ServerEntry
    from pi_mcp_adapter.servers import BearerStore

token_app = typer.Typer(
    name="token",
    help="Store, check or remove the bearer token of a server configured with "
    '"auth": "bearer" and "bearerTokenStore": true.',
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(token_app, name="token")

ServerArgument = Annotated[str, typer.Argument(help="The server.")]


def _server(ctx: typer.Context, server: str) -> tuple[LoadedConfig, ServerEntry, BearerStore]:
    from pi_mcp_adapter._errors import UsageError
    from pi_mcp_adapter.servers import create_bearer_store

    cli = get_context(ctx)
    loaded = cli.load_config()
    entry = loaded.servers.get(server)
    if entry is None:
        invalid = loaded.invalid_servers.get(server)
        if invalid is not None:
            raise fail(f"server {server!r} cannot be used: {invalid}")
        known = ", ".join(sorted(loaded.servers)) or "none configured"
        raise fail(f"unknown server {server!r} (configured: {known})", code=EXIT_USAGE)
    if entry.url is None or entry.auth != "bearer" or not entry.bearer_token_store:
        raise fail(
            f'server {server!r} is not configured for a stored token: set "auth": "bearer" and '
            '"bearerTokenStore": true on its entry (`pi-mcp add --bearer-token-store` writes '
            "them), or use bearerTokenEnv",
            code=EXIT_USAGE,
        )
    if entry.untrusted is not None:
        # Its URL was chosen by a project file nobody accepted yet: no token goes there.
        raise fail(f"server {server!r} {entry.untrusted.message}")
    try:
        store = create_bearer_store(loaded.settings.oauth_store, cli.agent_dir)
    except UsageError as exc:
        raise fail(str(exc)) from None
    return loaded, entry, store


def _forget_failure(ctx: typer.Context, server: str) -> None:
    """A connect that failed for want of this token must not keep the server in backoff: the
    next command tries it at once."""
    from pi_mcp_adapter.servers import FAILURES_FILE_NAME, FailureMemory

    cli = get_context(ctx)
    FailureMemory(cli.agent_dir / FAILURES_FILE_NAME).clear(server)


def _read_token(server: str) -> str:
    if sys.stdin.isatty():
        import getpass

        try:
            return getpass.getpass(f"Bearer token for {server} (input hidden): ", stream=sys.stderr)
        except (EOFError, KeyboardInterrupt):
            sys.stderr.write("\n")
            raise fail("no token entered; nothing was stored") from None
    return sys.stdin.read().rstrip("\r\n")


@token_app.command(
    "set", context_settings={"allow_extra_args": True, "ignore_unknown_options": True}
)
def token_set(ctx: typer.Context, server: ServerArgument, as_json: JsonOption = False) -> None:
    """Store SERVER's bearer token, read from stdin or a hidden prompt (never an argument)."""
    from pi_mcp_adapter._secrets import register_secret
    from pi_mcp_adapter.servers import BearerRecord

    if ctx.args:
        # A token typed as an argument is already in the shell history; at least do not
        # echo it back, as a usage error would.
        for word in ctx.args:
            register_secret(word)
        raise fail(
            "`pi-mcp token set SERVER` takes no token argument (command lines are visible to "
            "other users): pipe the token on stdin, or type it at the hidden prompt",
            code=EXIT_USAGE,
        )
    _, entry, store = _server(ctx, server)
    assert entry.url is not None
    token = _read_token(server)
    register_secret(token)
    if not token.strip():
        raise fail("no token given on stdin; nothing was stored", code=EXIT_USAGE)
    if any(c in token for c in "\r\n\0"):
        raise fail("the token holds a line break or NUL; nothing was stored", code=EXIT_USAGE)
    try:
        store.save(server, BearerRecord(token, entry.url))
    except OSError as exc:
        raise fail(f"cannot store the token: {exc}") from None
    _forget_failure(ctx, server)
    shadowed = entry.bearer_token is not None or entry.bearer_token_env is not None
    if as_json:
        print_json(
            {
                "server": server,
                "status": "present",
                "store": store.kind,
                "location": store.location(server),
                "shadowedBy": "bearerToken" if shadowed else None,
            }
        )
        return
    sys.stdout.write(f"Stored the bearer token of {server}, bound to its current URL.\n")
    if shadowed:
        sys.stdout.write(
            "Note: its entry also sets bearerToken or bearerTokenEnv, which take precedence.\n"
        )


@token_app.command("status")
def token_status(ctx: typer.Context, server: ServerArgument, as_json: JsonOption = False) -> None:
    """Whether a token is stored for SERVER and bound to its current URL (exit 1 if not)."""
    _, entry, store = _server(ctx, server)
    try:
        record = store.load(server)
    except OSError as exc:
        status, message = "unavailable", str(exc)
    else:
        if record is None:
            status, message = (
                "missing",
                f"No bearer token is stored for {server}: run " + (f"`pi-mcp token set {server}`."),
            )
        elif record.server_url != entry.url:
            status, message = (
                "url-mismatch",
                (
                    f"A bearer token is stored for {server}, but for another URL: run "
                    f"`pi-mcp token set {server}` to store one for the current URL."
                ),
            )
        else:
            status, message = "present", f"A bearer token is stored for {server}."
    if as_json:
        print_json(
            {
                "server": server,
                "status": status,
                "store": store.kind,
                "location": store.location(server),
            }
        )
    elif status == "unavailable":
        sys.stderr.write(f"error: {message}\n")
    else:
        sys.stdout.write(message + "\n")
    if status != "present":
        raise typer.Exit(1)


@token_app.command("remove")
def token_remove(ctx: typer.Context, server: ServerArgument, as_json: JsonOption = False) -> None:
    """Forget SERVER's stored bearer token."""
    _, _, store = _server(ctx, server)
    try:
        removed = store.delete(server)
    except OSError as exc:
        raise fail(f"cannot remove the token: {exc}") from None
    if as_json:
        print_json({"server": server, "removed": removed})
    elif removed:
        sys.stdout.write(f"Removed the bearer token of {server}.\n")
    else:
        sys.stdout.write(f"No bearer token was stored for {server}.\n")
