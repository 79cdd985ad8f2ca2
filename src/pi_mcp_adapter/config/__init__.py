"""Where configuration comes from: files, precedence, merge, host imports, interpolation.

``load_config`` reads every layer and the host imports they list and returns a
:class:`LoadedConfig`; it never raises for bad configuration, it reports it. ``files_digest``
and ``inputs_digest`` (with a ``RecordingEnviron`` noting the variables a load reads) tell
whether loading again would give the same configuration. ``mask_secrets`` makes an entry
safe to show. ``discover_host_configs``, ``plan_imports_change`` and
``apply_imports_change`` implement ``pi-mcp init``.
"""

from __future__ import annotations

from ._init import (
    HostConfig,
    ImportsChange,
    apply_imports_change,
    discover_host_configs,
    plan_imports_change,
)
from ._inputs import RecordingEnviron, files_digest, inputs_digest
from ._loader import ConfigSource, LoadedConfig, ServerProvenance, SourceStatus, load_config
from ._locations import IMPORT_KINDS, ImportKind
from ._masking import MASK, is_pem_text, mask_secrets
from ._merge import DroppedFields, LayerContribution
from ._models import ServerEntry, Settings, TelemetrySettings

__all__ = [
    "IMPORT_KINDS",
    "MASK",
    "ConfigSource",
    "DroppedFields",
    "HostConfig",
    "ImportKind",
    "ImportsChange",
    "LayerContribution",
    "LoadedConfig",
    "RecordingEnviron",
    "ServerEntry",
    "ServerProvenance",
    "Settings",
    "SourceStatus",
    "TelemetrySettings",
    "apply_imports_change",
    "discover_host_configs",
    "files_digest",
    "inputs_digest",
    "is_pem_text",
    "load_config",
    "mask_secrets",
    "plan_imports_change",
]
