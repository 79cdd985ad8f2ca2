"""The engine stands below every surface: importing it loads no surface or host module."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import sys
import pi_mcp_adapter.engine
loaded = sorted(m for m in sys.modules if m.startswith(("pi_mcp_adapter.surface",
                                                       "pi_mcp_adapter.hosts",
                                                       "pi_mcp_adapter.cli")))
print(",".join(loaded))
"""


def test_importing_the_engine_loads_no_surface_host_or_cli_module() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == ""


SRC = Path(__file__).resolve().parents[2] / "src" / "pi_mcp_adapter"
HIGHER = {
    "config": ("servers", "catalog", "engine", "surface", "hosts", "cli"),
    # servers and catalog sit side by side; servers builds the catalog's ServerMetadata values.
    "servers": ("engine", "surface", "hosts", "cli"),
    "catalog": ("servers", "engine", "surface", "hosts", "cli"),
    "engine": ("surface", "hosts", "cli"),
    "surface": ("hosts", "cli"),
}


def _imported_layers(path: Path) -> set[str]:
    """The top-level subpackages of pi_mcp_adapter that one module imports."""
    layers: set[str] = set()
    package = path.relative_to(SRC).parts[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
                parts = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("pi_mcp_adapter."):
                parts = node.module.split(".")[1:]
            else:
                continue
            if parts:
                layers.add(parts[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pi_mcp_adapter."):
                    layers.add(alias.name.split(".")[1])
    return layers


@pytest.mark.parametrize("layer", sorted(HIGHER))
def test_lower_layers_never_import_a_higher_one(layer: str) -> None:
    offending = {
        str(path.relative_to(SRC)): sorted(_imported_layers(path) & set(HIGHER[layer]))
        for path in (SRC / layer).rglob("*.py")
    }
    assert {k: v for k, v in offending.items() if v} == {}


def _private_imports(path: Path) -> list[tuple[str, str, list[str]]]:
    """``(package, module, names)`` for each import of another package's private module."""
    found: list[tuple[str, str, list[str]]] = []
    package = path.relative_to(SRC).parts[:-1]
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = list(package[: len(package) - node.level + 1])
            parts = base + (node.module.split(".") if node.module else [])
        elif node.module and node.module.startswith("pi_mcp_adapter."):
            parts = node.module.split(".")[1:]
        else:
            continue
        if len(parts) < 2 or not parts[1].startswith("_"):
            continue
        if package and parts[0] == package[0]:
            continue  # a package's own modules
        found.append((parts[0], ".".join(parts), [alias.name for alias in node.names]))
    return found


def test_no_module_reaches_into_a_private_module_for_a_name_the_face_exports() -> None:
    faces = {
        package: set(importlib.import_module(f"pi_mcp_adapter.{package}").__all__)
        for package in ("config", "servers", "catalog", "engine", "surface", "hosts")
    }
    offending = {}
    for path in SRC.rglob("*.py"):
        for package, module, names in _private_imports(path):
            exported = sorted(set(names) & faces.get(package, set()))
            if exported:
                offending[f"{path.relative_to(SRC)}: {module}"] = exported
    assert offending == {}


def test_hosts_and_the_cli_never_import_server_or_catalog_internals() -> None:
    offending = {
        f"{path.relative_to(SRC)}: {module}"
        for layer in ("hosts", "cli")
        for path in (SRC / layer).rglob("*.py")
        for package, module, _ in _private_imports(path)
        if package in ("servers", "catalog")
    }
    assert offending == set()


def test_only_the_entry_point_stands_on_the_launcher() -> None:
    # ``_launch`` hands commands to the CLI, so it stands above it; what the CLI, the warm
    # process and the pool client share with it lives in ``_warm`` below them all.
    importers = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if "_launch" in _imported_modules(path) and path.name != "_launch.py"
    }
    assert importers == {"__main__.py"}


def _imported_modules(path: Path) -> set[str]:
    """The modules directly under pi_mcp_adapter that one module imports by name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "pi_mcp_adapter":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("pi_mcp_adapter."):
                found.add(node.module.split(".")[1])
    return found
