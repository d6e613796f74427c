"""One rule for bad input: every 400 answers ``{"detail", "code", "fields"}``, ``fields``
naming the field(s) at fault (a list of messages each), whichever layer refused it: a
serializer, a service's MarkusError, a query parameter, the body as a whole, the parser,
the plain async views."""

from __future__ import annotations

import pytest

from agentbus.models import Stream
from markus.agents.services import agent_create

pytestmark = pytest.mark.django_db


def fields_of(response) -> dict:
    assert response.status_code == 400, (response.status_code, response.content)
    data = response.json()
    assert set(data) >= {"detail", "code", "fields"}, data
    assert data["detail"]
    assert isinstance(data["fields"], dict) and data["fields"], data
    for messages in data["fields"].values():
        assert messages and isinstance(messages, list | dict)
    return data["fields"]


def test_a_service_refusal_names_its_field(alice_client, agent):
    answer = alice_client.post("/api/tasks/", {"title": "t", "assigneeId": "nobody"}, format="json")
    assert set(fields_of(answer)) == {"assigneeId"}


def test_a_validated_body_error_names_its_field(alice_client, agent):
    body = {"sourceType": "human_chat", "payload": {"summary": "s", "content": "c"}, "priority": 9}
    answer = alice_client.post("/api/agents/ada/mailbox", body, format="json")
    assert set(fields_of(answer)) == {"priority"}
    assert answer.json()["detail"].startswith("priority must be")  # the message as the serializer states it


def test_an_error_of_the_body_as_a_whole_is_under_non_field_errors(alice_client, agent):
    answer = alice_client.patch("/api/agents/ada/", {}, format="json")
    assert set(fields_of(answer)) == {"non_field_errors"}
    answer = alice_client.post("/api/tasks/", [1], format="json")
    assert fields_of(answer)


def test_a_bad_query_parameter_names_it(alice_client, agent):
    assert set(fields_of(alice_client.get("/api/tasks/?limit=x"))) == {"limit"}
    assert set(fields_of(alice_client.get("/api/tasks/?status=nope"))) == {"status"}
    assert set(fields_of(alice_client.get("/api/tasks/?status=%00"))) == {"status"}


def test_a_bad_character_in_the_body_names_its_path(alice_client, agent):
    answer = alice_client.post("/api/tasks/", {"title": "a\x00b"}, format="json")
    assert set(fields_of(answer)) == {"title"}


def test_a_bus_refusal_names_its_field(alice_client, alice, agent):
    eve, _ = agent_create(name="Eve", role="engineer", kind="external", owner=alice, agent_id="eve")
    Stream.objects.create(id="s1", sender=eve, recipient=agent)
    answer = alice_client.post("/api/agentbus/streams/s1/append", {"sender": "eve", "payload": [1]}, format="json")
    assert set(fields_of(answer)) == {"payload"}


def test_a_parse_error_carries_fields_too(alice_client, agent):
    answer = alice_client.generic("POST", "/api/tasks/", "{", content_type="application/json")
    assert answer.json()["code"] == "parse_error"
    assert fields_of(answer)


@pytest.mark.parametrize("path", ["/api/agentbus/request", "/api/agents/ada/chat"])
def test_the_async_views_carry_fields(alice_client, agent, path):
    answer = alice_client.generic("POST", path, "[1]", content_type="application/json")
    assert answer.json()["detail"] == "body must be a JSON object"
    assert fields_of(answer)


def test_the_async_request_names_its_field(alice_client, alice, agent):
    agent_create(name="Eve", role="engineer", kind="external", owner=alice, agent_id="eve")
    answer = alice_client.post(
        "/api/agentbus/request", {"sender": "eve", "recipient": "ada", "payload": "x"}, format="json"
    )
    assert set(fields_of(answer)) == {"payload"}
    answer = alice_client.post(
        "/api/agentbus/request",
        {"sender": "eve", "recipient": "ada", "payload": {}, "timeoutSeconds": "x"},
        format="json",
    )
    assert set(fields_of(answer)) == {"timeoutSeconds"}
