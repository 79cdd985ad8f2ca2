"""An application with OpenTelemetry of its own that runs an agent over MCP tools; it prints
the spans and metric names it recorded as JSON. Run as a process of its own: a program
installs its tracer and meter providers once, before the adapter starts, as a real one does.

Usage: python telemetry_app.py pydantic-ai|openai-agents AGENT_DIR PROJECT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SEARCH = {"search": "echo a message"}
CALL = {"tool": "fx_echo", "args": {"message": "private words"}}


def span_row(span: ReadableSpan) -> dict[str, Any]:
    return {
        "name": span.name,
        "scope": span.instrumentation_scope.name if span.instrumentation_scope else "",
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "attributes": {k: str(v) for k, v in (span.attributes or {}).items()},
    }


async def run_pydantic_ai(agent_dir: Path, project_dir: Path) -> str:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    from pi_mcp_adapter.hosts.pydantic_ai import McpCapability

    # pydantic-ai's own OpenTelemetry instrumentation, on the global providers.
    Agent.instrument_all(InstrumentationSettings())
    replies: list[ModelResponse] = [
        ModelResponse(parts=[ToolCallPart("mcp", CALL, tool_call_id="c1")]),
        ModelResponse(parts=[TextPart("done")]),
    ]

    def model(_messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        return replies.pop(0)

    async with McpCapability.open(agent_dir=agent_dir, project_dir=project_dir) as mcp:
        agent = Agent(FunctionModel(model), capabilities=[mcp], name="assistant")
        result = await agent.run("echo something")
    return str(result.output)


async def run_openai_agents(agent_dir: Path, project_dir: Path) -> str:
    from agents import Agent, Runner, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    from pi_mcp_adapter.hosts.openai_agents import McpTools

    # The Agents SDK's tracing is its own (it would send it to OpenAI): off. The application
    # runs the agent inside a span of its own, as a web handler does.
    set_tracing_disabled(True)
    model = ScriptedModel(
        [
            [function_call("mcp", CALL, call_id="call_1")],
            [assistant_message("done")],
        ]
    )
    tracer = trace.get_tracer("the-application")
    async with McpTools.open(agent_dir=agent_dir, project_dir=project_dir) as mcp:
        agent = Agent(name="assistant", model=model, tools=mcp.tools)
        with tracer.start_as_current_span("handle request"):
            result = await Runner.run(agent, "echo something")
    return str(result.final_output)


def main() -> None:
    host, agent_dir, project_dir = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    runner = run_pydantic_ai if host == "pydantic-ai" else run_openai_agents
    output = anyio.run(runner, agent_dir, project_dir)
    data = reader.get_metrics_data()
    recorded: dict[str, list[dict[str, str]]] = {}
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                points = getattr(metric.data, "data_points", ())
                recorded[metric.name] = [
                    {k: str(v) for k, v in (p.attributes or {}).items()} for p in points
                ]
    rows = [span_row(s) for s in spans.get_finished_spans()]
    print(json.dumps({"output": output, "spans": rows, "metrics": recorded}))


if __name__ == "__main__":
    main()
