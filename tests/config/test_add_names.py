"""How ``pi-mcp add`` checks URLs and names servers it was not given a name for."""

from __future__ import annotations

import pytest

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.config._edit import (
    derive_package_server_name,
    derive_server_name,
    normalize_server_url,
    server_name_problem,
)


@pytest.mark.parametrize(
    ("url", "name"),
    [
        pytest.param("https://mcp.linear.app/mcp", "mcp", id="first-label"),
        pytest.param("https://api.githubcopilot.com/mcp/", "api", id="api"),
        pytest.param("http://localhost:8931/mcp", "local-mcp", id="localhost"),
        pytest.param("http://127.0.0.1:3000/mcp", "local-mcp", id="ipv4-loopback"),
        pytest.param("http://[::1]:3000/mcp", "local-mcp", id="ipv6-loopback"),
        pytest.param("https://My_Server.example.com/", "my_server", id="lowercased"),
        pytest.param("https://10.0.0.7/mcp", "10", id="address"),
    ],
)
def test_a_url_names_its_server_after_the_first_label_of_its_host(url: str, name: str) -> None:
    assert derive_server_name(url) == name


@pytest.mark.parametrize(
    ("package", "name"),
    [
        pytest.param("@modelcontextprotocol/server-memory", "memory", id="scoped-server-prefix"),
        pytest.param("mcp-server-time", "time", id="mcp-server-prefix"),
        pytest.param("wikipedia-mcp", "wikipedia", id="mcp-suffix"),
        pytest.param("@upstash/context7-mcp", "context7", id="scoped-suffix"),
        pytest.param("mcp-server-", "server", id="little-left"),
        pytest.param("fetch", "fetch", id="plain"),
    ],
)
def test_a_package_names_its_server_without_scope_and_mcp_affixes(package: str, name: str) -> None:
    assert derive_package_server_name(package) == name


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        pytest.param("https://Example.COM", "https://example.com/", id="host-lowercased"),
        pytest.param(" https://example.com/mcp?x=1 ", "https://example.com/mcp?x=1", id="query"),
        pytest.param("http://localhost:1/mcp", "http://localhost:1/mcp", id="loopback-http"),
    ],
)
def test_an_acceptable_url_is_kept_in_canonical_form(url: str, canonical: str) -> None:
    assert normalize_server_url(url) == canonical


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("ftp://example.com/", id="scheme"),
        pytest.param("example.com/mcp", id="relative"),
        pytest.param("http://example.com/mcp", id="plain-http"),
        pytest.param("https://u:p@example.com/mcp", id="credentials"),
        pytest.param("https://example.com/mcp#x", id="fragment"),
    ],
)
def test_an_unacceptable_url_is_refused(url: str) -> None:
    with pytest.raises(UsageError):
        normalize_server_url(url)


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        pytest.param("github", True, id="word"),
        pytest.param("a" * 64, True, id="64-chars"),
        pytest.param("a" * 65, False, id="65-chars"),
        pytest.param("_x", False, id="leading-underscore"),
        pytest.param("my server", False, id="space"),
        pytest.param("gh-2_x", True, id="hyphen-underscore"),
    ],
)
def test_server_names_follow_the_reference_s_install_rule(name: str, ok: bool) -> None:
    assert (server_name_problem(name) is None) is ok
