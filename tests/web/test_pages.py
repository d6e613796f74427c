"""The pages a person starts from: home, agents, work, the bell, styled 404/500, and the
notifications socket's refusals. alice owns agent ada (team Core, bob a member);
charlie is an outsider with his own agent zed."""

from __future__ import annotations

import json
import re

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import resolve

from markus.agents.services import agent_create, user_token_create
from markus.core.actors import Actor
from markus.work.comment_services import task_comment_create
from markus.work.requirement_services import requirement_create
from markus.work.services import task_create
from notifications.models import UserNotification
from notifications.registry import NotificationType
from notifications.services import notify_user

from .conftest import ORIGIN, session_cookie, ws_connect

# The work page answers with and without its trailing slash.
WORK_SLASH = "/work" + "/"

pytestmark = pytest.mark.django_db

HREF = re.compile(r'href="(/[^"#]*)')


@pytest.fixture
def client(alice) -> Client:
    c = Client()
    c.force_login(alice)
    return c


@pytest.fixture
def zed(charlie):
    return agent_create(name="Zed", owner=charlie, agent_id="zed")[0]


def seed(alice, n: int) -> None:
    """n agents, n tasks in mixed states with comments, n notifications."""
    actor = Actor.for_user(alice)
    for i in range(n):
        a = agent_create(name=f"Agent {i}", owner=alice, agent_id=f"ag{i}")[0]
        t = task_create(actor=actor, title=f"Task {i}", assignee_id=a.id, start=bool(i % 2))
        task_comment_create(task_id=t.id, actor=actor, content=f"note {i}")
        notify_user(user=alice, type=NotificationType.SYSTEM, title=f"Note {i}", action_target={"path": "/work"})


def internal_links(html: str) -> set[str]:
    return {h.split("?")[0] for h in HREF.findall(html) if not h.startswith("/static/")}


def assert_links_resolve(client: Client, html: str) -> None:
    for path in internal_links(html):
        resolve(path)  # raises Resolver404
        if not path.startswith(("/admin", "/accounts")):
            # a notification's link marks it read and leads on: where it leads must answer
            assert client.get(path, follow=path.startswith("/notifications/")).status_code == 200, path


# ---------------------------------------------------------------------------- home


def test_anonymous_goes_to_sign_in_and_back():
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"] == "/accounts/login/?next=/"


def test_home_shows_agents_with_state_focus_queue_and_mind_links(client, alice, agent, zed):
    actor = Actor.for_user(alice)
    task = task_create(actor=actor, title="Ship the release notes", assignee_id=agent.id)
    notify_user(
        user=alice,
        type=NotificationType.SYSTEM,
        title="Release notes need review",
        action_target={"path": f"/work?task={task.id}"},
    )
    response = client.get("/")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'href="/agents/ada/mind/"' in html
    assert "zed" not in html  # charlie's agent is not hers
    assert 'data-state="idle"' in html and "Queue: <b>" in html
    assert 'id="bell-count"' in html and 'data-unread="1"' in html
    assert f'href="/work?task={task.id}"' in html
    assert "Ship the release notes" in html and "In Progress" in html
    assert_links_resolve(client, html)


def test_home_reads_in_a_fixed_number_of_queries(client, alice):
    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/").status_code == 200
        return len(ctx.captured_queries)

    seed(alice, 2)
    small = count()
    seed_more = [f"x{i}" for i in range(8)]
    actor = Actor.for_user(alice)
    for i, name in enumerate(seed_more):
        a = agent_create(name=name, owner=alice, agent_id=name)[0]
        task_create(actor=actor, title=f"More {i}", assignee_id=a.id)
        notify_user(user=alice, type=NotificationType.SYSTEM, title=f"More {i}")
    assert count() == small
    assert small <= 12


def test_agents_and_work_pages_read_in_a_fixed_number_of_queries(client, alice):
    def count(path: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(path).status_code == 200
        return len(ctx.captured_queries)

    seed(alice, 2)
    # Every list has a row: an empty page of a list reads no rows, one query fewer.
    requirement_create(actor=Actor.for_user(alice), title="First", agent_id="ag0")
    small = (count("/agents/"), count("/work"))
    seed(alice, 0)
    actor = Actor.for_user(alice)
    for i in range(8):
        a = agent_create(name=f"More {i}", owner=alice, agent_id=f"more{i}")[0]
        task_create(actor=actor, title=f"More {i}", assignee_id=a.id)
        requirement_create(actor=actor, title=f"Req {i}", agent_id=a.id)
    assert (count("/agents/"), count("/work")) == small


def test_agents_page_lists_visible_agents_only(client, agent, zed):
    html = client.get("/agents/").content.decode()
    assert 'href="/agents/ada/mind/"' in html and "/agents/zed/" not in html
    assert_links_resolve(client, html)
    assert client.get("/agents/zed/mind/").status_code == 404


def test_a_teammate_sees_the_team_agents(bob, agent):
    c = Client()
    c.force_login(bob)
    assert 'href="/agents/ada/mind/"' in c.get("/").content.decode()


# ---------------------------------------------------------------------------- work


def test_work_lists_tasks_and_requirements_and_opens_one_with_its_comments(client, alice, agent):
    actor = Actor.for_user(alice)
    requirement = requirement_create(actor=actor, title="Single sign-on", agent_id=agent.id)
    task = task_create(actor=actor, title="Wire the SSO callback", assignee_id=agent.id, requirement_id=requirement.id)
    task_comment_create(task_id=task.id, actor=actor, content="Use the staging IdP first.")

    html = client.get("/work").content.decode()
    assert "Wire the SSO callback" in html and "Single sign-on" in html
    assert_links_resolve(client, html)

    for path in (f"/work?task={task.id}", f"{WORK_SLASH}?task={task.id}"):
        response = client.get(path)
        assert response.status_code == 200, path
        page = response.content.decode()
        assert "Wire the SSO callback" in page and "Use the staging IdP first." in page
        assert 'href="/agents/ada/mind/"' in page

    page = client.get(f"/work?requirement={requirement.id}").content.decode()
    assert "Single sign-on" in page and f"?task={task.id}" in page


def test_work_item_the_user_may_not_see_is_a_styled_404(client, charlie, zed):
    foreign = task_create(actor=Actor.for_user(charlie), title="Charlie's secret", assignee_id=zed.id)
    for path in (f"/work?task={foreign.id}", "/work?task=missing", f"{WORK_SLASH}?requirement=missing"):
        response = client.get(path)
        assert response.status_code == 404, path
        html = response.content.decode()
        assert "Nothing here" in html and 'href="/"' in html and "Charlie's secret" not in html


# ---------------------------------------------------------------------------- notifications


def test_bell_partial_and_mark_read(client, alice, charlie):
    mine = notify_user(user=alice, type=NotificationType.SYSTEM, title="One")
    notify_user(user=alice, type=NotificationType.SYSTEM, title="Two")
    theirs = notify_user(user=charlie, type=NotificationType.SYSTEM, title="Not hers")
    assert 'data-unread="2"' in client.get("/notifications/bell/").content.decode()

    response = client.post(f"/notifications/{mine.id}/read/")
    assert response.status_code == 200 and response["HX-Trigger"] == "markus:bell"
    assert UserNotification.objects.get(id=mine.id).read
    assert 'data-unread="1"' in client.get("/notifications/bell/").content.decode()

    assert client.post(f"/notifications/{theirs.id}/read/").status_code == 404
    assert not UserNotification.objects.get(id=theirs.id).read
    assert client.get(f"/notifications/{mine.id}/read/").status_code == 405

    assert client.post("/notifications/read-all/").status_code == 200
    assert 'data-unread="0"' in client.get("/notifications/bell/").content.decode()


def test_posts_need_csrf(alice):
    c = Client(enforce_csrf_checks=True)
    c.force_login(alice)
    n = notify_user(user=alice, type=NotificationType.SYSTEM, title="One")
    assert c.post(f"/notifications/{n.id}/read/").status_code == 403
    token = c.get("/").context["csrf_token"]
    assert c.post(f"/notifications/{n.id}/read/", headers={"X-CSRFToken": str(token)}).status_code == 200


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize("path", ["/nope/", "/agents/ada/nope/"])
def test_unknown_pages_are_a_styled_404_with_debug_off(settings, client, path):
    settings.DEBUG = False
    response = client.get(path)
    assert response.status_code == 404
    html = response.content.decode()
    assert "Nothing here" in html and 'class="topbar"' in html and "web/web.css" in html


def test_a_server_error_is_the_styled_500(settings, alice):
    settings.DEBUG = False
    from markus.web import pages

    response = pages.server_error(Client().get("/").wsgi_request)
    assert response.status_code == 500
    html = response.content.decode()
    assert "Something went wrong" in html and "web/web.css" in html


def test_an_exception_in_a_view_renders_the_500_page(settings, client, monkeypatch):
    settings.DEBUG = False
    from markus.web import pages

    def boom(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(pages, "agent_rows", boom)
    c = Client(raise_request_exception=False)
    c.cookies = client.cookies
    response = c.get("/agents/")
    assert response.status_code == 500
    assert "Something went wrong" in response.content.decode() and "boom" not in response.content.decode()


# ---------------------------------------------------------------------------- socket refusals


def refusal(path: str, **kw) -> tuple[bool, dict]:
    async def go():
        communicator, connected = await ws_connect(path, **kw)
        try:
            return connected, await communicator.receive_output(timeout=5)
        finally:
            await communicator.disconnect()

    return async_to_sync(go)()


@pytest.mark.django_db(transaction=True)
def test_notifications_socket_refusals_have_a_code_and_reason(alice, agent_with_token):
    accepted, close = refusal("/ws/notifications/")
    assert accepted and close == {"type": "websocket.close", "code": 4401, "reason": "not signed in"}

    _, close = refusal("/ws/notifications/?token=not-a-token")
    assert (close["code"], close["reason"]) == (4401, "invalid token")

    raw = agent_with_token[1]
    _, close = refusal(f"/ws/notifications/?token={raw}")
    assert close["code"] == 4403 and "agent" in close["reason"]


@pytest.mark.django_db(transaction=True)
def test_a_signed_in_user_still_gets_frames(alice):
    async def go():
        communicator, connected = await ws_connect(
            "/ws/notifications/", cookie=await database_sync_to_async(session_cookie)(alice), origin=ORIGIN
        )
        try:
            assert connected
            await database_sync_to_async(notify_user)(user=alice, type=NotificationType.SYSTEM, title="Hi")
            return await communicator.receive_json_from(timeout=5)
        finally:
            await communicator.disconnect()

    frame = async_to_sync(go)()
    assert frame["type"] == "notification" and frame["notification"]["title"] == "Hi"
    key = user_token_create(alice)[1]

    async def with_token():
        communicator, connected = await ws_connect(f"/ws/notifications/?token={key}", origin=None)
        try:
            return connected, await communicator.receive_nothing(timeout=0.2)
        finally:
            await communicator.disconnect()

    assert async_to_sync(with_token)() == (True, True)  # open, and not closed on it


@pytest.mark.django_db(transaction=True)
def test_agent_socket_and_origin_refusals_have_a_code_and_reason(alice, charlie, agent, agent_with_token):
    assert refusal(f"/ws/agents/{agent.id}/")[1]["code"] == 4401
    assert refusal(f"/ws/agents/{agent.id}/?token=nope")[1] == {
        "type": "websocket.close",
        "code": 4401,
        "reason": "invalid token",
    }
    raw = agent_with_token[1]
    assert refusal(f"/ws/agents/{agent.id}/?token={raw}")[1]["code"] == 4403
    foreign = refusal(f"/ws/agents/{agent.id}/", cookie=session_cookie(charlie))[1]
    missing = refusal("/ws/agents/no-such-agent/", cookie=session_cookie(charlie))[1]
    assert foreign == missing == {"type": "websocket.close", "code": 4404, "reason": "no such agent"}
    evil = (b"origin", b"https://evil.example")
    for path in ("/ws/notifications/", f"/ws/agents/{agent.id}/"):
        accepted, close = refusal(path, cookie=session_cookie(alice), origin=evil)
        assert accepted and close == {"type": "websocket.close", "code": 4403, "reason": "origin not allowed"}


@pytest.mark.parametrize("path", ["/api/nothing-here/", "/api/agents/ada/nonsense"])
def test_an_unknown_api_url_answers_the_api_error_shape(path, settings):
    settings.DEBUG = False
    response = Client().get(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {"detail": f"No API endpoint at {path}.", "code": "not_found"}


def test_an_api_server_error_answers_the_api_error_shape(rf):
    from markus.web.pages import server_error

    response = server_error(rf.get("/api/agents/"))
    assert response.status_code == 500
    assert json.loads(response.content) == {"detail": "Server error.", "code": "server_error"}
