"""The main session's activity-log lines (seed section 20: ``[ACTIVITY: <type>] <summary>
→ <outcome>``, ``activityLog`` in their metadata) are hidden from the chat (the chat
page, the sessions API, the mind view's chat box) and shown in the mind view, which is
where the seed keeps them. A ``notify_user`` message is chat, not a log line."""

from __future__ import annotations

import pytest
from django.test import Client

from attention import loop
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from markus.agents.services import main_session
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from tests.conftest import client_for

pytestmark = pytest.mark.django_db
LINE = "[ACTIVITY: heartbeat] Heartbeat check-in → heartbeat processed"


@pytest.fixture
def worked(agent):
    """ada ran a heartbeat (its log line in the main session) and, in the same session,
    a person said something and the agent told them something (notify_user)."""
    session = main_session(agent.id)
    ChatMessage.objects.create(session=session, role="user", content="Morning, Ada", metadata={})
    provider = ScriptedProvider([Turn(text="All quiet")])
    set_provider_override(provider)
    try:
        mailbox_enqueue(agent_id=agent.id, source_type=T.HEARTBEAT, payload={"summary": "Heartbeat check-in"})
        loop.run_attention(agent.id)
    finally:
        set_provider_override(None)
    ChatMessage.objects.create(
        session=session, role="assistant", content="The deploy is done.", metadata={"notifyUser": True}
    )
    line = ChatMessage.objects.get(session=session, metadata__activityLog=True)
    assert line.content.startswith(LINE)
    return session


def page(user, url: str) -> str:
    c = Client()
    c.force_login(user)
    response = c.get(url)
    assert response.status_code == 200, url
    return response.content.decode()


def test_the_chat_page_hides_the_log_lines_and_the_sessions_api_flags_them(alice, agent, worked):
    chat = page(alice, f"/agents/{agent.id}/chat/")
    assert "Morning, Ada" in chat and "The deploy is done." in chat
    assert "[ACTIVITY:" not in chat
    messages = client_for(alice).get(f"/api/agents/{agent.id}/sessions/{worked.id}/messages").json()["messages"]
    contents = [m["content"] for m in messages]
    assert "Morning, Ada" in contents and "The deploy is done." in contents
    # The API gives the whole session; a log line says what it is, so a client hides it
    # as the pages do (upstream's frontend filters on the same flag).
    lines = [m for m in messages if m["content"].startswith("[ACTIVITY:")]
    assert lines and all(m["metadata"].get("activityLog") is True for m in lines)
    assert not any(m["metadata"].get("activityLog") for m in messages if m not in lines)


def test_the_mind_view_shows_the_log_lines_and_its_chat_box_does_not(alice, agent, worked):
    mind = page(alice, f"/agents/{agent.id}/mind/")
    log = mind.split('id="activity-log"')[1].split("</details>")[0]
    assert "[ACTIVITY: heartbeat] Heartbeat check-in → heartbeat processed" in log
    assert "Morning, Ada" not in log and "The deploy is done." not in log
    box = mind.split('id="chat-recent"')[1].split("</ol>")[0] if 'id="chat-recent"' in mind else ""
    assert "[ACTIVITY:" not in box
