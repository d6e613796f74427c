"""One error shape everywhere (issue 14): ``{"detail", "code", "fields"?}`` from the DRF
views, the async views (chat, the AgentBus request) and the body limit; 409s on a
transition list the allowed targets; 413s state the limit; the async views accept
session auth with CSRF exactly like the DRF views."""

from __future__ import annotations

import logging

import pytest
from django.test import Client
from rest_framework.test import APIClient

from markus.agents.services import user_token_create
from markus.core.actors import Actor
from markus.core.limits import too_large
from markus.work.requirement_services import requirement_create
from markus.work.services import task_create

pytestmark = pytest.mark.django_db

CSRF = "a" * 32  # a CSRF secret as Django keeps it in the cookie; the header may carry it as is


def session_client(user, *, csrf: bool) -> tuple[Client, dict[str, str]]:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.cookies["csrftoken"] = CSRF
    return client, ({"HTTP_X_CSRFTOKEN": CSRF} if csrf else {})


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {user_token_create(user)[1]}")
    return client


ASYNC_POSTS = [
    ("/api/agents/ada/chat", {"text": ""}),
    ("/api/agentbus/request", {"sender": "ada", "recipient": "nobody", "payload": {}}),
]


@pytest.mark.parametrize(("path", "body"), ASYNC_POSTS)
def test_an_async_view_answers_a_session_post_with_csrf_like_a_token_post(path, body, agent, alice):
    by_token = token_client(alice).post(path, body, format="json")
    client, headers = session_client(alice, csrf=True)
    by_session = client.post(path, body, content_type="application/json", **headers)
    assert by_session.status_code != 415, by_session.json()
    assert (by_session.status_code, by_session.json()) == (by_token.status_code, by_token.json())
    assert by_session.status_code in (400, 404)


@pytest.mark.parametrize(("path", "body"), ASYNC_POSTS)
def test_an_async_view_refuses_a_session_post_without_csrf(path, body, agent, alice):
    client, _ = session_client(alice, csrf=False)
    answer = client.post(path, body, content_type="application/json")
    assert answer.status_code == 403
    assert answer.json() == {"detail": "CSRF Failed: CSRF token missing.", "code": "permission_denied"}


def test_a_drf_view_refuses_a_session_post_without_csrf_in_the_same_words(agent, alice):
    client, _ = session_client(alice, csrf=False)
    answer = client.post("/api/tasks/", {"title": "x"}, content_type="application/json")
    assert answer.status_code == 403
    assert answer.json() == {"detail": "CSRF Failed: CSRF token missing.", "code": "permission_denied"}


@pytest.mark.parametrize("path", ["/api/agents/ada/chat", "/api/agentbus/request", "/api/tasks/"])
def test_without_credentials_the_answer_is_401_not_authenticated(path, agent):
    answer = Client().post(path, {}, content_type="application/json")
    assert answer.status_code in (401, 403)
    assert answer.json()["code"] == "not_authenticated"
    assert answer.json()["detail"]


def test_a_field_map_becomes_detail_code_and_fields(agent, alice):
    answer = token_client(alice).post("/api/tasks/", {"title": ""}, format="json")
    assert answer.status_code == 400
    data = answer.json()
    assert data["code"] == "invalid"
    assert set(data["fields"]) == {"title"}
    assert data["detail"].startswith("title: ")
    assert isinstance(data["fields"]["title"], list)


def test_a_bad_json_body_answers_parse_error(agent, alice):
    answer = token_client(alice).generic("POST", "/api/tasks/", "{", content_type="application/json")
    assert answer.status_code == 400
    assert answer.json()["code"] == "parse_error"


def test_a_missing_object_answers_not_found(agent, alice):
    answer = token_client(alice).get("/api/tasks/tsk_nope")
    assert answer.status_code == 404
    assert answer.json() == {"detail": answer.json()["detail"], "code": "not_found"}


def test_a_markus_error_carries_a_code(agent, alice):
    answer = token_client(alice).post("/api/tasks/", {"title": "t", "assigneeId": "nobody"}, format="json")
    assert answer.status_code in (400, 404)
    assert answer.json()["code"] in ("invalid", "not_found")
    assert answer.json()["detail"]


@pytest.mark.parametrize("auth", ["token", "session"])
@pytest.mark.parametrize("path", ["/api/agents/ada/chat", "/api/agentbus/request"])
def test_the_async_views_answer_bad_input_in_the_same_shape(path, auth, agent, alice):
    if auth == "token":
        client, headers = token_client(alice), {}
    else:
        client, headers = session_client(alice, csrf=True)
    answer = client.generic("POST", path, "{", content_type="application/json", **headers)
    assert answer.status_code == 400
    assert answer.json()["code"] == "parse_error"
    answer = client.generic("POST", path, "[1]", content_type="application/json", **headers)
    assert answer.status_code == 400
    assert answer.json() == {
        "detail": "body must be a JSON object",
        "code": "invalid",
        "fields": {"body": ["body must be a JSON object"]},
    }


def test_an_illegal_task_transition_lists_the_allowed_targets(agent, alice):
    task = task_create(actor=Actor.for_user(alice), title="t", start=False)
    answer = token_client(alice).post(f"/api/tasks/{task.id}/transition", {"status": "archived"}, format="json")
    assert answer.status_code == 409
    data = answer.json()
    assert data["code"] == "conflict"
    assert data["allowed"] == ["in_progress", "blocked", "completed", "rejected", "cancelled"]
    assert "archived" in data["detail"]


def test_an_illegal_requirement_transition_lists_the_allowed_targets(agent, alice):
    requirement = requirement_create(actor=Actor.for_user(alice), title="Idea")
    assert requirement.status == "in_progress"
    answer = token_client(alice).post(f"/api/requirements/{requirement.id}/reject", {}, format="json")
    assert answer.status_code == 409
    data = answer.json()
    assert data["code"] == "conflict"
    assert data["allowed"] == ["completed", "cancelled"]


def test_a_413_states_the_limit(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
    assert too_large() == {
        "detail": "request body too large: over 1 MB (1048576 bytes)",
        "code": "payload_too_large",
        "limit": 1048576,
    }
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2000
    assert too_large()["detail"] == "request body too large: over 2000 bytes"


def test_an_oversized_body_to_a_drf_view_answers_the_413_shape(agent, alice, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100
    answer = token_client(alice).post("/api/tasks/", {"title": "x" * 500}, format="json")
    assert answer.status_code == 413
    assert answer.json() == {
        "detail": "request body too large: over 100 bytes",
        "code": "payload_too_large",
        "limit": 100,
    }


def test_a_server_error_is_logged_with_its_traceback_to_the_console(agent, alice, monkeypatch, caplog):
    from django.conf import settings as django_settings

    from markus.work import api as work_api

    def boom(*args, **kwargs):
        raise RuntimeError("kaboom in a view")

    monkeypatch.setattr(work_api.TaskListView, "get", boom)
    client = token_client(alice)
    client.raise_request_exception = False
    # The console handler of LOGGING is the one ``up`` prints to: django.request must reach it.
    console = django_settings.LOGGING["handlers"]["console"]
    assert console["class"] == "logging.StreamHandler"
    request_logger = django_settings.LOGGING["loggers"]["django.request"]
    assert "console" in request_logger["handlers"]
    with caplog.at_level(logging.ERROR, logger="django.request"):
        answer = client.get("/api/tasks/")
    assert answer.status_code == 500
    records = [r for r in caplog.records if r.name == "django.request" and r.exc_info]
    assert records, "the 500 was not logged with its traceback"
    assert "kaboom in a view" in "".join(logging.Formatter().formatException(records[0].exc_info))


def test_the_documented_error_components_match_the_answers(alice_client):
    schema = alice_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    error = components["Error"]
    assert set(error["properties"]) == {"detail", "code", "fields"}
    assert set(error["required"]) == {"detail", "code"}
    assert "allowed" in components["ConflictError"]["properties"]
    assert "limit" in components["PayloadTooLargeError"]["properties"]
    transition = schema["paths"]["/api/tasks/{task_id}/transition/"]["post"]["responses"]
    assert transition["409"]["content"]["application/json"]["schema"]["$ref"].endswith("/ConflictError")
    chat = schema["paths"]["/api/agents/{agent_id}/chat"]["post"]["responses"]
    assert chat["400"]["content"]["application/json"]["schema"]["required"] == ["detail", "code"]
