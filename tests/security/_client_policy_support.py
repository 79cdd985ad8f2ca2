"""An upstream server with one dangerous tool, and what the client-policy attacks look for.

Run as a script, it is a stdio MCP server (the official SDK's ``MCPServer``) offering:

- tools ``list_repos`` and ``star_repo`` (harmless, the allowed ones) and ``delete_repo``
  (the one a client's policy denies); ``delete_repo``'s description and schema carry markers
  that must never reach that client, and each run of it is appended to ``$POLICY_CALL_LOG``;
- MCP Apps views: ``list_repos`` names ``ui://fix/list-view.html``, ``delete_repo`` names
  ``ui://fix/wipe-view.html``;
- prompts ``summarize_repos`` and ``delete_repo_confirm``, resources ``repo://index`` and
  ``repo://delete_repo/log``, templates ``repo://stars/{name}`` and ``repo://delete_repo/{name}``,
  and completions for every prompt and template argument.

    python tests/security/_client_policy_support.py
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

DENIED_NAME = "delete_repo"
"""In every name of what the policy denies (tool, prompt, resource, template)."""
SECRET_WORDS = ("ZQX-WIPE", "zq_confirm_wipe", "wipe-view")
"""The denied tool's description marker, its parameter and its view's URI: beyond a probe's
own words, they may appear in no answer at all."""
DENY_GLOBS = ["*delete_repo*"]
VIEW_OF_ALLOWED = "ui://fix/list-view.html"
VIEW_OF_DENIED = "ui://fix/wipe-view.html"
CALL_LOG_ENV = "POLICY_CALL_LOG"


def leaks(answer: str, sent: Iterable[str]) -> list[str]:
    """What of the denied things ``answer`` names, besides the words the probe sent (a "not
    found" may quote the name it was given, which tells the client nothing it did not know).

    A word sent is removed only where it stands alone, so a suggestion that completes it
    (``fix_delete_rpo`` -> ``fix_delete_repo``) or contains it (``delete_repo`` ->
    ``fix_delete_repo``) still counts."""
    remaining = answer
    words = {w for value in sent for w in (value, *re.split(r"[\s,]+", value))}
    words |= {w for value in sent for w in re.split(r"[\s,:]+", value)}
    for word in sorted((w for w in words if w), key=len, reverse=True):
        remaining = re.sub(rf"(?<![\w.-]){re.escape(word)}(?![\w-]|\.\w)", "", remaining)
    found = [w for w in SECRET_WORDS if w in remaining]
    if DENIED_NAME in remaining:
        at = remaining.index(DENIED_NAME)
        found.append(f"{DENIED_NAME} in ...{remaining[max(0, at - 60) : at + 40]}...")
    return found


def strings_in(value: Any) -> list[str]:
    """Every string inside a probe's parameters."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []


def _serve() -> None:
    import mcp_types as types
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("fix", instructions="Repository tools for the policy tests.")
    view = "<!doctype html><html><body>{}</body></html>"

    def log_call(tool: str) -> None:
        path = os.environ.get(CALL_LOG_ENV)
        if path:
            with open(path, "a", encoding="utf-8") as log:
                log.write(tool + "\n")

    @server.tool(
        description="Lists the repositories of an organisation.",
        meta={"ui": {"resourceUri": VIEW_OF_ALLOWED}},
    )
    def list_repos(org: str = "acme") -> str:
        log_call("list_repos")
        return f"repos of {org}: alpha, beta"

    @server.tool(description="Stars a repository.")
    def star_repo(name: str) -> str:
        log_call("star_repo")
        return f"starred {name}"

    @server.tool(
        description="ZQX-WIPE: obliterates a repository forever, with all its history.",
        meta={"ui": {"resourceUri": VIEW_OF_DENIED}},
    )
    def delete_repo(name: str, zq_confirm_wipe: bool = False) -> str:
        log_call("delete_repo")
        return f"deleted {name}"

    @server.resource(VIEW_OF_ALLOWED, name="list_view", mime_type="text/html;profile=mcp-app")
    def list_view() -> str:
        return view.format("repository list")

    @server.resource(VIEW_OF_DENIED, name="wipe_view", mime_type="text/html;profile=mcp-app")
    def wipe_view() -> str:
        return view.format("ZQX-WIPE confirmation")

    @server.resource("repo://index", name="repo_index")
    def repo_index() -> str:
        return "alpha, beta"

    @server.resource("repo://delete_repo/log", name="delete_repo_log")
    def delete_log() -> str:
        return "ZQX-WIPE log"

    @server.resource("repo://stars/{name}", name="stars")
    def stars(name: str) -> str:
        return f"{name}: 3 stars"

    @server.resource("repo://delete_repo/{name}", name="delete_repo_plan")
    def delete_plan(name: str) -> str:
        return f"ZQX-WIPE plan for {name}"

    @server.prompt(description="Summarize the repositories.")
    def summarize_repos(org: str) -> str:
        return f"Summarize the repositories of {org}."

    @server.prompt(description="ZQX-WIPE: confirm a deletion.")
    def delete_repo_confirm(name: str) -> str:
        return f"Confirm ZQX-WIPE of {name}."

    @server.completion()
    async def complete(
        ref: types.PromptReference | types.ResourceTemplateReference,
        argument: types.CompletionArgument,
        context: types.CompletionContext | None,
    ) -> types.Completion:
        about = ref.name if isinstance(ref, types.PromptReference) else ref.uri
        return types.Completion(values=[f"{argument.value}-of-{about}"])

    server.run("stdio")


if __name__ == "__main__":
    _serve()
