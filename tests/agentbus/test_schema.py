"""The AgentBus in the OpenAPI schema, async views included (through the hook)."""

from __future__ import annotations

from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

from agentbus.schema import document_async_views


def test_the_async_views_are_documented_and_the_schema_stays_valid():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    schema = document_async_views(schema, None, None, True)
    validate_schema(schema)
    paths = schema["paths"]
    assert "get" in paths["/api/agents/{agent_id}/agentbus/inbox"]
    assert "post" in paths["/api/agentbus/request"]
    assert any(p.startswith("/api/agentbus/streams") for p in paths)
