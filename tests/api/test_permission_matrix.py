"""The permission table (``markus.agents.permissions.OPERATIONS``, the README's
"Permissions" section) against the doors: every operation of ``/api/schema/``, every
page and every socket route has a row, and every operation on an agent answers each
kind of caller what its row says: owner, team owner, teammate, outsider, staff,
anonymous, the agent's own token and another agent's token."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.urls import URLPattern
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents.models import Agent, Team
from markus.agents.permissions import OPERATIONS, RIGHTS, Relation, Right, markdown_table
from markus.agents.services import agent_create, main_session
from markus.reports.models import DailyReport
from markus.web import urls as web_urls

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
PERSONAS = ["owner", "team_owner", "teammate", "outsider", "staff", "anonymous", "self", "other_agent"]
RELATION = {
    "owner": Relation.OWNER,
    "team_owner": Relation.TEAM_OWNER,
    "teammate": Relation.TEAMMATE,
    "staff": Relation.STAFF,
    "self": Relation.SELF,
}


def schema_operations() -> dict[str, tuple[str, str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {
        op["operationId"]: (method.upper(), path) for path, ops in schema["paths"].items() for method, op in ops.items()
    }


def test_every_operation_page_and_socket_has_a_row():
    from markus.asgi import websocket_urlpatterns

    api = set(schema_operations())
    pages = {f"page:{p.name}" for p in web_urls.urlpatterns if isinstance(p, URLPattern)}
    pages.add("page:mind")
    sockets = {f"ws:{p.pattern}" for p in websocket_urlpatterns}
    rows = set(OPERATIONS)
    assert api - rows == set(), "API operations without a row in markus.agents.permissions.OPERATIONS"
    assert pages - rows == set(), "pages without a row"
    assert sockets - rows == set(), "sockets without a row"
    doors = {k for k in rows if not k.startswith(("page:", "ws:", "bus:", "tool:", "a2a:", "console"))}
    assert doors - api == set(), "rows for API operations that do not exist"


def test_the_readme_permission_table_is_the_table():
    readme = (ROOT / "README.md").read_text()
    assert markdown_table() in readme, "README's Permissions section is not markdown_table(); paste it"


@pytest.fixture
def world(django_user_model):
    make = django_user_model.objects.create_user
    users = {
        "owner": make("own", password="x"),
        "team_owner": make("lead", password="x"),
        "teammate": make("mate", password="x"),
        "outsider": make("out", password="x"),
        "staff": make("root", password="x", is_staff=True),
    }
    team = Team.objects.create(name="Core", owner=users["team_owner"])
    team.members.add(users["teammate"])
    agent, token = agent_create(name="Ada", role="engineer", owner=users["owner"], team=team, agent_id="ada")
    _, other_token = agent_create(name="Zed", role="engineer", owner=users["outsider"], agent_id="zed")
    return users, agent, token, other_token


def api_client(persona: str, users, token: str, other_token: str) -> APIClient:
    client = APIClient()
    if persona in users:
        client.force_authenticate(users[persona])
    elif persona == "self":
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    elif persona == "other_agent":
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {other_token}")
    return client


def expected(persona: str, right: Right) -> set[int] | str:
    """ "pass" (past the door: any answer but 401, 403, 404), or the refusals allowed."""
    if persona == "anonymous":
        return {401, 403}
    if persona in ("outsider", "other_agent"):
        return {404}
    return "pass" if RELATION[persona] in RIGHTS[right] else {403}


def fresh_objects(agent: Agent) -> dict[str, str]:
    """What the paths of the operations name, made anew for each call."""
    reminder = MailboxItem.objects.create(
        agent=agent,
        source_type=MailboxType.REMINDER,
        priority=2,
        status="deferred",
        payload={
            "summary": "later",
            "content": "later",
            "remindAt": (timezone.now() + dt.timedelta(hours=1)).isoformat(),
        },
        deferred_until=timezone.now() + dt.timedelta(hours=1),
    )
    day = dt.date(2026, 1, 5)
    DailyReport.objects.get_or_create(agent=agent, date=day, defaults={"content": "a day"})
    return {
        "agent_id": agent.id,
        "item_id": reminder.id,
        "session_id": main_session(agent.id).id,
        "date": day.isoformat(),
    }


BODIES = {
    "agents_mailbox_enqueue": {"sourceType": "human_chat", "payload": {"summary": "hi", "content": "hi"}},
    "agents_partial_update": {"role": "engineer"},
    "agents_memory_replace": {"document": "## Notes\nsome"},
    "agents_memory_observations_create": {"text": "an observation"},
    "agents_sessions_create": {"title": "t"},
    "agents_agentbus_drain_create": {"peek": True},
    "agents_chat": {"text": "hello"},
}
QUERY = {"agents_agentbus_inbox": "?timeout_seconds=0", "agents_activity_logs": "?activityId=none"}


def agent_operations() -> list[tuple[str, str, str]]:
    return sorted((op, method, path) for op, (method, path) in schema_operations().items() if "{agent_id}" in path)


@pytest.mark.parametrize("persona", PERSONAS)
@pytest.mark.parametrize("op,method,path", agent_operations())
def test_every_operation_on_an_agent_answers_each_caller_as_its_row_says(world, op, method, path, persona):
    users, agent, token, other_token = world
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.STOPPED)  # no loop, no chat wait
    right = OPERATIONS[op].right
    objects = fresh_objects(agent)
    url = re.sub(r"\{(\w+)\}", lambda m: objects[m.group(1)], path) + QUERY.get(op, "")
    client = api_client(persona, users, token, other_token)
    response = getattr(client, method.lower())(url, BODIES.get(op, {}), format="json")
    want = expected(persona, right)
    if op == "agents_activity_logs" and want == "pass":
        want = {404}  # past the door: no such activity (the id is made up)
    if op == "agents_agentbus_drain_create" and persona == "anonymous":
        want = {401, 403}
    got = response.status_code
    if want == "pass":
        assert got not in (401, 403, 404), (op, persona, got, response.content[:200])
        assert got < 500
    else:
        assert got in want, (op, persona, got, response.content[:200])


PAGES = [
    ("page:mind", "GET", "/agents/{agent_id}/mind/"),
    ("page:mind-timeline", "GET", "/agents/{agent_id}/mind/timeline/"),
    ("page:agent-report", "GET", "/agents/{agent_id}/reports/{date}/"),
    ("page:mind-control", "POST", "/agents/{agent_id}/mind/pause/"),
    ("page:mind-item-control", "POST", "/agents/{agent_id}/mind/items/{item_id}/drop/"),
    ("page:mind-reminder-cancel", "POST", "/agents/{agent_id}/mind/reminders/{item_id}/cancel/"),
    ("page:chat", "GET", "/agents/{agent_id}/chat/"),
    ("page:chat-messages", "GET", "/agents/{agent_id}/chat/messages/"),
    ("page:chat-session-new", "POST", "/agents/{agent_id}/chat/sessions/new/"),
    ("page:agent-usage", "GET", "/agents/{agent_id}/usage/"),
    ("page:agent-settings", "GET", "/agents/{agent_id}/settings/"),
]


@pytest.mark.parametrize("persona", ["owner", "team_owner", "teammate", "outsider", "staff", "anonymous"])
@pytest.mark.parametrize("op,method,path", PAGES)
def test_every_page_answers_each_person_as_its_row_says(world, op, method, path, persona):
    users, agent, _, _ = world
    objects = fresh_objects(agent)
    client = Client()
    if persona in users:
        client.force_login(users[persona])
    url = re.sub(r"\{(\w+)\}", lambda m: objects[m.group(1)], path)
    response = client.get(url) if method == "GET" else client.post(url, {"reason": "x"})
    got = response.status_code
    if persona == "anonymous":
        assert got == 302 and "/accounts/login/" in response["Location"]
        return
    want = expected(persona, OPERATIONS[op].right)
    if want == "pass":  # past the door (a reminder not in the shape of a pending one: 409)
        assert got not in (401, 403, 404) and got < 500, (op, persona, got)
    else:
        assert got in want, (op, persona, got)


@pytest.mark.parametrize("route", ["ws/agents/<str:agent_id>/", "ws/agents/<str:agent_id>/mind/"])
@pytest.mark.parametrize("persona", PERSONAS)
def test_every_agent_socket_answers_each_caller_as_its_row_says(world, route, persona, transactional_db):
    from channels.testing import WebsocketCommunicator

    from markus.agents.services import user_token_create
    from markus.asgi import application

    users, agent, token, other_token = world
    path = "/" + route.replace("<str:agent_id>", agent.id)
    if persona in users:
        path += f"?token={user_token_create(users[persona], name='ws')[1]}"
    elif persona == "self":
        path += f"?token={token}"
    elif persona == "other_agent":
        path += f"?token={other_token}"

    async def connect():
        communicator = WebsocketCommunicator(application, path)
        connected, _ = await communicator.connect(timeout=5)
        closed = None
        if connected:
            if await communicator.receive_nothing(timeout=0.3):
                closed = None
            else:
                message = await communicator.receive_output(timeout=1)
                closed = message.get("code") if message["type"] == "websocket.close" else None
        await communicator.disconnect()
        return closed

    code = async_to_sync(connect)()
    want = expected(persona, OPERATIONS[f"ws:{route}"].right)
    if want == "pass":
        assert code is None, (persona, code)
    elif persona == "anonymous":
        assert code == 4401
    else:
        assert code in {4403, 4404}, (persona, code)


def other_operations() -> list[tuple[str, str, str]]:
    return sorted((op, method, path) for op, (method, path) in schema_operations().items() if "{agent_id}" not in path)


@pytest.mark.parametrize("op,method,path", other_operations())
def test_every_other_operation_refuses_anonymous_callers_and_user_rows_refuse_agent_tokens(world, op, method, path):
    token = world[2]
    url = re.sub(r"\{(\w+)\}", lambda m: "approve" if m.group(1) == "step" else "none", path)
    anonymous = getattr(APIClient(), method.lower())(url, {}, format="json")
    assert anonymous.status_code in (401, 403), (op, anonymous.status_code)
    if OPERATIONS[op].right == Right.USER:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        refused = getattr(client, method.lower())(url, {}, format="json")
        assert refused.status_code == 403, (op, refused.status_code, refused.content[:200])
