from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_mcp_adapter.config import load_config

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)
field_names = st.sampled_from(
    [
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "headers",
        "auth",
        "bearerToken",
        "lifecycle",
        "idleTimeout",
        "directTools",
        "includeTools",
        "enabled",
        "disabled",
        "oauth",
        "x",
    ]
)
entries = st.dictionaries(field_names, json_values, max_size=5) | json_values
documents = st.fixed_dictionaries(
    {},
    optional={
        "mcpServers": st.dictionaries(st.text(max_size=4), entries, max_size=3) | json_values,
        "settings": st.dictionaries(
            st.sampled_from(["idleTimeout", "toolPrefix", "captureStats", "y"]), json_values
        )
        | json_values,
        "imports": st.lists(st.sampled_from(["cursor", "codex", "nope"]) | json_values, max_size=3)
        | json_values,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent=documents, project=documents, cursor=documents)
def test_loading_never_raises_whatever_the_files_contain(
    agent: dict[str, object], project: dict[str, object], cursor: dict[str, object]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = {
            root / "agent" / "mcp.json": agent,
            # The project file always imports cursor, so the host reader sees every shape too.
            root / "project" / ".mcp.json": {**project, "imports": ["cursor"]},
            root / "home" / ".cursor" / "mcp.json": {"mcpServers": cursor.get("mcpServers")},
        }
        for path, content in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(content))
        config = load_config(
            agent_dir=root / "agent",
            project_dir=root / "project",
            home=root / "home",
            environ={},
            platform="linux",
        )
        for name, entry in config.servers.items():
            assert (entry.command is None) != (entry.url is None), name
        assert not set(config.servers) & set(config.invalid_servers)
