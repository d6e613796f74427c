"""A session's message count is the messages a person reads in it (issue 37, point 8):
the activity-log lines the loop writes into the main session (read on the mind view,
hidden from the chat) are not counted ("Main session 22 messages" showed 12), and the
chat page raises the count of the session it shows as messages arrive.

alice owns agent ada."""

from __future__ import annotations

import pytest
from django.test import Client

from markus.agents.models import ChatMessage
from markus.agents.services import main_session

pytestmark = pytest.mark.django_db


def test_the_count_leaves_out_the_activity_log_lines(alice, agent):
    session = main_session(agent)
    for i in range(6):
        ChatMessage.objects.create(session=session, role="user", content=f"Question {i}")
    for i in range(10):
        ChatMessage.objects.create(
            session=session, role="system", content=f"[ACTIVITY: heartbeat] {i}", metadata={"activityLog": True}
        )
    client = Client()
    client.force_login(alice)
    html = client.get(f"/agents/{agent.id}/chat/").content.decode()
    assert html.count('class="msg ') == 6 or html.count("Question ") == 6
    assert 'data-count="6">6 messages' in html
