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
from markus.toolservers.offered import TOOL_DESCRIPTION_CHARS, provide
from markus.toolservers.services import listed_tools

pytestmark = pytest.mark.django_db

GOOD = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
LISTED = [
    {"name": "read", "inputSchema": GOOD},
    {"name": "untyped", "inputSchema": {"properties": {"path": {"type": "string"}}}},
    {"name": "draft3", "inputSchema": {"type": "object", "properties": {"path": {"type": "string", "required": True}}}},
    {"name": "misspelt", "inputSchema": {"type": "objet", "properties": {}}},
    {"name": "bad name!", "inputSchema": GOOD},
    {"name": "wordy", "description": "Read a file. " + "More about reading. " * 500, "inputSchema": GOOD},
    {
        "name": "vast",
        "inputSchema": {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(900)}},
    },
]


@pytest.fixture
def server(agent) -> ToolServer:
    server = ToolServer.objects.create(
        name="files", transport="stdio", command="mcp-server-files", tools=LISTED, state=ServerState.READY
    )
    server.agents.add(agent)
    return server


def test_only_tools_whose_schema_an_llm_api_accepts_are_offered(agent, server):
    assert [t.name for t in provide(agent.id, "chat", stored=True)] == ["files__read", "files__wordy"]


def test_a_tool_sent_with_every_request_is_bounded(agent, server):
    """A description of 10,000 characters went with every request of every agent the
    server is attached to; a schema of 28,000 characters is not offered at all."""
    [wordy] = [t for t in provide(agent.id, "chat", stored=True) if t.name == "files__wordy"]
    assert len(wordy.description) <= TOOL_DESCRIPTION_CHARS + 100
    assert wordy.description.startswith("Read a file. More about reading.")
    assert "[cut: the first 2,000 of 10,013 characters]" in wordy.description
    [vast] = [row for row in listed_tools(server) if row["name"] == "vast"]
    assert vast["notOffered"].startswith("its input schema is 2")
    assert vast["notOffered"].endswith("characters, past the 16,000 a tool may take in every request")


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
    assert [t["name"] for t in listed if not t["notOffered"]] == ["read", "wordy"]


def test_each_schema_is_checked_once(agent, server):
    offered_module.schema_problem.cache_clear()
    for _ in range(3):
        provide(agent.id, "chat", stored=True)
    assert offered_module.schema_problem.cache_info().misses == 5  # the five schemas, the shared one once
