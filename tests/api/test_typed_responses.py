"""Every API operation is typed and every filter documented (issue 14, deliverable 5).

The schema is generated, then:
- each operation's success response must have a schema, and a JSON one must be an
  object with properties (or a list of such objects), not an empty or free-form object;
- each GET operation is called on real objects while the query-parameter lookups it makes
  are recorded: every parameter the view reads must be documented;
- the real responses of those calls (and of the writes) validate against their
  documented schema, strictly: a key the schema does not name is an error, so the
  schema says exactly what the view answers.
"""

from __future__ import annotations

import copy
import datetime
import re
from typing import Any

import pytest
from django.http import QueryDict
from drf_spectacular.generators import SchemaGenerator
from jsonschema import Draft202012Validator
from rest_framework.test import APIClient

from notifications import services as notification_services


def _schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


SCHEMA = _schema()
OPERATIONS = [(method.upper(), path) for path, ops in SCHEMA["paths"].items() for method in ops]

# Query parameters the framework itself looks up on every request (DRF's format
# override), not a filter of any view.
FRAMEWORK_PARAMS = {"format"}


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMA["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _shapeless(schema: dict[str, Any]) -> bool:
    """An empty or free-form object (or a list of them): says nothing of the shape."""
    schema = _resolve(schema)
    if schema.get("type") == "array":
        return _shapeless(schema.get("items", {}))
    if any(key in schema for key in ("oneOf", "anyOf", "allOf")):
        return False
    return schema.get("type") in ("object", None) and not schema.get("properties")


def _problems(method: str, path: str) -> list[str]:
    op = SCHEMA["paths"][path][method.lower()]
    ok = {code: resp for code, resp in op["responses"].items() if code.startswith("2")}
    if not ok:
        return ["no success response"]
    found = []
    for code, resp in ok.items():
        content = resp.get("content")
        if not content:
            found.append(f"{code} has no schema")
            continue
        for media, body in content.items():
            if media == "application/json" and _shapeless(body.get("schema", {})):
                found.append(f"{code} {media} is a free-form object")
    return found


@pytest.mark.parametrize(
    ("method", "path"),
    OPERATIONS,
    ids=[f"{m} {p}" for m, p in OPERATIONS],
)
def test_success_response_has_a_known_shape(method, path):
    assert _problems(method, path) == []


def test_the_schema_covers_every_api_route_including_the_async_views():
    assert len(OPERATIONS) >= 43
    assert ("POST", "/api/agents/{agent_id}/chat") in OPERATIONS
    assert ("GET", "/api/agents/{agent_id}/agentbus/inbox") in OPERATIONS


def test_enum_filters_list_their_allowed_values():
    def param(path, name):
        return next(p for p in SCHEMA["paths"][path]["get"]["parameters"] if p["name"] == name)

    def values(p):
        return set(_resolve(p["schema"]).get("enum", []))

    assert values(param("/api/tasks/", "status")) >= {"pending", "in_progress", "review", "completed", "failed"}
    assert values(param("/api/requirements/", "status")) >= {"pending", "in_progress", "rejected"}
    assert values(param("/api/approvals/", "status")) == {"pending", "answered", "cancelled"}
    assert "task_review" in values(param("/api/notifications/", "type"))


# ------------------------------------------------------------------ real calls


def _openapi_to_jsonschema(node: Any, closed: bool = True) -> Any:
    """OpenAPI 3.0 → JSON Schema: ``nullable`` as a null type, and (``closed``) objects
    closed: a key the schema does not name fails."""
    if isinstance(node, list):
        return [_openapi_to_jsonschema(n, closed) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _openapi_to_jsonschema(v, closed) for k, v in node.items() if k != "nullable"}
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        if "$ref" in out or "allOf" in out or "oneOf" in out:
            out = {"anyOf": [out, {"type": "null"}]}
    if closed and "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


COMPONENTS = _openapi_to_jsonschema(copy.deepcopy(SCHEMA["components"]))
OPEN_COMPONENTS = _openapi_to_jsonschema(copy.deepcopy(SCHEMA["components"]), closed=False)


def schema_errors(method: str, path: str, status: int, body: Any) -> list[str]:
    """Where ``body`` differs from the documented answer (strict for a success; an
    error must have the documented keys and may carry more)."""
    op = SCHEMA["paths"][path][method.lower()]
    documented = op["responses"].get(str(status))
    if documented is None:
        return [f"{method} {path} answered an undocumented {status}"]
    schema = _openapi_to_jsonschema(documented["content"]["application/json"]["schema"])
    components = COMPONENTS
    if status >= 400:
        schema = _openapi_to_jsonschema(documented["content"]["application/json"]["schema"], closed=False)
        components = OPEN_COMPONENTS
    validator = Draft202012Validator({"components": components, **schema})
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(body)]


def assert_matches_schema(method: str, path: str, status: int, body: Any) -> None:
    assert schema_errors(method, path, status, body) == [], f"{method} {path} {status}"


def test_the_check_is_strict():
    """A key too many, a key missing or a wrong type in a success answer is reported."""
    ok = {"updated": 3}
    assert schema_errors("POST", "/api/notifications/mark-all-read/", 200, ok) == []
    for wrong in ({"updated": 3, "extra": 1}, {}, {"updated": "3"}):
        assert schema_errors("POST", "/api/notifications/mark-all-read/", 200, wrong) != []
    assert schema_errors("POST", "/api/notifications/mark-all-read/", 201, ok) != []


@pytest.fixture
def world(alice, alice_client, agent, agent_with_token):
    """One real object of every kind a GET path addresses, and some of each list."""
    task = alice_client.post(
        "/api/tasks/", {"title": "Typed", "assigneeId": "ada", "reviewerUserId": alice.id}, format="json"
    ).json()
    alice_client.post(f"/api/tasks/{task['id']}/comments", {"content": "a note"}, format="json")
    requirement = alice_client.post("/api/requirements/", {"title": "Typed requirement"}, format="json").json()
    alice_client.post(f"/api/requirements/{requirement['id']}/comments", {"content": "why"}, format="json")
    stream = alice_client.post("/api/agentbus/streams", {"sender": "ada", "recipient": "tok"}, format="json").json()
    approval = notification_services.approval_create(
        user=alice, title="Ship it?", options=[{"id": "yes", "label": "Yes"}, {"id": "no"}], agent=agent
    )
    notification_services.notify_user(user=alice, type="system", title="Hello", action_target={"taskId": task["id"]})
    session = alice_client.post("/api/agents/ada/sessions", {"title": "Typed"}, format="json").json()
    from markus.reports.models import DailyReport

    DailyReport.objects.create(agent=agent, date=datetime.date(2026, 12, 1), content="A typed day.")
    from markus.toolservers.models import ToolServer

    ToolServer.objects.create(name="typed", transport="stdio", command="true", env={"K": "v"}, policies={"t": "ask"})
    return {
        "name": "typed",
        "agent_id": "ada",
        "team_id": agent.team_id,
        "task_id": task["id"],
        "requirement_id": requirement["id"],
        "stream_id": stream["streamId"],
        "session_id": session["id"],
        "approval": approval,
        "date": "2026-12-01",
        "user_id": alice.id,
    }


@pytest.fixture
def recorded_params(monkeypatch):
    """The names of the query parameters looked up while a request is served."""
    seen: set[str] = set()
    for name in ("get", "__getitem__", "getlist", "__contains__"):
        original = getattr(QueryDict, name)

        def recording(self, key, *args, _original=original, **kwargs):
            seen.add(key)
            return _original(self, key, *args, **kwargs)

        monkeypatch.setattr(QueryDict, name, recording)
    return seen


GET_OPERATIONS = [(m, p) for m, p in OPERATIONS if m == "GET"]
# The long-poll inbox is an async view the schema documents by hand (agentbus/schema.py):
# called with no wait.
STAFF_ONLY = ("/api/tool-servers/", "/api/budgets/deployment/")  # the staff's (a staff user reads them)
# (The chat's resume, like the activity log, answers its documented 400 without an event to resume after.)
NEEDS_A_RUN = {"/api/agents/{agent_id}/activity-logs", "/api/agents/{agent_id}/chat"}
EXTRA_QUERY = {"/api/agents/{agent_id}/agentbus/inbox": "?timeout_seconds=0"}


@pytest.mark.django_db
@pytest.mark.parametrize(("method", "path"), GET_OPERATIONS, ids=[f"{m} {p}" for m, p in GET_OPERATIONS])
def test_every_query_parameter_a_view_reads_is_documented(
    method, path, world, alice_client, recorded_params, django_user_model
):
    url = re.sub(r"\{(\w+)\}", lambda m: str(world[m.group(1)]), path) + EXTRA_QUERY.get(path, "")
    client = alice_client
    if path.startswith(STAFF_ONLY):
        client = APIClient()
        client.force_authenticate(django_user_model.objects.create_user("root", password="x", is_staff=True))
    recorded_params.clear()
    response = client.get(url)
    # The activity log needs an activity of a loop run: without one it answers its
    # documented 400, which still shows which parameters it reads.
    assert response.status_code == (400 if path in NEEDS_A_RUN else 200), response.content
    read = recorded_params - FRAMEWORK_PARAMS
    documented = {p["name"] for p in SCHEMA["paths"][path]["get"].get("parameters", []) if p["in"] == "query"}
    assert read == documented, f"{path}: the parameters read and the documented ones differ"
    assert_matches_schema(method, path, response.status_code, response.json())


@pytest.mark.django_db
def test_writes_answer_what_their_schema_says(world, alice_client):
    task_id, requirement_id = world["task_id"], world["requirement_id"]
    calls = [
        ("POST", "/api/tasks/", "/api/tasks/", {"title": "Another", "assigneeId": "ada"}),
        ("POST", "/api/tasks/{task_id}/transition/", f"/api/tasks/{task_id}/transition", {"status": "review"}),
        ("POST", "/api/tasks/{task_id}/comments/", f"/api/tasks/{task_id}/comments", {"content": "reply"}),
        ("POST", "/api/requirements/", "/api/requirements/", {"title": "More"}),
        (
            "POST",
            "/api/requirements/{requirement_id}/comments/",
            f"/api/requirements/{requirement_id}/comments",
            {"content": "ok"},
        ),
        (
            "POST",
            "/api/requirements/{requirement_id}/{step}/",
            f"/api/requirements/{requirement_id}/cancel",
            {"reason": "no longer needed"},
        ),
        ("POST", "/api/notifications/mark-all-read/", "/api/notifications/mark-all-read", {}),
        (
            "POST",
            "/api/approvals/{approval_id}/respond/",
            f"/api/approvals/{world['approval'].id}/respond",
            {"selectedOption": "yes", "comment": "go"},
        ),
    ]
    stream_id = world["stream_id"]
    calls += [
        ("POST", "/api/agentbus/streams/", "/api/agentbus/streams", {"sender": "ada", "members": ["tok"]}),
        (
            "POST",
            "/api/agentbus/streams/{stream_id}/append/",
            f"/api/agentbus/streams/{stream_id}/append",
            {"sender": "ada", "payload": {"text": "hi"}},
        ),
        ("POST", "/api/agents/{agent_id}/agentbus/drain/", "/api/agents/tok/agentbus/drain", {"peek": True}),
        (
            "POST",
            "/api/agentbus/streams/{stream_id}/close/",
            f"/api/agentbus/streams/{stream_id}/close",
            {"sender": "ada"},
        ),
    ]
    for method, path, url, body in calls:
        response = alice_client.post(url, body, format="json")
        assert response.status_code in (200, 201), (url, response.content)
        assert_matches_schema(method, path, response.status_code, response.json())
    notification = alice_client.get("/api/notifications").json()["notifications"][0]
    response = alice_client.post(f"/api/notifications/{notification['id']}/read")
    assert_matches_schema("POST", "/api/notifications/{notification_id}/read/", 200, response.json())
    assert response.json()["read"] is True


@pytest.mark.django_db
def test_an_error_answer_matches_the_documented_error_shape(alice_client):
    response = alice_client.get("/api/tasks/?status=bogus")
    assert response.status_code == 400
    assert_matches_schema("GET", "/api/tasks/", 400, response.json())
    response = alice_client.get("/api/approvals/?status=bogus")
    assert response.status_code == 400
    assert_matches_schema("GET", "/api/approvals/", 400, response.json())


@pytest.mark.django_db
def test_the_async_chat_view_answers_what_the_hook_documents(agent, alice_client, monkeypatch, settings):
    from attention.chat import _answer

    path = "/api/agents/{agent_id}/chat"
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.05)
    response = alice_client.post("/api/agents/ada/chat", {"text": "anyone there?"}, format="json")
    assert response.status_code == 202
    assert_matches_schema("POST", path, 202, response.json())
    # The 200 is the same function's answer once the reply is stored.
    replied = _answer({"reply": "hello", "sessionId": None}, response.json()["mailboxItemId"], "ses_main")
    assert_matches_schema("POST", path, 200, replied)
    bad = alice_client.post("/api/agents/ada/chat", {"text": ""}, format="json")
    assert bad.status_code == 400
    assert_matches_schema("POST", path, 400, bad.json())
