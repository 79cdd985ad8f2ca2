"""What the adapter knows about one tool, independent of any live connection."""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

JsonSchema = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One tool as the model sees it.

    ``name`` is the prefixed, sanitised, unique name the model calls; ``original_name`` is the
    server's own name, used on the wire. ``resource_uri`` is set for MCP resources exposed as
    tools (calling one reads the resource).
    """

    name: str
    original_name: str
    server: str
    description: str = ""
    input_schema: JsonSchema = field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: JsonSchema | None = None
    annotations: Mapping[str, Any] | None = None
    meta: Mapping[str, Any] | None = None
    """The server's ``_meta`` for the tool (MCP Apps' ``ui`` among others), passed on as is."""
    resource_uri: str | None = None
    keywords: tuple[str, ...] = ()
    """Extra words from the server's ``searchKeywords``: searched like the description, never
    shown to the model nor cached."""

    @property
    def is_resource(self) -> bool:
        return self.resource_uri is not None


JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ServerMetadata:
    """Everything one server exposes, in the JSON wire shape the metadata cache stores.

    ``tools`` are dicts with ``name`` and optionally ``description``, ``inputSchema``,
    ``outputSchema``, ``annotations``; ``resources`` have ``uri``, ``name`` and optionally
    ``description``/``mimeType``; ``prompts`` have ``name`` and optionally ``description`` and
    ``arguments``. Keeping the wire shape makes cache round trips lossless and lets a cache
    written by the TypeScript reference be read as is.
    """

    tools: tuple[JsonObject, ...] = ()
    resources: tuple[JsonObject, ...] = ()
    prompts: tuple[JsonObject, ...] = ()
    instructions: str | None = None

    @classmethod
    def from_mcp(
        cls,
        tools: Sequence[Any],
        resources: Sequence[Any] = (),
        prompts: Sequence[Any] = (),
        instructions: str | None = None,
    ) -> ServerMetadata:
        """Build from the SDK's pydantic wire models (``mcp.types.Tool`` and friends)."""

        def dump(item: Any) -> JsonObject:
            data: JsonObject = item.model_dump(by_alias=True, exclude_none=True, mode="json")
            return data

        return cls(
            tools=tuple(dump(t) for t in tools),
            resources=tuple(dump(r) for r in resources),
            prompts=tuple(dump(p) for p in prompts),
            instructions=instructions,
        )


class SchemaSource(Protocol):
    """Where the schemas of a cached listing's tools are read when first asked for."""

    def tool_schemas(
        self, server: str, digest: str, tool: str
    ) -> tuple[JsonSchema | None, JsonSchema | None]:
        """``tool``'s ``(inputSchema, outputSchema)`` in ``server``'s cached entry."""
        ...


@dataclass(frozen=True, slots=True)
class DeferredSchemas:
    """The schemas of one server's cached tools, read from its entry on demand; ``digest``
    identifies the entry's tools (schemas included) as stored."""

    source: SchemaSource
    server: str
    digest: str


@dataclass(frozen=True, slots=True)
class CachedListing(ServerMetadata):
    """A server's metadata read from the metadata store's listing: its tools lack their
    ``inputSchema`` and ``outputSchema``, which ``schemas`` reads on demand. What opening a
    large catalog parses (a third of the entries); never stored back (its tools are not the
    server's whole definitions)."""

    schemas: DeferredSchemas | None = None


DEFAULT_INPUT_SCHEMA: JsonSchema = {"type": "object", "properties": {}}
_INPUT_SLOT = ToolInfo.__dict__["input_schema"]
_OUTPUT_SLOT = ToolInfo.__dict__["output_schema"]
_FIELD_NAMES = tuple(f.name for f in fields(ToolInfo))


SCHEMA_DIGEST_KEY = "inputSchemaDigest"
"""Where a cached listing's tool carries :func:`schema_digest` of the schema it lacks."""


def schema_digest(schema: Any) -> str | None:
    """A hash of an input schema as a tool gets it (not an object: the default one), the
    same from a live listing and from the store; ``None`` for one that is not plain data."""
    effective: Any = schema if isinstance(schema, Mapping) else DEFAULT_INPUT_SCHEMA
    try:
        # Version 2: no references to repeated objects, so equal schemas give equal bytes.
        data = marshal.dumps(effective, 2)
    except ValueError:
        return None
    return hashlib.blake2b(data, digest_size=16).hexdigest()


class StoredToolInfo(ToolInfo):
    """A tool of a :class:`CachedListing`: its schemas are read from its server's cached
    entry each time they are asked for (recently read entries are kept by the source), so a
    process holding 95,000 cached tools holds none of their schemas. Behaves as the
    :class:`ToolInfo` with those schemas: equal to it, and copied or pickled as one."""

    __slots__ = ("schema_digest", "schemas")
    schemas: DeferredSchemas | None
    schema_digest: str | None
    """:func:`schema_digest` of the input schema, as the store recorded it."""

    def __init__(
        self,
        *args: Any,
        schemas: DeferredSchemas | None = None,
        schema_digest: str | None = None,
        **kwargs: Any,
    ) -> None:
        object.__setattr__(self, "schemas", schemas)
        object.__setattr__(self, "schema_digest", schema_digest if schemas is not None else None)
        ToolInfo.__init__(self, *args, **kwargs)

    @property
    def input_schema(self) -> JsonSchema:
        schemas = self.schemas
        if schemas is None:
            value: JsonSchema = _INPUT_SLOT.__get__(self)
            return value
        found = schemas.source.tool_schemas(schemas.server, schemas.digest, self.original_name)[0]
        return found if found is not None else DEFAULT_INPUT_SCHEMA

    @input_schema.setter
    def input_schema(self, value: JsonSchema) -> None:
        _INPUT_SLOT.__set__(self, value)

    @property
    def output_schema(self) -> JsonSchema | None:
        schemas = self.schemas
        if schemas is None:
            value: JsonSchema | None = _OUTPUT_SLOT.__get__(self)
            return value
        return schemas.source.tool_schemas(schemas.server, schemas.digest, self.original_name)[1]

    @output_schema.setter
    def output_schema(self, value: JsonSchema | None) -> None:
        _OUTPUT_SLOT.__set__(self, value)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FIELD_NAMES)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolInfo):
            return NotImplemented
        return self._fields() == tuple(getattr(other, name) for name in _FIELD_NAMES)

    __hash__ = ToolInfo.__hash__

    def __reduce__(self) -> tuple[Any, ...]:
        return (ToolInfo, self._fields())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELD_NAMES)
        return f"ToolInfo({shown})"


def _slot_setter(owner: type, name: str) -> Callable[[object, Any], None]:
    setter: Callable[[object, Any], None] = owner.__dict__[name].__set__
    return setter


_SET_NAME = _slot_setter(ToolInfo, "name")
_SET_ORIGINAL_NAME = _slot_setter(ToolInfo, "original_name")
_SET_SERVER = _slot_setter(ToolInfo, "server")
_SET_DESCRIPTION = _slot_setter(ToolInfo, "description")
_SET_INPUT_SCHEMA = _slot_setter(ToolInfo, "input_schema")
_SET_OUTPUT_SCHEMA = _slot_setter(ToolInfo, "output_schema")
_SET_ANNOTATIONS = _slot_setter(ToolInfo, "annotations")
_SET_META = _slot_setter(ToolInfo, "meta")
_SET_RESOURCE_URI = _slot_setter(ToolInfo, "resource_uri")
_SET_KEYWORDS = _slot_setter(ToolInfo, "keywords")
_SET_SCHEMAS = _slot_setter(StoredToolInfo, "schemas")
_SET_SCHEMA_DIGEST = _slot_setter(StoredToolInfo, "schema_digest")
_new_object = object.__new__


def stored_tool_info(
    name: str,
    original_name: str,
    server: str,
    description: str,
    annotations: Mapping[str, Any] | None,
    meta: Mapping[str, Any] | None,
    schemas: DeferredSchemas,
    schema_digest: str | None,
) -> StoredToolInfo:
    """``StoredToolInfo(...)`` of a cached listing's tool, built a quarter as slowly: a large
    catalog's build makes one per tool (95,000), and the frozen dataclass's ``__init__``
    (keyword packing, a setter property per schema, ``object.__setattr__`` per field) was
    half of that build. Every slot is set, as ``__init__`` sets it."""
    tool: StoredToolInfo = _new_object(StoredToolInfo)
    _SET_SCHEMAS(tool, schemas)
    _SET_SCHEMA_DIGEST(tool, schema_digest)
    _SET_NAME(tool, name)
    _SET_ORIGINAL_NAME(tool, original_name)
    _SET_SERVER(tool, server)
    _SET_DESCRIPTION(tool, description)
    _SET_INPUT_SCHEMA(tool, DEFAULT_INPUT_SCHEMA)  # one shared object: the slot is not read
    _SET_OUTPUT_SCHEMA(tool, None)
    _SET_ANNOTATIONS(tool, annotations)
    _SET_META(tool, meta)
    _SET_RESOURCE_URI(tool, None)
    _SET_KEYWORDS(tool, ())
    return tool
