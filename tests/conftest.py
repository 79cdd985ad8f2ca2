from __future__ import annotations

from collections.abc import Iterator

import pytest

from pi_mcp_adapter._secrets import forget_secrets


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _forget_registered_secrets() -> Iterator[None]:
    # The registry is process-wide by design; one test's configured values must not redact
    # another test's output.
    yield
    forget_secrets()
