"""Every JSON write endpoint refuses a field it does not know (``assignee`` for
``assigneeId`` used to answer 201 and leave the task unassigned): 400 in the API's
error shape, ``fields`` naming each unknown field, the message listing the accepted
ones, and nothing written."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from agentbus.models import Stream
from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.work.models import Task
from markus.work.requirement_services import requirement_create
from markus.work.services import task_create

pytestmark = pytest.mark.django_db


def refused(response, *names: str) -> dict:
    assert response.status_code == 400, (response.status_code, response.content)
    data = response.json()
    assert data["code"] == "invalid"
    assert set(data["fields"]) == set(names), data
    for name in names:
        assert name in data["detail"]
        assert data["fields"][name] and isinstance(data["fields"][name], list)
    assert "accepted" in data["detail"]
    return data


def test_a_task_with_assignee_instead_of_assignee_id_is_refused_not_created_unassigned(alice_client, agent):
    answer = alice_client.post("/api/tasks/", {"title": "Fix it", "assignee": "ada"}, format="json")
    data = refused(answer, "assignee")
    assert "assigneeId" in data["detail"]  # the accepted fields are listed
    assert not Task.objects.exists()


def test_every_unknown_field_is_named(alice_client, agent):
    answer = alice_client.post("/api/tasks/", {"title": "x", "assignee": "ada", "colour": "red"}, format="json")
    data = refused(answer, "assignee", "colour")
    assert "'assignee'" in data["detail"] and "'colour'" in data["detail"]


def test_known_fields_still_work(alice_client, agent):
    answer = alice_client.post("/api/tasks/", {"title": "Fix it", "assigneeId": "ada", "start": False}, format="json")
    assert answer.status_code == 201, answer.json()
    assert answer.json()["assigneeId"] == "ada"


@pytest.fixture
def objects(alice, agent):
    actor = Actor.for_user(alice)
    task = task_create(actor=actor, title="t", start=False)
    requirement = requirement_create(actor=actor, title="Idea")
    eve, _ = agent_create(name="Eve", role="engineer", kind="external", owner=alice, agent_id="eve")
    stream = Stream.objects.create(id="s1", sender=eve, recipient=agent)
    return {"task": task.id, "requirement": requirement.id, "stream": stream.id}


WRITES = [
    ("post", "/api/agents/", {"name": "New"}),
    ("patch", "/api/agents/ada/", {"name": "Ada"}),
    ("post", "/api/agents/ada/mailbox", {"sourceType": "human_chat", "payload": {"summary": "s", "content": "c"}}),
    ("post", "/api/tasks/", {"title": "x"}),
    ("post", "/api/tasks/{task}/transition", {"status": "in_progress"}),
    ("post", "/api/tasks/{task}/retry", {}),
    ("post", "/api/tasks/{task}/comments", {"content": "hi"}),
    ("post", "/api/requirements/", {"title": "x"}),
    ("post", "/api/requirements/{requirement}/approve", {}),
    ("post", "/api/requirements/{requirement}/resubmit", {}),
    ("post", "/api/requirements/{requirement}/comments", {"content": "hi"}),
    ("post", "/api/approvals/apv_missing/respond", {"selectedOption": "yes"}),
    ("put", "/api/agents/ada/memory", {"markdown": "## A\n\nb\n"}),
    ("post", "/api/agents/ada/memory/observations", {"content": "x"}),
    ("post", "/api/agentbus/streams", {"sender": "eve", "recipient": "ada"}),
    ("post", "/api/agentbus/streams/{stream}/append", {"sender": "eve", "payload": {"text": "x"}}),
    ("post", "/api/agentbus/streams/{stream}/close", {"sender": "eve"}),
    ("post", "/api/agents/ada/agentbus/drain", {"peek": True}),
    ("post", "/api/agentbus/request", {"sender": "eve", "recipient": "ada", "payload": {"text": "x"}}),
    ("post", "/api/agents/ada/sessions", {"title": "x"}),
    ("post", "/api/agents/ada/chat", {"text": "hi"}),
]


@pytest.mark.parametrize(("method", "path", "body"), WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
def test_every_write_endpoint_refuses_an_unknown_field(alice_client, objects, method, path, body):
    url = path.format(**objects)
    answer = getattr(alice_client, method)(url, {**body, "bogusField": 1}, format="json")
    refused(answer, "bogusField")


TOOL_SERVER = {"name": "git", "transport": "stdio", "command": "x"}


@pytest.mark.parametrize("method", ["post", "patch"])
def test_tool_servers_refuse_unknown_fields_in_the_same_words(django_user_model, method):
    staff = APIClient()
    staff.force_authenticate(django_user_model.objects.create_superuser("root", password="pw"))
    if method == "patch":
        assert staff.post("/api/tool-servers/", TOOL_SERVER, format="json").status_code == 201
        answer = staff.patch("/api/tool-servers/git/", {"colour": "red"}, format="json")
    else:
        answer = staff.post("/api/tool-servers/", {**TOOL_SERVER, "colour": "red"}, format="json")
    refused(answer, "colour")
