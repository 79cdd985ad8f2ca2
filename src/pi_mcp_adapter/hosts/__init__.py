"""Host bindings: adapters from the host protocol to concrete hosts."""

from __future__ import annotations

from ._export import ExportHost, to_provider_shape

__all__ = ["ExportHost", "to_provider_shape"]
