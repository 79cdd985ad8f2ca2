from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import ReferenceJs
from pi_mcp_adapter.servers import _npx
from pi_mcp_adapter.servers._npx import (
    NPX_CACHE_TTL_S,
    NpxInvocation,
    ResolvedCommand,
    parse_npx_invocation,
    resolve_npx_command,
)

MEMORY = "@modelcontextprotocol/server-memory"
MEMORY_VERSION = "2026.8.31"
MEMORY_SPEC = f"{MEMORY}@{MEMORY_VERSION}"
NPM_PROJECT = Path(__file__).parents[1] / "npm"
T0_S = 1_800_000_000.0


def inv(
    spec: str,
    name: str,
    version: str | None = None,
    *bin_args: str,
    runner: str = "npx",
    bin_name: str | None = None,
) -> NpxInvocation:
    return NpxInvocation(runner, spec, name, version, bin_name, bin_args)  # type: ignore[arg-type]


# --- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "args", "expected"),
    [
        pytest.param("npx", ["-y", "pkg"], inv("pkg", "pkg"), id="npx -y bare name"),
        pytest.param("npx", ["--yes", "pkg", "a"], inv("pkg", "pkg", None, "a"), id="--yes"),
        pytest.param("npx", ["pkg"], inv("pkg", "pkg"), id="no yes flag"),
        pytest.param(
            "npx",
            ["-y", "@scope/pkg", "--port", "3", "-v"],
            inv("@scope/pkg", "@scope/pkg", None, "--port", "3", "-v"),
            id="flags after the package belong to the command",
        ),
        pytest.param(
            "npx", ["-y", "pkg@1.2.3"], inv("pkg@1.2.3", "pkg", "1.2.3"), id="exact version"
        ),
        pytest.param(
            "npx",
            ["-y", "@scope/pkg@latest"],
            inv("@scope/pkg@latest", "@scope/pkg", "latest"),
            id="scoped with a tag",
        ),
        pytest.param("npx", ["pkg@^1.2"], inv("pkg@^1.2", "pkg", "^1.2"), id="caret range"),
        pytest.param(
            "npx",
            ["@s/p@>=1.0.0 <2.0.0"],
            inv("@s/p@>=1.0.0 <2.0.0", "@s/p", ">=1.0.0 <2.0.0"),
            id="range with a space",
        ),
        pytest.param(
            "npx",
            ["-y", "--", "pkg", "--", "x"],
            inv("pkg", "pkg", None, "--", "x"),
            id="separator before the package, later separators passed on",
        ),
        pytest.param(
            "npx",
            ["-p", "@s/tools@2", "s-cli", "run"],
            inv("@s/tools@2", "@s/tools", "2", "run", bin_name="s-cli"),
            id="-p names the package and the command names the bin",
        ),
        pytest.param(
            "npx",
            ["--package", "pkg", "bin"],
            inv("pkg", "pkg", bin_name="bin"),
            id="--package X",
        ),
        pytest.param(
            "npx",
            ["--package=pkg", "-y", "bin"],
            inv("pkg", "pkg", bin_name="bin"),
            id="--package=X",
        ),
        pytest.param(
            "npx",
            ["-p=pkg", "--", "bin", "-x"],
            inv("pkg", "pkg", None, "-x", bin_name="bin"),
            id="-p=X",
        ),
        pytest.param(
            "npm",
            ["exec", "-y", "--", "@s/p", "--flag"],
            inv("@s/p", "@s/p", None, "--flag", runner="npm"),
            id="npm exec with separator",
        ),
        pytest.param(
            "npm",
            ["exec", "--package=@s/p@1.0.0", "--", "p", "a"],
            inv("@s/p@1.0.0", "@s/p", "1.0.0", "a", runner="npm", bin_name="p"),
            id="npm exec --package",
        ),
        pytest.param(
            "npm",
            ["x", "--yes", "pkg", "a", "b"],
            inv("pkg", "pkg", None, "a", "b", runner="npm"),
            id="npm x alias with plain words",
        ),
        pytest.param(
            "npm",
            ["exec", "pkg", "a", "--", "--b"],
            inv("pkg", "pkg", None, "a", "--b", runner="npm"),
            id="npm exec with a late separator",
        ),
        pytest.param("/usr/local/bin/npx", ["-y", "pkg"], inv("pkg", "pkg"), id="npx by path"),
        pytest.param(
            "C:\\Program Files\\nodejs\\npx.cmd", ["-y", "pkg"], inv("pkg", "pkg"), id="npx.cmd"
        ),
        pytest.param("NPX", ["Legacy.Name"], inv("Legacy.Name", "Legacy.Name"), id="legacy name"),
        pytest.param(
            "npx", ["-y", "pkg", "--"], inv("pkg", "pkg"), id="a final separator is dropped"
        ),
        pytest.param(
            "npx", ["-y", "pkg", "--", "x"], inv("pkg", "pkg", None, "--", "x"), id="pkg -- x"
        ),
        pytest.param(
            "npx", ["-y", "--", "pkg", "arg"], inv("pkg", "pkg", None, "arg"), id="-y -- pkg arg"
        ),
        pytest.param(
            "npx", ["-p", "pkg", "--", "bin"], inv("pkg", "pkg", bin_name="bin"), id="-p pkg -- bin"
        ),
        pytest.param(
            "npx", ["-y", "pkg@=v1.2.3"], inv("pkg@=v1.2.3", "pkg", "=v1.2.3"), id="=v version"
        ),
    ],
)
def test_npx_command_lines_are_parsed(
    command: str, args: list[str], expected: NpxInvocation
) -> None:
    assert parse_npx_invocation(command, args) == expected


@pytest.mark.parametrize(
    ("command", "args"),
    [
        pytest.param("node", ["server.js"], id="not a runner"),
        pytest.param("npx", [], id="no package"),
        pytest.param("npx", ["-y"], id="only flags"),
        pytest.param("npx", ["--no-install", "pkg"], id="unknown long flag"),
        pytest.param("npx", ["-q", "pkg"], id="unknown short flag"),
        pytest.param("npx", ["-yp", "pkg", "bin"], id="combined short flags"),
        pytest.param("npx", ["-c", "echo hi"], id="call"),
        pytest.param("npx", ["-p", "a", "-p", "b", "bin"], id="several packages"),
        pytest.param("npx", ["-p", "pkg"], id="package without a bin"),
        pytest.param("npx", ["-p"], id="package flag without a value"),
        pytest.param("npx", ["--package=", "bin"], id="empty package value"),
        pytest.param("npx", ["-p", "pkg", "./script.js"], id="-p with a path command"),
        pytest.param("npx", ["-y", "./local-dir"], id="directory spec"),
        pytest.param("npx", ["-y", "/abs/dir"], id="absolute path spec"),
        pytest.param("npx", ["-y", "github:user/repo"], id="git shorthand"),
        pytest.param("npx", ["-y", "https://example.com/p.tgz"], id="tarball url"),
        pytest.param("npx", ["-y", "pkg.tgz"], id="local tarball"),
        pytest.param("npx", ["-y", "pkg@npm:other@1"], id="alias"),
        pytest.param("npx", ["-y", "pkg@github:u/r"], id="git version"),
        pytest.param("npx", ["-y", "pkg@"], id="empty version"),
        pytest.param("npx", ["-y", "@scope"], id="scope without a name"),
        pytest.param("npx", ["-y", "@scope/"], id="scope with an empty name"),
        pytest.param("npm", ["install", "pkg"], id="npm install"),
        pytest.param("npm", [], id="bare npm"),
        pytest.param("npm", ["exec", "pkg", "--flag"], id="npm exec flag without separator"),
        pytest.param("npm", ["exec", "-c", "cmd"], id="npm exec call"),
    ],
)
def test_anything_but_a_plain_registry_package_is_not_parsed(command: str, args: list[str]) -> None:
    assert parse_npx_invocation(command, args) is None


@pytest.mark.parametrize(
    ("version_spec", "exact"),
    [
        pytest.param(None, None, id="bare"),
        pytest.param("1.2.3", "1.2.3", id="plain"),
        pytest.param("v1.2.3", "1.2.3", id="v prefix"),
        pytest.param("=1.2.3", "1.2.3", id="equals prefix"),
        pytest.param("1.2.3-beta.1", "1.2.3-beta.1", id="prerelease"),
        pytest.param("1.2.3+build.5", "1.2.3", id="build metadata ignored"),
        pytest.param("=v1.2.3", "1.2.3", id="equals and v"),
        pytest.param("= v1.2.3", "1.2.3", id="equals, space and v"),
        pytest.param("latest", None, id="tag"),
        pytest.param("^1.2.3", None, id="caret"),
        pytest.param("1.2", None, id="partial"),
        pytest.param("1.2.x", None, id="x range"),
    ],
)
def test_only_full_versions_count_as_exact(version_spec: str | None, exact: str | None) -> None:
    assert inv("p", "p", version_spec).exact_version == exact


# Command lines read differently from the TypeScript reference on purpose (docs/npx.md). Each
# value is what the reference returns; ours is in test_npx_command_lines_are_parsed or
# test_anything_but_a_plain_registry_package_is_not_parsed.
_OURS_DIFFER = {
    ("npx", "-y", "--", "pkg", "arg"): "npx runs pkg; the reference finds no package",
    ("npx", "-y", "--", "pkg", "--", "x"): "npx runs pkg; the reference finds no package",
    ("npx", "-p", "pkg", "--", "bin"): "npx runs bin; the reference finds no bin",
    ("npx", "-p", "a", "-p", "b", "bin"): "bin may need b, which only npx's own install has",
    ("npx", "-y", "github:user/repo"): "not a registry package: nothing to find, no install",
    ("npx", "-y", "@scope"): "not a package name: nothing to find, no install",
    ("npx", "-y", "@scope/"): "not a package name: nothing to find, no install",
    ("npx", "-y", "pkg@"): "an empty version: nothing to find, no install",
    ("npx", "-y", "pkg@npm:other@1"): "an alias runs another package",
}
_EXACT_DIFFER = {
    "pkg@1.2.3+build.5": "npm drops build metadata from versions: 1.2.3 is the match",
}
_COMPARED_LINES: list[list[str]] = [
    ["npx", "-y", "pkg"],
    ["npx", "--yes", "pkg", "a"],
    ["npx", "pkg"],
    ["npx", "-y", "@scope/pkg", "--port", "3", "-v"],
    ["npx", "-y", "pkg@1.2.3"],
    ["npx", "-y", "@scope/pkg@latest"],
    ["npx", "pkg@^1.2"],
    ["npx", "-y", "--", "pkg", "--", "x"],
    ["npx", "-p", "@s/tools@2", "s-cli", "run"],
    ["npx", "--package", "pkg", "bin"],
    ["npx", "--package=pkg", "-y", "bin"],
    ["npx", "-y", "pkg", "--"],
    ["npx", "-y", "pkg", "a", "--"],
    ["npx", "-y", "pkg", "--", "x"],
    ["npx", "-y", "--", "pkg", "arg"],
    ["npx", "-p", "pkg", "--", "bin"],
    ["npx", "-p", "a", "-p", "b", "bin"],
    ["npx", "-y", "pkg@=v1.2.3"],
    ["npx", "-y", "pkg@v1.2.3"],
    ["npx", "-y", "pkg@1.2.3+build.5"],
    ["npx", "-y", "pkg@1.2.3-beta.1"],
    ["npx", "-y", "github:user/repo"],
    ["npx", "-y", "@scope"],
    ["npx", "-y", "@scope/"],
    ["npx", "-y", "pkg@"],
    ["npx", "-y", "pkg@npm:other@1"],
    ["npx", "-y"],
    ["npx"],
    ["npx", "--no-install", "pkg"],
    ["npx", "-c", "echo hi"],
    ["npx", "-p", "pkg"],
    ["npm", "exec", "--package=@s/p@1.0.0", "--", "p", "a"],
    ["npm", "exec", "--package", "pkg", "--", "bin"],
    ["npm", "exec", "pkg", "--flag"],
    ["npm", "install", "pkg"],
]


def test_npx_lines_are_read_as_the_reference_reads_them_or_the_difference_is_listed(
    reference_js: ReferenceJs,
) -> None:
    npx_lines = [line for line in _COMPARED_LINES if line[0] == "npx"]
    npm_lines = [line for line in _COMPARED_LINES if line[0] == "npm"]
    parsed = dict(
        zip(
            map(tuple, npx_lines),
            reference_js.call("npx-resolver", "parseNpxArgs", [[line[1:]] for line in npx_lines]),
            strict=True,
        )
    ) | dict(
        zip(
            map(tuple, npm_lines),
            reference_js.call(
                "npx-resolver", "parseNpmExecArgs", [[line[1:]] for line in npm_lines]
            ),
            strict=True,
        )
    )
    specs = sorted({r["value"]["packageSpec"] for r in parsed.values() if r.get("value")})
    spec_results = reference_js.call("npx-resolver", "parsePackageSpec", [[s] for s in specs])
    exact = {
        s: (r["value"] or {}).get("exactVersion") for s, r in zip(specs, spec_results, strict=True)
    }

    disagreements: list[str] = []
    for line, result in parsed.items():
        ours = parse_npx_invocation(line[0], list(line[1:]))
        theirs = result.get("value")
        ours_shape = (
            None if ours is None else (ours.package_spec, ours.bin_name, list(ours.bin_args))
        )
        theirs_shape = (
            None
            if theirs is None
            else (theirs["packageSpec"], theirs.get("binName"), theirs["extraArgs"])
        )
        if ours_shape != theirs_shape and line not in _OURS_DIFFER:
            disagreements.append(f"{line}: ours {ours_shape}, reference {theirs_shape}")
        if ours is not None and theirs is not None and ours_shape == theirs_shape:
            spec = theirs["packageSpec"]
            if ours.exact_version != exact[spec] and spec not in _EXACT_DIFFER:
                disagreements.append(
                    f"{line}: exact version ours {ours.exact_version}, reference {exact[spec]}"
                )
    for line in _OURS_DIFFER:  # the table lists real differences only
        result = parsed[line]
        theirs = result.get("value")
        ours = parse_npx_invocation(line[0], list(line[1:]))
        if (ours is None) == (theirs is None) and (
            ours is None or theirs is None or ours.package_spec == theirs["packageSpec"]
        ):
            disagreements.append(f"{line} is listed as a difference but both agree")
    assert not disagreements, "\n".join(disagreements)


def test_cache_keys_use_the_reference_format() -> None:
    assert inv(MEMORY_SPEC, MEMORY, MEMORY_VERSION).cache_key == (
        '["npx","@modelcontextprotocol/server-memory@2026.8.31",""]'
    )
    assert inv("pkg", "pkg", bin_name="tool", runner="npm").cache_key == '["npm","pkg","tool"]'


async def test_non_npx_commands_come_back_unchanged_without_touching_the_cache(
    tmp_path: Path,
) -> None:
    cache_path = tmp_path / "mcp-npx-cache.json"

    result = await resolve_npx_command(
        "uvx", ["mcp-server-time"], cache_path=cache_path, environ={}
    )

    assert result == ResolvedCommand("uvx", ("mcp-server-time",), resolved=False)
    assert not cache_path.exists()


def test_resolved_commands_must_name_their_package() -> None:
    with pytest.raises(ValueError, match="package"):
        ResolvedCommand("node", ("x.js",), resolved=True)
    with pytest.raises(TypeError, match="tuple"):
        ResolvedCommand("npx", ["-y"], resolved=False)  # type: ignore[arg-type]


# --- resolution against npx-cache trees built on disk ------------------------------------------


class NpmCache:
    """An npm cache directory with ``_npx`` installs laid out as npm lays them out."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._count = 0

    def install(
        self,
        name: str,
        *,
        version: str = "1.0.0",
        bin: object = None,
        files: Mapping[str, str] | None = None,
        requested: list[str] | None = None,
        used_at_s: float | None = None,
    ) -> Path:
        self._count += 1
        install_dir = self.root / "_npx" / f"{self._count:016x}"
        package_dir = install_dir.joinpath("node_modules", *name.split("/"))
        package_dir.mkdir(parents=True)
        manifest: dict[str, object] = {"name": name, "version": version}
        if bin is not None:
            manifest["bin"] = bin
        (package_dir / "package.json").write_text(json.dumps(manifest))
        if files is None:  # by default, every declared bin exists
            targets = bin.values() if isinstance(bin, dict) else [bin] if bin else []
            files = dict.fromkeys((str(t) for t in targets), "")
        for relative, text in files.items():
            path = package_dir / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        marker = install_dir / "package.json"
        marker.write_text(json.dumps({"_npx": {"packages": requested or [name]}}))
        if used_at_s is not None:
            os.utime(marker, (used_at_s, used_at_s))
        return package_dir


@pytest.fixture
def npm_cache(tmp_path: Path) -> NpmCache:
    return NpmCache(tmp_path / "npm-cache")


async def resolve_offline(
    command: str,
    args: list[str],
    *,
    npm_cache: Path,
    cache_path: Path,
    cwd: Path,
    clock: Callable[[], float] = lambda: T0_S,
    project_code: bool = False,
) -> ResolvedCommand:
    """Resolve without ever starting npm: the cache dir is given and installs are off."""
    with anyio.fail_after(10):
        return await resolve_npx_command(
            command,
            args,
            cache_path=cache_path,
            environ={"NPM_CONFIG_CACHE": str(npm_cache), "PATH": os.defpath},
            cwd=cwd,
            install_if_missing=False,
            project_code=project_code,
            clock=clock,
        )


@pytest.mark.parametrize(
    ("name", "bin", "argv", "chosen"),
    [
        pytest.param(
            "@s/tools",
            {"alpha": "a.js", "tools": "t.js", "s-tools": "st.js"},
            ["-p", "@s/tools", "alpha", "x"],
            "a.js",
            id="explicit bin first",
        ),
        pytest.param(
            "@s/tools",
            {"alpha": "a.js", "s-tools": "st.js", "tools": "t.js"},
            ["-y", "@s/tools", "x"],
            "t.js",
            id="then the name part",
        ),
        pytest.param(
            "@s/tools",
            {"alpha": "a.js", "s-tools": "st.js"},
            ["-y", "@s/tools", "x"],
            "st.js",
            id="then scope-name",
        ),
        pytest.param(
            "@s/tools",
            {"alpha": "a.js", "beta": "b.js"},
            ["-y", "@s/tools", "x"],
            "a.js",
            id="then the first bin",
        ),
        pytest.param("tools", "./cli.mjs", ["tools", "x"], "cli.mjs", id="bin as a string"),
    ],
)
async def test_the_bin_is_chosen_like_npx_does(
    npm_cache: NpmCache,
    tmp_path: Path,
    name: str,
    bin: object,
    argv: list[str],
    chosen: str,
) -> None:
    package_dir = npm_cache.install(name, bin=bin)

    result = await resolve_offline(
        "npx", argv, npm_cache=npm_cache.root, cache_path=tmp_path / "c.json", cwd=tmp_path
    )

    assert result == ResolvedCommand(
        "node", (str((package_dir / chosen).resolve()), "x"), True, name, "1.0.0"
    )


@pytest.mark.parametrize(
    ("bin", "files", "argv"),
    [
        pytest.param({"other": "o.js"}, {"o.js": ""}, ["-p", "pkg", "missing"], id="unknown bin"),
        pytest.param(None, {"index.js": ""}, ["-y", "pkg"], id="no bin at all"),
        pytest.param({"pkg": "gone.js"}, {"index.js": ""}, ["-y", "pkg"], id="bin file missing"),
        pytest.param(
            {"pkg": "../../escape.js"}, {"index.js": ""}, ["-y", "pkg"], id="bin outside package"
        ),
    ],
)
async def test_a_package_without_a_usable_bin_keeps_the_original_command(
    npm_cache: NpmCache,
    tmp_path: Path,
    bin: object,
    files: dict[str, str],
    argv: list[str],
) -> None:
    package_dir = npm_cache.install("pkg", bin=bin, files=files)
    (package_dir.parent.parent / "escape.js").write_text("")

    result = await resolve_offline(
        "npx", argv, npm_cache=npm_cache.root, cache_path=tmp_path / "c.json", cwd=tmp_path
    )

    assert result == ResolvedCommand("npx", tuple(argv), resolved=False)


@pytest.mark.parametrize(
    ("target", "content", "runs_with_node"),
    [
        pytest.param("bin/cli.cjs", "", True, id="cjs extension"),
        pytest.param("bin/cli", "#!/usr/bin/env node\n", True, id="node shebang"),
        pytest.param("bin/cli", "#!/usr/bin/node --flag\n", True, id="node path shebang"),
        pytest.param("bin/cli", "#!/bin/sh\necho node\n", False, id="shell script"),
        pytest.param("bin/cli", "\x7fELF", False, id="native binary"),
    ],
)
async def test_javascript_bins_run_with_node_and_others_run_directly(
    npm_cache: NpmCache,
    tmp_path: Path,
    target: str,
    content: str,
    runs_with_node: bool,
) -> None:
    package_dir = npm_cache.install("pkg", bin={"pkg": target}, files={target: content})
    bin_path = str((package_dir / target).resolve())

    result = await resolve_offline(
        "npx",
        ["-y", "pkg", "--a"],
        npm_cache=npm_cache.root,
        cache_path=tmp_path / "c.json",
        cwd=tmp_path,
    )

    if runs_with_node:
        assert (result.command, result.args) == ("node", (bin_path, "--a"))
    else:
        assert (result.command, result.args) == (bin_path, ("--a",))


async def test_a_non_javascript_bin_that_is_not_executable_is_not_used(
    npm_cache: NpmCache, tmp_path: Path
) -> None:
    package_dir = npm_cache.install("pkg", bin={"pkg": "cli"}, files={"cli": "#!/bin/sh\n"})
    (package_dir / "cli").chmod(0o644)

    result = await resolve_offline(
        "npx", ["pkg"], npm_cache=npm_cache.root, cache_path=tmp_path / "c.json", cwd=tmp_path
    )

    assert not result.resolved


@pytest.mark.parametrize(
    ("spec", "expected_version"),
    [
        pytest.param("pkg", "2.0.0", id="bare name takes the newest install"),
        pytest.param("pkg@1.0.0", "1.0.0", id="exact version takes its own install"),
        pytest.param("pkg@3.0.0", None, id="exact version nowhere installed"),
        pytest.param("pkg@^1", "1.5.0", id="range takes only the install made for it"),
        pytest.param("pkg@^2", None, id="range never installed"),
        pytest.param("pkg@latest", None, id="tag never installed"),
    ],
)
async def test_versions_pick_the_install_npx_would_use(
    npm_cache: NpmCache, tmp_path: Path, spec: str, expected_version: str | None
) -> None:
    npm_cache.install(
        "pkg", version="1.0.0", bin="i.js", requested=["pkg@1.0.0"], used_at_s=T0_S - 30
    )
    npm_cache.install("pkg", version="1.5.0", bin="i.js", requested=["pkg@^1"], used_at_s=T0_S - 20)
    npm_cache.install("pkg", version="2.0.0", bin="i.js", requested=["pkg"], used_at_s=T0_S - 10)
    npm_cache.install("pkg", version="0.9.0", bin="i.js", requested=["x", "y"], used_at_s=T0_S - 40)

    result = await resolve_offline(
        "npx", ["-y", spec], npm_cache=npm_cache.root, cache_path=tmp_path / "c.json", cwd=tmp_path
    )

    assert result.version == expected_version
    assert result.resolved is (expected_version is not None)


async def test_a_bare_name_takes_the_most_recently_used_install(
    npm_cache: NpmCache, tmp_path: Path
) -> None:
    npm_cache.install("pkg", version="3.0.0", bin="i.js", requested=["a"], used_at_s=T0_S - 50)
    npm_cache.install("pkg", version="1.0.0", bin="i.js", requested=["b"], used_at_s=T0_S - 5)

    result = await resolve_offline(
        "npx", ["pkg"], npm_cache=npm_cache.root, cache_path=tmp_path / "c.json", cwd=tmp_path
    )

    assert result.version == "1.0.0"


# --- the resolution cache file -----------------------------------------------------------------


def write_cache_entry(cache_path: Path, key: str, entry: dict[str, object]) -> None:
    cache_path.write_text(json.dumps({"version": 2, "entries": {key: entry}}))


def project_dir(tmp_path: Path) -> Path:
    """A directory the server runs in, beside (not around) the files a test installs."""
    directory = tmp_path / "project"
    directory.mkdir(exist_ok=True)
    return directory


@pytest.mark.parametrize(
    ("entry_changes", "age_s", "used"),
    [
        pytest.param({}, 0, True, id="fresh entry"),
        pytest.param({}, NPX_CACHE_TTL_S - 1, True, id="just inside the ttl"),
        pytest.param({}, NPX_CACHE_TTL_S + 1, False, id="expired"),
        pytest.param({}, -60, False, id="from the future"),
        pytest.param({"packageVersion": "2026.1.1"}, 0, False, id="exact version differs"),
        pytest.param({"packageVersion": None}, 0, False, id="version unknown"),
        pytest.param({"resolvedBin": "/nonexistent/index.js"}, 0, False, id="bin gone"),
        pytest.param({"isJs": "yes"}, 0, False, id="malformed field"),
        pytest.param({"resolvedAt": True}, 0, False, id="malformed time"),
    ],
)
async def test_cache_entries_are_used_only_while_valid(
    tmp_path: Path, entry_changes: dict[str, object], age_s: float, used: bool
) -> None:
    bin_path = tmp_path / "elsewhere" / "index.js"
    bin_path.parent.mkdir()
    bin_path.write_text("")
    entry: dict[str, object] = {
        "resolvedBin": str(bin_path),
        "resolvedAt": int(T0_S * 1000),
        "isJs": True,
        "packageVersion": MEMORY_VERSION,
    }
    entry.update(entry_changes)
    if entry["packageVersion"] is None:
        del entry["packageVersion"]
    cache_path = tmp_path / "mcp-npx-cache.json"
    write_cache_entry(cache_path, inv(MEMORY_SPEC, MEMORY).cache_key, entry)

    result = await resolve_offline(
        "npx",
        ["-y", MEMORY_SPEC],
        npm_cache=tmp_path / "empty-npm-cache",
        cache_path=cache_path,
        cwd=project_dir(tmp_path),
        clock=lambda: T0_S + age_s,
    )

    expected = ResolvedCommand("node", (str(bin_path),), True, MEMORY, MEMORY_VERSION)
    assert (result == expected) is used
    assert result.resolved is used


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"{not json", id="not json"),
        pytest.param(b"\xff\xfe\x00garbage", id="binary"),
        pytest.param(b"[]", id="not an object"),
        pytest.param(b'{"version": 1, "entries": {}}', id="older format"),
        pytest.param(b'{"version": 2, "entries": []}', id="entries not an object"),
        pytest.param(
            b'{"version": 2, "entries": {"[\\"npx\\",\\"pkg\\",\\"\\"]": 5}}', id="bad entry"
        ),
    ],
)
async def test_an_unreadable_cache_file_is_ignored_and_rewritten(
    npm_cache: NpmCache, tmp_path: Path, content: bytes
) -> None:
    package_dir = npm_cache.install("pkg", bin="index.js")
    cache_path = tmp_path / "agent" / "mcp-npx-cache.json"
    cache_path.parent.mkdir()
    cache_path.write_bytes(content)

    result = await resolve_offline(
        "npx", ["-y", "pkg"], npm_cache=npm_cache.root, cache_path=cache_path, cwd=tmp_path
    )

    assert result.resolved
    document = json.loads(cache_path.read_text())
    assert document == {
        "version": 2,
        "entries": {
            '["npx","pkg",""]': {
                "resolvedBin": str((package_dir / "index.js").resolve()),
                "resolvedAt": int(T0_S * 1000),
                "isJs": True,
                "packageVersion": "1.0.0",
            }
        },
    }
    assert sorted(p.name for p in cache_path.parent.iterdir()) == ["mcp-npx-cache.json"]


async def test_writing_keeps_other_fresh_entries_and_drops_expired_ones(
    npm_cache: NpmCache, tmp_path: Path
) -> None:
    npm_cache.install("pkg", bin="index.js")
    cache_path = tmp_path / "mcp-npx-cache.json"
    fresh = {"resolvedBin": "/x", "resolvedAt": int(T0_S * 1000) - 1000, "isJs": False}
    stale = {"resolvedBin": "/y", "resolvedAt": 0, "isJs": False}
    cache_path.write_text(json.dumps({"version": 2, "entries": {"fresh": fresh, "stale": stale}}))

    await resolve_offline(
        "npx", ["-y", "pkg"], npm_cache=npm_cache.root, cache_path=cache_path, cwd=tmp_path
    )

    entries = json.loads(cache_path.read_text())["entries"]
    assert set(entries) == {"fresh", '["npx","pkg",""]'}
    assert entries["fresh"] == fresh


async def test_concurrent_resolutions_all_land_in_the_cache_file(
    npm_cache: NpmCache, tmp_path: Path
) -> None:
    names = [f"server-{i}" for i in range(12)]
    for name in names:
        npm_cache.install(name, bin="index.js")
    cache_path = tmp_path / "mcp-npx-cache.json"
    results: dict[str, ResolvedCommand] = {}

    async def resolve(name: str) -> None:
        results[name] = await resolve_offline(
            "npx", ["-y", name], npm_cache=npm_cache.root, cache_path=cache_path, cwd=tmp_path
        )

    async with anyio.create_task_group() as tg:
        for name in names:
            tg.start_soon(resolve, name)

    assert all(result.resolved for result in results.values())
    entries = json.loads(cache_path.read_text())["entries"]
    assert set(entries) == {f'["npx","{name}",""]' for name in names}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp-npx-cache.json", "npm-cache"]


async def test_the_cache_file_holds_no_environment_values(
    npm_cache: NpmCache, tmp_path: Path
) -> None:
    npm_cache.install("pkg", bin="index.js")
    cache_path = tmp_path / "mcp-npx-cache.json"

    result = await resolve_npx_command(
        "npx",
        ["-y", "pkg"],
        cache_path=cache_path,
        environ={"NPM_CONFIG_CACHE": str(npm_cache.root), "API_TOKEN": "s3cr3t-t0ken"},
        cwd=tmp_path,
        install_if_missing=False,
    )

    assert result.resolved
    assert "s3cr3t-t0ken" not in cache_path.read_text()


async def test_without_npm_and_without_an_install_the_command_is_kept(tmp_path: Path) -> None:
    with anyio.fail_after(10):
        result = await resolve_npx_command(
            "npx",
            ["-y", "some-server"],
            cache_path=tmp_path / "c.json",
            environ={"PATH": str(tmp_path / "no-bin-here"), "HOME": str(tmp_path)},
            cwd=tmp_path,
        )

    assert result == ResolvedCommand("npx", ("-y", "some-server"), resolved=False)
    assert not (tmp_path / "c.json").exists()


async def test_a_hanging_install_is_stopped_with_everything_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in npm that starts a child and hangs, as a stalled registry download would.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_npm = bin_dir / "npm"
    fake_npm.write_text('#!/bin/sh\nsleep 300 &\necho $! > "$CHILD_PID_FILE"\nwait\n')
    fake_npm.chmod(0o755)
    pid_file = tmp_path / "child.pid"
    monkeypatch.setattr(_npx, "_INSTALL_TIMEOUT_S", 1.0)

    with anyio.fail_after(20):
        result = await resolve_npx_command(
            "npx",
            ["-y", "some-server"],
            cache_path=tmp_path / "c.json",
            environ={
                "PATH": f"{bin_dir}{os.pathsep}{os.defpath}",
                "NPM_CONFIG_CACHE": str(tmp_path / "npm-cache"),
                "CHILD_PID_FILE": str(pid_file),
            },
            cwd=tmp_path,
        )

    assert not result.resolved
    child = psutil.Process(int(pid_file.read_text()))
    _, alive = psutil.wait_procs([child], timeout=5)
    assert alive == [] or child.status() == psutil.STATUS_ZOMBIE


# --- the project around the working directory --------------------------------------------------

needs_npm_project = pytest.mark.skipif(
    not (NPM_PROJECT / "node_modules" / MEMORY / "package.json").is_file(),
    reason="the npm test servers are not installed (run `npm ci` in tests/npm)",
)


@pytest.mark.npm
@needs_npm_project
@pytest.mark.parametrize(
    ("spec", "resolved"),
    [
        pytest.param(MEMORY, True, id="bare scoped name"),
        pytest.param(MEMORY_SPEC, True, id="matching exact version"),
        pytest.param("mcp-server-memory", True, id="bin name from node_modules/.bin"),
        pytest.param(f"{MEMORY}@2026.1.1", False, id="other exact version"),
        pytest.param(f"{MEMORY}@^2026.8.0", False, id="range needs the registry"),
    ],
)
async def test_a_package_installed_in_the_project_runs_from_there_for_the_projects_own_server(
    tmp_path: Path, spec: str, resolved: bool
) -> None:
    result = await resolve_offline(
        "npx",
        ["-y", spec, "--x"],
        npm_cache=tmp_path / "empty-npm-cache",
        cache_path=tmp_path / "c.json",
        cwd=NPM_PROJECT,
        project_code=True,
    )

    if resolved:
        entry = NPM_PROJECT / "node_modules" / MEMORY / "dist" / "index.js"
        assert result == ResolvedCommand(
            "node", (str(entry.resolve()), "--x"), True, MEMORY, MEMORY_VERSION
        )
    else:
        assert not result.resolved
    # Project lookups are cheap and depend on the directory, so they are never cached.
    assert not (tmp_path / "c.json").exists()


# --- against real npm --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def npm_executable() -> str:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("npm and node must be on PATH to test npx resolution against real npm")
    return npm


def npm_env(npm_cache: Path) -> dict[str, str]:
    return dict(os.environ, NPM_CONFIG_CACHE=str(npm_cache))


@pytest.fixture(scope="session")
def warm_npm_cache(npm_executable: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An npm cache in which `npx -y <server-memory>` has run once."""
    cache = tmp_path_factory.mktemp("warm-npm-cache")
    completed = subprocess.run(
        [npm_executable, "exec", "--yes", "--package", MEMORY_SPEC, "--", "node", "-e", "1"],
        env=npm_env(cache),
        cwd=tmp_path_factory.mktemp("npm-warmup-cwd"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    if completed.returncode != 0:
        pytest.skip(f"npm could not install {MEMORY_SPEC}: {completed.stderr[-500:]}")
    return cache


async def resolve_real(
    args: list[str],
    *,
    npm_cache: Path,
    cache_path: Path,
    cwd: Path,
    command: str = "npx",
    install_if_missing: bool = False,
    clock: Callable[[], float] = lambda: T0_S,
) -> ResolvedCommand:
    with anyio.fail_after(60):
        return await resolve_npx_command(
            command,
            args,
            cache_path=cache_path,
            environ=npm_env(npm_cache),
            cwd=cwd,
            install_if_missing=install_if_missing,
            clock=clock,
        )


@pytest.mark.parametrize(
    ("command", "args", "bin_args"),
    [
        pytest.param("npx", ["-y", MEMORY_SPEC, "--flag"], ("--flag",), id="npx pinned"),
        pytest.param("npx", [MEMORY], (), id="npx bare name"),
        pytest.param(
            "npm",
            ["exec", "--yes", f"--package={MEMORY}", "--", "mcp-server-memory", "a"],
            ("a",),
            id="npm exec with explicit bin",
        ),
    ],
)
@pytest.mark.slow
@pytest.mark.npm
async def test_a_warm_npx_command_resolves_to_node_and_the_package_entry_point(
    warm_npm_cache: Path, tmp_path: Path, command: str, args: list[str], bin_args: tuple[str, ...]
) -> None:
    result = await resolve_real(
        args,
        command=command,
        npm_cache=warm_npm_cache,
        cache_path=tmp_path / "c.json",
        cwd=tmp_path,
    )

    assert result.command == "node"
    entry = Path(result.args[0])
    assert entry.parts[-2:] == ("dist", "index.js")
    assert entry.is_relative_to(warm_npm_cache / "_npx")
    assert result.args[1:] == bin_args
    assert (result.resolved, result.package, result.version) == (True, MEMORY, MEMORY_VERSION)


@pytest.mark.slow
@pytest.mark.npm
async def test_the_resolved_command_starts_a_working_mcp_server(
    warm_npm_cache: Path, tmp_path: Path
) -> None:
    result = await resolve_real(
        ["-y", MEMORY_SPEC],
        npm_cache=warm_npm_cache,
        cache_path=tmp_path / "c.json",
        cwd=tmp_path,
    )
    params = StdioServerParameters(
        command=result.command,
        args=list(result.args),
        env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
        cwd=tmp_path,
    )

    with anyio.fail_after(30):
        async with Client(stdio_client(params), mode="legacy", cache=None) as client:
            listed = await client.list_tools()

    assert {"create_entities", "read_graph"} <= {tool.name for tool in listed.tools}


@pytest.mark.slow
@pytest.mark.npm
async def test_a_second_resolution_is_served_from_the_cache_file(
    warm_npm_cache: Path, tmp_path: Path
) -> None:
    cache_path = tmp_path / "agent" / "mcp-npx-cache.json"
    first = await resolve_real(
        ["-y", MEMORY_SPEC], npm_cache=warm_npm_cache, cache_path=cache_path, cwd=tmp_path
    )

    # An empty npm cache and no installs: only the cache file can answer now.
    second = await resolve_real(
        ["-y", MEMORY_SPEC], npm_cache=tmp_path / "empty", cache_path=cache_path, cwd=tmp_path
    )

    assert first.resolved
    assert second == first
    entries = json.loads(cache_path.read_text())["entries"]
    assert entries[f'["npx","{MEMORY_SPEC}",""]']["resolvedBin"] == first.args[0]


@pytest.mark.parametrize(
    ("later_s", "still_cached"),
    [
        pytest.param(NPX_CACHE_TTL_S - 1, True, id="within a day"),
        pytest.param(NPX_CACHE_TTL_S + 1, False, id="after a day"),
    ],
)
@pytest.mark.slow
@pytest.mark.npm
async def test_cached_resolutions_expire_after_a_day(
    warm_npm_cache: Path, tmp_path: Path, later_s: float, still_cached: bool
) -> None:
    cache_path = tmp_path / "mcp-npx-cache.json"
    await resolve_real(
        ["-y", MEMORY_SPEC], npm_cache=warm_npm_cache, cache_path=cache_path, cwd=tmp_path
    )

    later = await resolve_real(
        ["-y", MEMORY_SPEC],
        npm_cache=tmp_path / "empty",
        cache_path=cache_path,
        cwd=tmp_path,
        clock=lambda: T0_S + later_s,
    )

    assert later.resolved is still_cached


@pytest.mark.slow
@pytest.mark.npm
async def test_a_cached_bin_that_disappeared_is_resolved_again(
    warm_npm_cache: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copied-npm-cache"
    shutil.copytree(warm_npm_cache / "_npx", copy / "_npx", symlinks=True)
    cache_path = tmp_path / "mcp-npx-cache.json"
    from_copy = await resolve_real(
        ["-y", MEMORY_SPEC], npm_cache=copy, cache_path=cache_path, cwd=tmp_path
    )
    shutil.rmtree(copy)

    again = await resolve_real(
        ["-y", MEMORY_SPEC], npm_cache=warm_npm_cache, cache_path=cache_path, cwd=tmp_path
    )

    assert Path(from_copy.args[0]).is_relative_to(copy)
    assert again.resolved
    assert Path(again.args[0]).is_relative_to(warm_npm_cache)
    entries = json.loads(cache_path.read_text())["entries"]
    assert entries[f'["npx","{MEMORY_SPEC}",""]']["resolvedBin"] == again.args[0]


@pytest.mark.slow
@pytest.mark.npm
async def test_a_package_missing_from_the_npx_cache_is_installed_then_resolved(
    npm_executable: str, tmp_path: Path
) -> None:
    fresh = tmp_path / "fresh-npm-cache"
    spec = f"{MEMORY}@^{MEMORY_VERSION}"

    result = await resolve_real(
        ["-y", spec],
        npm_cache=fresh,
        cache_path=tmp_path / "c.json",
        cwd=tmp_path,
        install_if_missing=True,
    )

    assert result.resolved
    assert result.command == "node"
    assert Path(result.args[0]).is_relative_to(fresh / "_npx")
    assert result.version is not None
    assert result.version.split(".")[0] == MEMORY_VERSION.split(".")[0]


@pytest.mark.slow
@pytest.mark.npm
async def test_a_package_npm_cannot_install_keeps_the_original_command(
    npm_executable: str, tmp_path: Path
) -> None:
    args = ["-y", "@pi-mcp-adapter-tests/no-such-package-4f2c9e1b", "--x"]

    result = await resolve_real(
        args,
        npm_cache=tmp_path / "npm-cache",
        cache_path=tmp_path / "c.json",
        cwd=tmp_path,
        install_if_missing=True,
    )

    assert result == ResolvedCommand("npx", tuple(args), resolved=False)
    assert not (tmp_path / "c.json").exists()
