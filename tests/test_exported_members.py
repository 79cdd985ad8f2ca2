from __future__ import annotations

import pi_mcp_adapter


def test_all_lists_exactly_the_public_names_sorted() -> None:
    public = {name for name in dir(pi_mcp_adapter) if not name.startswith("_")}
    public.discard("annotations")  # the __future__ import
    exported = set(pi_mcp_adapter.__all__) - {"__version__"}
    # Subpackages are importable attributes but not part of the flat API.
    public -= {"catalog", "config", "servers", "engine", "surface", "hosts", "cli"}
    assert exported == public
    assert list(pi_mcp_adapter.__all__) == sorted(pi_mcp_adapter.__all__)
