"""A stdio MCP server with the result shapes the surface must convert.

Run as ``python workbench_server.py``. Tools:

- ``echo(message)`` -> ``"Echo: <message>"``
- ``add(a, b)`` -> the sum as text
- ``big_output(lines, width)`` -> ``lines`` lines of ``width`` characters (output guard tests)
- ``records(count)`` -> a JSON array of uniform objects as text (TOON tests)
- ``pixel()`` -> a 1x1 PNG image
- ``fail(message)`` -> a tool error (``isError``) carrying ``message``
- ``book_flight(origin, destination, passengers, cabin)`` -> a confirmation; a schema with
  required fields, an enum and an integer minimum (argument validation tests)

Resource ``notes://readme`` (name ``readme``) holds a short text. Prompt ``greet(name,
style="plain")`` renders a user message and an assistant reply. The server sends instructions.
"""

from __future__ import annotations

import base64
import json
from typing import Literal

from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, UserMessage
from pydantic import Field

PNG_1X1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer(
    "workbench",
    instructions="Workbench server for tests. Use echo to check connectivity.",
)


@server.tool(description="Echo a message back, prefixed with 'Echo: '.")
def echo(message: str) -> str:
    return f"Echo: {message}"


@server.tool(description="Add two integers and return the sum.")
def add(a: int, b: int) -> str:
    return str(a + b)


@server.tool(description="Produce many lines of text, to exercise output limits.")
def big_output(lines: int = 5000, width: int = 40) -> str:
    return "\n".join(f"{i:06d} " + "x" * width for i in range(lines))


@server.tool(description="Return a JSON array of uniform records as text.")
def records(count: int = 20) -> str:
    rows = [
        {"id": i, "name": f"item-{i}", "price": i * 1.5, "active": i % 2 == 0} for i in range(count)
    ]
    return json.dumps(rows, indent=2)


@server.tool(description="Return a one-pixel PNG image.")
def pixel() -> Image:
    return Image(data=PNG_1X1, format="png")


@server.tool(description="Always fail with the given message.")
def fail(message: str) -> str:
    raise ToolError(message)


@server.tool(description="Book a flight between two airports.")
def book_flight(
    origin: str = Field(description="IATA code of the departure airport"),
    destination: str = Field(description="IATA code of the arrival airport"),
    passengers: int = Field(default=1, ge=1, le=9, description="Number of travellers"),
    cabin: Literal["economy", "business", "first"] = "economy",
) -> str:
    return f"Booked {passengers} {cabin} seat(s) {origin}->{destination}"


@server.resource(
    "notes://readme", name="readme", description="Project readme", mime_type="text/plain"
)
def readme() -> str:
    return "Workbench readme: hello from a resource."


@server.prompt(description="Greet someone by name.")
def greet(name: str, style: str = "plain") -> list[Message]:
    return [
        UserMessage(f"Please greet {name} in a {style} style."),
        AssistantMessage(f"Hello, {name}!"),
    ]


if __name__ == "__main__":
    server.run("stdio")
