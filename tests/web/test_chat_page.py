"""An agent's chat page: its sessions (main first), the conversation with "Load
earlier" by cursor and the newer messages by ``after``, a new session, private
sessions only for their person; linked from the mind view, the agents list and an
``open_chat`` notification. alice owns ada (team Core, bob a member)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from markus.agents.models import ChatMessage, ChatSession
from markus.agents.services import main_session
from markus.web import chat_pages
from notifications.models import UserNotification
from notifications.services import notify_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(alice) -> Client:
    c = Client()
    c.force_login(alice)
    return c


def talk(session: ChatSession, n: int, start: int = 0) -> list[ChatMessage]:
    base = timezone.now() - timedelta(hours=1)
    rows = []
    for i in range(start, start + n):
        role = "user" if i % 2 == 0 else "assistant"
        rows.append(
            ChatMessage.objects.create(
                session=session, role=role, content=f"message {i}", created_at=base + timedelta(seconds=i)
            )
        )
    return rows


def test_the_chat_page_shows_the_history_and_loads_earlier_by_cursor(client, agent):
    session = main_session(agent.id)
    talk(session, chat_pages.PAGE + 5)
    ChatMessage.objects.create(session=session, role="system", content="[ACTIVITY: x]", metadata={"activityLog": True})
    page = client.get(f"/agents/{agent.id}/chat/").content.decode()
    assert "Main session" in page and f"message {chat_pages.PAGE + 4}" in page
    assert "message 4<" not in page and "[ACTIVITY: x]" not in page  # older ones wait; the log lines are not talk
    assert "Load earlier" in page
    cursor = page.split("before=")[1].split('"')[0]
    earlier = client.get(f"/agents/{agent.id}/chat/messages/?session={session.id}&before={cursor}").content.decode()
    assert "message 0<" in earlier and "message 4<" in earlier and "Load earlier" not in earlier
    bad = client.get(f"/agents/{agent.id}/chat/messages/?session={session.id}&before=x1")
    assert bad.status_code == 400 and b"before must be the id of a message" in bad.content


def test_newer_messages_are_read_after_the_last_one_shown(client, agent):
    session = main_session(agent.id)
    shown = talk(session, 3)
    talk(session, 2, start=3)
    newer = client.get(f"/agents/{agent.id}/chat/messages/?session={session.id}&after={shown[-1].pk}")
    html = newer.content.decode()
    assert "message 3<" in html and "message 4<" in html and "message 2<" not in html


def test_a_new_session_is_the_callers_own_and_private_to_them(client, alice, bob, agent):
    created = client.post(f"/agents/{agent.id}/chat/sessions/new/", {"title": "Release"})
    session = ChatSession.objects.get(agent=agent, title="Release")
    assert created["Location"] == f"/agents/{agent.id}/chat/?session={session.id}"
    assert session.user_id == alice.pk
    page = client.get(created["Location"]).content.decode()
    assert "Release" in page and f'data-session="{session.id}"' in page
    teammate = Client()
    teammate.force_login(bob)
    assert teammate.get(created["Location"]).status_code == 404
    assert teammate.get(f"/agents/{agent.id}/chat/").status_code == 200  # the main session is everybody's


def test_the_chat_page_is_linked_from_the_mind_view_the_agents_list_and_open_chat(client, alice, agent):
    session = main_session(agent.id)
    talk(session, 2)
    assert f'href="/agents/{agent.id}/chat/"' in client.get(f"/agents/{agent.id}/mind/").content.decode()
    mind = client.get(f"/agents/{agent.id}/mind/").content.decode()
    assert 'id="chat-recent"' in mind and "message 1" in mind  # the mind view's box shows the recent talk
    assert f'href="/agents/{agent.id}/chat/"' in client.get("/agents/").content.decode()
    note = notify_user(
        user=alice,
        type="system",
        title="Hello",
        action_type="open_chat",
        action_target={"agentId": agent.id, "sessionId": session.id},
    )
    assert client.get(f"/notifications/{note.id}/open/")["Location"] == f"/agents/{agent.id}/chat/?session={session.id}"
    assert UserNotification.objects.get(id=note.id).read


def test_the_chat_page_reads_in_a_fixed_number_of_queries(client, alice, agent):
    session = main_session(agent.id)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/agents/{agent.id}/chat/").status_code == 200
        return len(ctx.captured_queries)

    talk(session, 4)
    ChatSession.objects.create(agent=agent, user=alice, title="One")
    small = count()
    talk(session, 40, start=4)
    for i in range(5):
        talk(ChatSession.objects.create(agent=agent, user=alice, title=f"S{i}"), 3)
    assert count() == small
