from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter._secrets import forget_secrets

# Every `pi-mcp` a test starts inherits this: a warm process started on first use would outlive
# the test (the tests of that process turn it back on).
os.environ["PI_MCP_WARM"] = "0"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _forget_registered_secrets() -> Iterator[None]:
    # The registry is process-wide by design; one test's configured values must not redact
    # another test's output.
    yield
    forget_secrets()


REFERENCE_ENV = "PI_MCP_REFERENCE_DIR"
"""Where the TypeScript reference (``npm pack pi-mcp-adapter@2.36.0``, unpacked, with its
dependencies installed) lives; tests that compare with it are skipped without it."""
_REFERENCE_RUNNER = Path(__file__).parent / "reference_js.mjs"


class ReferenceJs:
    """Calls functions of the reference's compiled modules with node (``reference_js.mjs``)."""

    def __init__(self, ref: Path, node: str) -> None:
        self.ref = ref
        self._node = node

    def call(
        self,
        module: str,
        function: str,
        calls: Sequence[Sequence[object]],
        *,
        env: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """One ``{"value": ...}`` or ``{"error": ...}`` (and its ``warnings``) per call."""
        request = {"ref": str(self.ref), "module": module, "function": function, "calls": calls}
        completed = subprocess.run(
            [self._node, str(_REFERENCE_RUNNER)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            timeout=60,
            check=False,
        )
        if completed.returncode != 0:
            pytest.fail(f"the reference runner failed: {completed.stderr[-2000:]}")
        results: list[dict[str, Any]] = json.loads(completed.stdout)
        return results


@pytest.fixture(scope="session")
def reference_js() -> ReferenceJs:
    """The TypeScript reference's own functions, or a skip when it is not installed.

    Set ``PI_MCP_REFERENCE_DIR`` to the unpacked package (``/tmp/package`` is tried too), with
    its dependencies installed (``npm install --ignore-scripts`` after dropping the dev and
    peer dependencies from its package.json).
    """
    candidates = [os.environ.get(REFERENCE_ENV, ""), "/tmp/package"]
    node = shutil.which("node")
    for candidate in filter(None, candidates):
        ref = Path(candidate)
        manifest = ref / "package.json"
        if not manifest.is_file() or not (ref / "node_modules").is_dir():
            continue
        try:
            name = json.loads(manifest.read_text(encoding="utf-8")).get("name")
        except (OSError, ValueError):
            continue
        if name == "pi-mcp-adapter" and node is not None:
            return ReferenceJs(ref, node)
    pytest.skip(f"the TypeScript reference is not installed (set {REFERENCE_ENV})")
