"""Bad characters at the edge (ARCHITECTURE decision 12): NUL bytes and lone surrogates
anywhere in a JSON body (keys and values, nested), and NUL in path ids and query
filters, answer 400 naming the field; never a 5xx, and nothing is stored. On SQLite and
(second pass) on PostgreSQL, which refuses NUL in text and lone surrogates in UTF-8."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.apps import apps
from django.test import Client
from rest_framework.test import APIClient

from markus.agents.models import Agent, Team
from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.work.services import task_create

pytestmark = [pytest.mark.django_db, pytest.mark.pg]

NUL = "a\u0000b"
SURROGATE = "a\ud800b"


@dataclass
class Case:
    method: str
    path: str
    body: Any = None
    caller: str = "alice"  # alice (a user token), eve (an agent bearer), or a signed-in browser: page, operator
    form: bool = False
    names: str = ""  # the field path the 400 must name (bodies)
    extra: dict[str, Any] = field(default_factory=dict)


def body_cases(bad: str) -> dict[str, Case]:
    """Every place a bad string can sit in a JSON body, for one bad string."""
    enqueue = "/api/agents/ada/mailbox"
    mention = {"sourceType": "mention", "payload": {"summary": "ok", "content": "ok"}}

    def merge(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
        return json.loads(json.dumps(base)) | changes

    cases = {
        "enqueue payload.content": Case(
            "post", enqueue, merge(mention, payload={"summary": "ok", "content": bad}), names="payload.content"
        ),
        "enqueue payload.summary": Case(
            "post", enqueue, merge(mention, payload={"summary": bad, "content": "ok"}), names="payload.summary"
        ),
        "enqueue payload.extra nested": Case(
            "post",
            enqueue,
            merge(mention, payload={"content": "ok", "extra": {"list": ["ok", {"deep": bad}]}}),
            names="payload.extra.list[1].deep",
        ),
        "enqueue metadata key": Case("post", enqueue, merge(mention, metadata={bad: "v"}), names="metadata"),
        "enqueue metadata value": Case("post", enqueue, merge(mention, metadata={"k": bad}), names="metadata.k"),
        "enqueue sourceType": Case("post", enqueue, merge(mention, sourceType=bad), names="sourceType"),
        "agent create name": Case("post", "/api/agents/", {"name": bad, "role": "engineer"}, names="name"),
        "agent create id": Case("post", "/api/agents/", {"name": "Newt", "id": bad}, names="id"),
        "task transition status": Case("post", "/api/tasks/TASK/transition", {"status": bad}, names="status"),
        "chat text": Case("post", "/api/agents/ada/chat", {"text": bad}, names="text"),
        "chat sessionId": Case("post", "/api/agents/ada/chat", {"text": "hi", "sessionId": bad}, names="sessionId"),
        "agentbus open topic": Case(
            "post", "/api/agentbus/streams", {"sender": "eve", "recipient": "max", "topic": bad}, "eve", names="topic"
        ),
        "agentbus open streamId": Case(
            "post",
            "/api/agentbus/streams",
            {"sender": "eve", "recipient": "max", "streamId": bad},
            "eve",
            names="streamId",
        ),
        "agentbus append payload": Case(
            "post",
            "/api/agentbus/streams/s-1/append",
            {"sender": "eve", "payload": {"text": bad}},
            "eve",
            names="payload.text",
        ),
        "agentbus append payload key": Case(
            "post", "/api/agentbus/streams/s-1/append", {"sender": "eve", "payload": {bad: 1}}, "eve", names="payload"
        ),
        "agentbus append topic": Case(
            "post",
            "/api/agentbus/streams/s-1/append",
            {"sender": "eve", "payload": {"text": "ok"}, "topic": bad},
            "eve",
            names="topic",
        ),
        "agentbus request payload": Case(
            "post",
            "/api/agentbus/request",
            {"sender": "eve", "recipient": "max", "payload": {"text": bad}, "timeoutSeconds": 0},
            "eve",
            names="payload.text",
        ),
        "agentbus request topic": Case(
            "post",
            "/api/agentbus/request",
            {"sender": "eve", "recipient": "max", "payload": {"text": "ok"}, "topic": bad, "timeoutSeconds": 0},
            "eve",
            names="topic",
        ),
        "task create title": Case("post", "/api/tasks/", {"title": bad}, names="title"),
        "task create description": Case(
            "post", "/api/tasks/", {"title": "ok", "description": bad}, names="description"
        ),
        "task create metadata key": Case(
            "post", "/api/tasks/", {"title": "ok", "metadata": {bad: []}}, names="metadata"
        ),
        "task comment content": Case("post", "/api/tasks/TASK/comments", {"content": bad}, names="content"),
        "requirement create title": Case("post", "/api/requirements/", {"title": bad}, names="title"),
    }
    if bad == NUL:  # a form body decodes a surrogate's bytes to U+FFFD: only NUL survives
        cases["agent create name (form body)"] = Case("post", "/api/agents/", {"name": bad}, form=True, names="name")
        # The pages' and the console's forms: a NUL reached PostgreSQL, a 500.
        cases["new agent page name"] = Case("post", "/agents/new/", {"name": bad}, "page", form=True, names="name")
        cases["new chat page title"] = Case(
            "post", "/agents/ada/chat/sessions/new/", {"title": bad}, "page", form=True, names="title"
        )
        cases["console agent team"] = Case(
            "post", "/admin/agents/agent/add/", {"name": "ok", "team": bad}, "operator", form=True, names="team"
        )
    return cases


PATH_AND_QUERY_CASES = {
    "agent id": Case("get", "/api/agents/ada%00/"),
    "mailbox agent id": Case("get", "/api/agents/ada%00/mailbox"),
    "enqueue agent id": Case("post", "/api/agents/ada%00/mailbox", {"sourceType": "mention", "payload": {}}),
    "mind agent id": Case("get", "/api/agents/ada%00/mind"),
    "chat agent id": Case("post", "/api/agents/ada%00/chat", {"text": "hi"}),
    "task id": Case("get", "/api/tasks/TASK%00/"),
    "task comments id": Case("post", "/api/tasks/TASK%00/comments", {"content": "hi"}),
    "stream events id": Case("get", "/api/agentbus/streams/s-1%00/events", caller="eve"),
    "stream append id": Case(
        "post", "/api/agentbus/streams/s-1%00/append", {"sender": "eve", "payload": {"t": 1}}, caller="eve"
    ),
    "inbox agent id": Case("get", "/api/agents/eve%00/agentbus/inbox?timeout_seconds=0", caller="eve"),
    "notification id": Case("post", "/api/notifications/n%00/read"),
    "approval id": Case("post", "/api/approvals/a%00/respond", {"selectedOption": "yes"}),
    "mind page agent id": Case("get", "/agents/ada%00/mind/"),
    "mailbox ?status": Case("get", "/api/agents/ada/mailbox?status=%00"),
    "mailbox ?type": Case("get", "/api/agents/ada/mailbox?type=mention,%00"),
    "mailbox ?category": Case("get", "/api/agents/ada/mailbox?category=a%00"),
    "tasks ?status": Case("get", "/api/tasks/?status=%00"),
    "tasks ?assigneeId": Case("get", "/api/tasks/?assigneeId=ada%00"),
    "notifications ?type": Case("get", "/api/notifications?type=%00"),
    "approvals ?status": Case("get", "/api/approvals?status=%00"),
    "activity logs ?activityId": Case("get", "/api/agents/ada/activity-logs?activityId=act%00"),
    "inbox ?after_cursor": Case(
        "get", "/api/agents/eve/agentbus/inbox?timeout_seconds=0&after_cursor=%00", caller="eve"
    ),
    "stream events ?after": Case("get", "/api/agentbus/streams/s-1/events?after=%00", caller="eve"),
    "query key": Case("get", "/api/tasks/?st%00atus=x"),
}

CASES = {
    **{f"NUL in {name}": case for name, case in body_cases(NUL).items()},
    **{f"surrogate in {name}": case for name, case in body_cases(SURROGATE).items()},
    **{f"%00 in {name}": case for name, case in PATH_AND_QUERY_CASES.items()},
}


@pytest.fixture
def world(alice, django_user_model, monkeypatch, settings):
    """alice's team: ada (internal), eve and max (external, eve's token calls), a task,
    and a stream s-1 from eve to max."""
    from agentbus import services as bus

    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.05)
    team = Team.objects.create(name="Core", owner=alice)
    agent_create(name="Ada", role="engineer", owner=alice, team=team, agent_id="ada")
    eve, eve_token = agent_create(name="Eve", kind=Agent.Kind.EXTERNAL, owner=alice, team=team, agent_id="eve")
    max_, _ = agent_create(name="Max", kind=Agent.Kind.EXTERNAL, owner=alice, team=team, agent_id="max")
    task = task_create(actor=Actor.for_user(alice), title="Existing")
    bus.stream_open(sender=eve, recipient=max_, stream_id="s-1")
    alice_client = APIClient()
    alice_client.force_authenticate(alice)
    eve_client = APIClient()
    eve_client.credentials(HTTP_AUTHORIZATION=f"Bearer {eve_token}")
    page, operator = Client(), Client()
    page.force_login(alice)
    operator.force_login(django_user_model.objects.create_superuser("operator", "op@example.com", "pw"))
    for client in (alice_client, eve_client, page, operator):
        client.raise_request_exception = False  # a 500 is an answer to count, not a crash
    return {"alice": alice_client, "eve": eve_client, "page": page, "operator": operator, "task": task.id}


def row_counts() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def send(world: dict[str, Any], case: Case):
    client: APIClient = world[case.caller]
    path = case.path.replace("TASK", world["task"])
    if case.body is None:
        return getattr(client, case.method)(path)
    if case.form:
        # urlencoded by hand: a lone surrogate has no UTF-8 form, so it travels escaped
        from urllib.parse import quote

        data = "&".join(f"{k}={quote(v.encode('utf-8', 'surrogatepass'))}" for k, v in case.body.items())
        return getattr(client, case.method)(path, data, content_type="application/x-www-form-urlencoded")
    # json.dumps escapes NUL and surrogates (\u0000, \ud800), as any client would
    return getattr(client, case.method)(path, json.dumps(case.body), content_type="application/json")


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_bad_characters_answer_400_naming_the_field_and_store_nothing(world, case):
    before = row_counts()
    response = send(world, case)
    assert response.status_code < 500, f"{response.status_code}: {response.content[:300]!r}"
    assert response.status_code == 400, response.content[:300]
    detail = response.json()["detail"]
    assert "NUL" in detail or "surrogate" in detail, detail
    if case.names:
        assert detail.startswith(f"{case.names}"), detail
    assert row_counts() == before


DEEP_BODIES = {
    "enqueue": (
        "alice",
        "/api/agents/ada/mailbox",
        '{"sourceType": "mention", "payload": {"content": "x", "extra": %s}}',
    ),
    "chat": ("alice", "/api/agents/ada/chat", '{"text": "hi", "x": %s}'),
    "agentbus request": (
        "eve",
        "/api/agentbus/request",
        '{"sender": "eve", "recipient": "max", "timeoutSeconds": 0, "payload": {"x": %s}}',
    ),
    "task create": ("alice", "/api/tasks/", '{"title": "t", "metadata": {"x": %s}}'),
}


@pytest.mark.parametrize("depth", [150, 900, 100_000])
@pytest.mark.parametrize("where", DEEP_BODIES.values(), ids=DEEP_BODIES.keys())
def test_json_nested_too_deeply_answers_400(world, where, depth):
    """Deep enough, decoding itself fails (RecursionError); less deep, storing it would."""
    caller, path, template = where
    before = row_counts()
    response = world[caller].post(path, template % ("[" * depth + "]" * depth), content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert "nested" in response.json()["detail"]
    assert row_counts() == before


def test_json_nested_within_the_limit_is_accepted(world):
    extra: dict = {}
    for _ in range(60):
        extra = {"a": extra}
    body = {"sourceType": "mention", "payload": {"content": "x", "extra": extra}}
    response = world["alice"].post("/api/agents/ada/mailbox", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content[:300]


# ------------------------------------------------------------------ every 500 is logged

LOGGED_500 = r"""
import sys, threading, types
import django
django.setup()
from celery.signals import worker_ready
from django.test import Client
from django.test.utils import override_settings
from django.urls import path

from markus.celery import app
from markus.embedded import start_worker_thread

ready = threading.Event()
worker_ready.connect(lambda **kwargs: ready.set(), weak=False)
start_worker_thread(app)  # as `manage.py up` does without REDIS_URL: sys.stderr is now a proxy
assert ready.wait(30), "the embedded worker did not start"
import markus.asgi  # then daphne loads the application: get_asgi_application() sets Django up again

def boom(request):
    raise ZeroDivisionError("the bug under test")

urls = types.ModuleType("boom_urls")
urls.urlpatterns = [path("boom/", boom)]
sys.modules["boom_urls"] = urls
with override_settings(ROOT_URLCONF="boom_urls"):
    status = Client(raise_request_exception=False).get("/boom/").status_code
print("STATUS", status, file=sys.__stdout__, flush=True)
"""


def test_a_500_is_logged_with_its_traceback_beside_the_embedded_worker(tmp_path):
    """``manage.py up`` starts the embedded Celery worker, which redirects sys.stderr
    into logging, then daphne loads the application, which configures logging again: a
    500 must still reach the process's stderr, traceback and all."""
    import os
    import subprocess
    import sys

    from tests.agentbus.hub_server import ROOT

    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update(DJANGO_SETTINGS_MODULE="markus.settings", MARKUS_DATA_DIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", LOGGED_500], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert "STATUS 500" in done.stdout, done.stdout + done.stderr
    assert "Internal Server Error: /boom/" in done.stderr, done.stderr[-3000:]
    assert "Traceback" in done.stderr and "ZeroDivisionError: the bug under test" in done.stderr
