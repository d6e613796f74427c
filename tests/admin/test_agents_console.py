"""The agents changelist shows live state, queue depth and the bus inbox in one query
per page; the actions drive the attention services."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agentbus import selectors as bus
from agentbus.services import inbox_drain, send_agent_message, stream_append, stream_open
from attention.models import AgentAttention
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.console.selectors import agents_for_console

from .conftest import focus_on

T = MailboxType
pytestmark = pytest.mark.django_db
CHANGELIST = "admin:agents_agent_changelist"


def act(client, action, *agents, **extra):
    return client.post(reverse(CHANGELIST), {"action": action, "_selected_action": [a.pk for a in agents], **extra})


def row_of(response, agent_id):
    return next(a for a in response.context["cl"].result_list if a.pk == agent_id)


def test_the_changelist_shows_focus_queue_depth_and_pending_inbox(operator, console, agent, bea):
    response = operator.get(reverse(CHANGELIST))
    ada = row_of(response, agent.id)
    assert ada.queue_depth == MailboxItem.objects.filter(agent=agent, status=Status.QUEUED).count() == 3
    # Ada is internal: her mailbox took the bus message, so nothing waits on her bus inbox.
    assert ada.pending_inbox == bus.pending_count(agent.id) == 0
    html = response.content.decode()
    assert "focused" in html and "Hello there" in html
    assert row_of(response, bea.id).queue_depth == 0


def test_an_expired_lease_shows_the_agent_idle(operator, console, agent):
    focus_on(agent, console["chat"], live=False)
    response = operator.get(reverse(CHANGELIST))
    admin = response.context["cl"].model_admin
    ada = row_of(response, agent.id)
    assert admin.attention_state(ada) == "idle" and admin.current_focus(ada) == "—"


def test_the_pending_inbox_column_agrees_with_the_bus_selector(agent, bea, alice, team):
    cy, _ = agent_create(name="Cy", kind=Agent.Kind.EXTERNAL, owner=alice, team=team, agent_id="cy")
    send_agent_message(sender=bea, recipient=agent, text="one")
    send_agent_message(sender=agent, recipient=bea, text="own message, not in Ada's inbox")
    group = stream_open(sender=bea, members=[agent, cy])
    stream_append(stream_id=group.id, sender=bea, payload={"text": "to the group"})
    stream_append(stream_id=group.id, sender=cy, payload={"text": "from cy"})
    inbox_drain(agent_id=cy.id)
    operator_stream = stream_open(sender=None, recipient=cy)
    stream_append(stream_id=operator_stream.id, sender=None, payload={"text": "from the operator"})
    counts = {a.id: a.pending_inbox for a in agents_for_console(Agent.objects.all())}
    assert counts == {a: bus.pending_count(a) for a in ("ada", "bea", "cy")}
    # Ada (internal) heard hers through her mailbox; cy (external) has the operator's one.
    assert counts["ada"] == 0 and counts["cy"] == 1


def _busy_agent(i: int, owner, team) -> Agent:
    agent, _ = agent_create(name=f"Agent {i}", owner=owner, team=team, agent_id=f"a{i:02d}")
    chat = mailbox_enqueue(agent_id=agent.id, source_type=T.HUMAN_CHAT, payload={"summary": f"hi {i}"})
    mailbox_enqueue(agent_id=agent.id, source_type=T.HEARTBEAT, payload={"summary": "beat"})
    focus_on(agent, chat)
    return agent


def _changelist_queries(client) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(reverse(CHANGELIST)).status_code == 200
    return len(queries)


def test_the_changelist_costs_the_same_queries_for_one_agent_as_for_ten(
    operator, alice, team, django_assert_max_num_queries
):
    sender = _busy_agent(0, alice, team)
    one = _changelist_queries(operator)
    for i in range(1, 10):
        agent = _busy_agent(i, alice, team)
        send_agent_message(sender=sender, recipient=agent, text="ping")
    with django_assert_max_num_queries(one):
        operator.get(reverse(CHANGELIST))
    assert _changelist_queries(operator) == one


def test_pause_resume_and_stop_change_the_run_status(operator, agent, bea):
    AgentAttention.objects.create(agent=agent)
    act(operator, "agent_pause", agent, bea)
    assert set(Agent.objects.values_list("status", flat=True)) == {Agent.RunStatus.PAUSED}
    assert AgentAttention.objects.get(agent=agent).cancel_requested is True
    act(operator, "agent_resume", agent)
    agent.refresh_from_db()
    assert agent.status == Agent.RunStatus.RUNNING
    assert AgentAttention.objects.get(agent=agent).cancel_requested is False
    act(operator, "agent_stop", agent)
    agent.refresh_from_db()
    assert agent.status == Agent.RunStatus.STOPPED


def test_wake_now_sends_run_attention_for_running_internal_agents_only(operator, agent, bea, monkeypatch):
    woken = []
    monkeypatch.setattr("attention.services.wake", lambda agent_id, **kw: woken.append(agent_id))
    Agent.objects.filter(id=bea.id).update(status=Agent.RunStatus.PAUSED)
    response = act(operator, "wake_now", agent, bea)
    assert response.status_code == 302
    assert woken == [agent.id]
    messages = [str(m) for m in operator.get(reverse(CHANGELIST)).context["messages"]]
    assert any("bea is internal and paused" in m for m in messages)


def test_send_message_asks_for_the_text_then_enqueues_a_chat_from_the_operator(operator, operator_user, agent, bea):
    form = act(operator, "send_message", agent, bea)
    assert form.status_code == 200 and b'name="text"' in form.content
    assert not MailboxItem.objects.exists()
    done = act(operator, "send_message", agent, bea, apply="yes", text="Please report in")
    assert done.status_code == 302
    items = MailboxItem.objects.order_by("agent_id")
    assert [(i.agent_id, i.source_type, i.status) for i in items] == [
        ("ada", T.HUMAN_CHAT, Status.QUEUED),
        ("bea", T.HUMAN_CHAT, Status.QUEUED),
    ]
    assert items[0].content == "Please report in"
    assert items[0].metadata["senderRole"] == "user"
    assert items[0].metadata["senderId"] == str(operator_user.pk)
    assert items[0].metadata["senderName"] == "operator"


def test_a_message_longer_than_a_chat_may_be_is_not_sent(operator, agent):
    from markus.core.limits import CHAT_TEXT_MAX_CHARS

    response = act(operator, "send_message", agent, apply="yes", text="x" * (CHAT_TEXT_MAX_CHARS + 1))
    assert response.status_code == 200 and response.context["form"].errors
    assert not MailboxItem.objects.exists()


def test_an_empty_message_is_not_sent(operator, agent):
    response = act(operator, "send_message", agent, apply="yes", text="  ")
    assert response.status_code == 200 and response.context["form"].errors
    assert not MailboxItem.objects.exists()


def test_an_external_agent_gets_no_mailbox_message(operator, alice, team):
    cy, _ = agent_create(name="Cy", kind=Agent.Kind.EXTERNAL, owner=alice, team=team, agent_id="cy")
    act(operator, "send_message", cy, apply="yes", text="hello")
    assert not MailboxItem.objects.exists()


def test_run_a_heartbeat_now_enqueues_one_heartbeat_per_selected_agent(operator, agent, bea, alice, team):
    agent_create(name="Idle", owner=alice, team=team, agent_id="idle")
    act(operator, "heartbeat_now", agent, bea)
    rows = MailboxItem.objects.order_by("agent_id").values_list("agent_id", "source_type", "status")
    assert list(rows) == [("ada", T.HEARTBEAT, Status.QUEUED), ("bea", T.HEARTBEAT, Status.QUEUED)]
    assert MailboxItem.objects.first().metadata["requestedBy"] == "operator"
