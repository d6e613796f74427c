"""Memory tools and API under wrong arguments: what an LLM may send wrongly (a null where a
string is required, an id beyond any row) is a tool error naming the argument, never
"<tool> failed: AttributeError"; the API names the field a null was sent for; the console
keeps section titles unique whatever their case."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from attention.scenarios import CHAT, DREAM_CYCLE
from attention.toolbox import ToolContext, execute_tool
from markus.memory import selectors, services
from markus.memory.models import MemorySection

from .conftest import save

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def call(agent, name: str, args: dict, scenario: str = CHAT) -> tuple[bool, str]:
    ok, result = execute_tool(ToolContext(agent_id=agent.id, agent_name=agent.name, scenario=scenario), name, args)
    return ok, json.loads(result).get("error", "")


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("memory_save", {"content": None}, "memory_save: content must be a string"),
        ("memory_save", {"content": "x", "kind": None}, ""),  # kind is optional: null is the default
        ("memory_search", {"query": None}, "memory_search: query must be a string"),
        ("memory_search_longterm", {"query": None}, "memory_search_longterm: query must be a string"),
        (
            "memory_update_longterm",
            {"section": None, "content": "x"},
            "memory_update_longterm: section must be a string",
        ),
    ],
)
def test_a_null_string_argument_is_a_tool_error(agent, name, args, message):
    ok, error = call(agent, name, args, DREAM_CYCLE if name == "memory_update_longterm" else CHAT)
    assert (ok, error) == (not message, message)


@pytest.mark.parametrize(
    "args",
    [
        {"remove": [2**70]},
        {"merge": [{"ids": [1, 2**63], "text": "same"}]},
    ],
)
def test_an_id_no_observation_can_have_is_a_tool_error(agent, args):
    (kept,) = save(agent.id, "keep me")
    ok, error = call(agent, "memory_consolidate", args, DREAM_CYCLE)
    assert not ok and error.startswith("memory_consolidate: ") and "observation ids" in error
    assert [o.id for o in selectors.new_observations(agent.id)] == [kept]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"content": None}, "content must be a string"),
        ({"content": "x", "kind": None}, "kind must be a string"),
    ],
)
def test_a_null_in_the_api_names_its_field(agent, alice_client, body, message):
    response = alice_client.post(f"/api/agents/{agent.id}/memory/observations", body, format="json")
    assert response.status_code == 400 and response.json()["detail"] == message
    response = alice_client.put(f"/api/agents/{agent.id}/memory", {"markdown": None}, format="json")
    assert response.status_code == 400 and response.json()["detail"] == "markdown must be a string"


def test_the_console_refuses_a_title_that_differs_only_in_case(agent, django_user_model):
    django_user_model.objects.create_superuser("operator", "op@example.com", "pw-operator")
    operator = Client()
    assert operator.login(username="operator", password="pw-operator")
    services.section_write(agent_id=agent.id, title="People", content="- Bob approves deploys")
    response = operator.post(
        "/admin/memory/memorysection/add/", {"agent": agent.id, "title": "people", "content": "x", "position": 1}
    )
    assert response.status_code == 200 and "already has a section" in response.content.decode()
    assert list(MemorySection.objects.values_list("title", flat=True)) == ["People"]
    # The document stays one an operator can PUT back as it was exported.
    assert services.document_replace(agent_id=agent.id, markdown=selectors.markdown(agent.id))
