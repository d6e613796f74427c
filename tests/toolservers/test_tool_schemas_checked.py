"""A tool server's tool whose input schema an LLM API would refuse is not offered: the
providers refuse a whole request for one such tool ("Invalid schema for function …"),
so a single sloppy tool of a third-party server failed every call of every agent it is
attached to. The tool is listed with why it is not offered (``notOffered``); the others
are offered as before. The check is made once per schema, not per item."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from markus.toolservers import offered as offered_module
from markus.toolservers.models import ServerState, ToolServer
from markus.toolservers.offered import provide
from markus.toolservers.services import listed_tools

pytestmark = pytest.mark.django_db

GOOD = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
LISTED = [
    {"name": "read", "inputSchema": GOOD},
    {"name": "untyped", "inputSchema": {"properties": {"path": {"type": "string"}}}},
    {"name": "draft3", "inputSchema": {"type": "object", "properties": {"path": {"type": "string", "required": True}}}},
    {"name": "misspelt", "inputSchema": {"type": "objet", "properties": {}}},
    {"name": "bad name!", "inputSchema": GOOD},
]


@pytest.fixture
def server(agent) -> ToolServer:
    server = ToolServer.objects.create(
        name="files", transport="stdio", command="mcp-server-files", tools=LISTED, state=ServerState.READY
    )
    server.agents.add(agent)
    return server


def test_only_tools_whose_schema_an_llm_api_accepts_are_offered(agent, server):
    assert [t.name for t in provide(agent.id, "chat", stored=True)] == ["files__read"]


def test_a_tool_not_offered_is_listed_with_why(server, django_user_model):
    rows = {row["name"]: row for row in listed_tools(server)}
    assert rows["read"]["notOffered"] == "" and rows["read"]["offeredAs"] == "files__read"
    assert rows["untyped"]["notOffered"] == 'its input schema is not of "type": "object"'
    assert rows["draft3"]["notOffered"].startswith("its input schema is not a JSON Schema: True is not of type 'array'")
    assert rows["misspelt"]["notOffered"] == 'its input schema is not of "type": "object"'
    assert rows["bad name!"]["notOffered"].startswith("its name files__bad name! is not one an LLM API accepts")
    staff = APIClient()
    staff.force_authenticate(django_user_model.objects.create_user("root", is_staff=True))
    listed = staff.get("/api/tool-servers/files/").json()["tools"]
    assert [t["name"] for t in listed if not t["notOffered"]] == ["read"]


def test_each_schema_is_checked_once(agent, server):
    offered_module.schema_problem.cache_clear()
    for _ in range(3):
        provide(agent.id, "chat", stored=True)
    assert offered_module.schema_problem.cache_info().misses == 4  # the four schemas, the shared one once
