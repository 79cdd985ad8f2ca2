#!/usr/bin/env bash
# FastMCP 4.1.6, the peer the gateway benchmark compares against, in its own environment
# (bench/.venv-fastmcp), never in the project's. Its `fastmcp-slim[server]` extra pins a certifi
# newer than some package indexes carry, so the server extra's dependencies are installed by
# hand and fastmcp itself without dependencies.
set -euo pipefail
cd "$(dirname "$0")"
PY="${PY:-python3}"
if [ -x .venv-fastmcp/bin/python ] && .venv-fastmcp/bin/python -c "import fastmcp" 2>/dev/null; then
    exit 0
fi
"$PY" -m venv .venv-fastmcp
.venv-fastmcp/bin/pip install --quiet --upgrade pip
.venv-fastmcp/bin/pip install --quiet "fastmcp-slim[client]==4.1.6"
.venv-fastmcp/bin/pip install --quiet authlib cyclopts exceptiongroup griffelib httpx2 joserfc \
    jsonref jsonschema-path "mcp>=2.3,<3" openapi-pydantic opentelemetry-api packaging \
    "py-key-value-aio[filetree,memory]>=0.4.4,<0.5" pyperclip python-multipart pyyaml \
    starlette uncalled-for uvicorn watchfiles websockets
.venv-fastmcp/bin/pip install --quiet --no-deps fastmcp==4.1.6
.venv-fastmcp/bin/python -c "import fastmcp; print('fastmcp', fastmcp.__version__)"
