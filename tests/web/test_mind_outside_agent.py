"""An outside agent's mind view says it is outside (issue 36, point 1): it shows its bus
inbox (what waits after its cursor, the cursor, when the agent last read) instead of a
brain, an attention state and a mailbox queue, and offers no Wake or Heartbeat (it has
no loop to wake). alice owns eve, an outside agent, and ada, an internal one."""

from __future__ import annotations

import pytest
from django.test import Client

from agentbus import services
from agentbus.models import INBOX_TOPIC, ConsumerCursor
from mailbox.registry import MailboxType
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from markus.agents.services import agent_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def eve(alice, team):
    return agent_create(name="Eve", kind=Agent.Kind.EXTERNAL, owner=alice, team=team, agent_id="eve")[0]


def mind(user, agent_id: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(f"/agents/{agent_id}/mind/")
    assert response.status_code == 200
    return response.content.decode()


def tell(agent_id: str, text: str) -> None:
    mailbox_enqueue(agent_id=agent_id, source_type=MailboxType.SYSTEM_EVENT, payload={"summary": text})


def test_the_mind_view_of_an_outside_agent_shows_its_inbox_and_cursor_not_a_queue(alice, eve):
    tell(eve.id, "one")
    services.inbox_drain(agent_id=eve.id)  # eve read the first
    tell(eve.id, "two")
    tell(eve.id, "three")
    cursor = ConsumerCursor.objects.get(agent_id=eve.id, topic=INBOX_TOPIC)
    html = mind(alice, eve.id)
    assert "Outside agent" in html and "AgentBus" in html
    assert 'id="inbox-pending">2<' in html  # two messages wait after its cursor
    assert f'data-cursor-position="{cursor.position}"' in html
    assert 'last read <time datetime="' in html and "never read" not in html
    for gone in ("Offline brain", "Queue:", "ctl-wake", "ctl-heartbeat", "Next heartbeat"):
        assert gone not in html, gone


def test_an_outside_agent_that_never_read_says_so(alice, eve):
    tell(eve.id, "one")
    html = mind(alice, eve.id)
    assert 'id="inbox-pending">1<' in html and "never read" in html


def test_an_internal_agent_keeps_its_queue_and_controls(alice, agent):
    html = mind(alice, agent.id)
    assert "Queue:" in html and "ctl-wake" in html and "Outside agent" not in html
