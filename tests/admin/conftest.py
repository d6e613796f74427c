"""Personas of the console: the operator (a superuser), alice (a user, not staff).
``console`` puts one of everything in the database so every page has rows."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from agentbus.services import send_agent_message
from attention.models import (
    AgentActivity,
    AgentActivityLog,
    AgentAttention,
    AgentDecision,
    AttentionState,
    DecisionType,
    LLMSession,
)
from mailbox.registry import MailboxType
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from notifications.registry import NotificationType
from notifications.services import approval_create, notify_user

T = MailboxType


@pytest.fixture
def operator_user(django_user_model):
    return django_user_model.objects.create_superuser("operator", "op@example.com", "pw-operator")


@pytest.fixture
def operator(operator_user):
    client = Client()
    client.force_login(operator_user)
    return client


@pytest.fixture
def alice_browser(alice):
    client = Client()
    client.force_login(alice)
    return client


def focus_on(agent, item, *, live: bool = True) -> AgentAttention:
    """The attention row of an agent whose loop holds the lease and works on ``item``."""
    now = timezone.now()
    row, _ = AgentAttention.objects.update_or_create(
        agent=agent,
        defaults={
            "state": AttentionState.FOCUSED,
            "lease_owner": "worker-1" if live else "",
            "lease_expires_at": now + (timedelta(minutes=5) if live else -timedelta(minutes=5)),
            "lease_epoch": 3,
            "current_item": item,
            "focus_started_at": now,
        },
    )
    return row


@pytest.fixture
def bea(alice, team):
    agent, _ = agent_create(name="Bea", role="reviewer", owner=alice, team=team, agent_id="bea")
    return agent


@pytest.fixture
def console(alice, agent, bea):
    """Ada is focused on a chat, has a queued heartbeat and a bus message from Bea;
    her chat has a decision, an activity with a log and an LLM session; Alice has a
    notification and a pending approval."""
    chat = mailbox_enqueue(
        agent_id=agent.id, source_type=T.HUMAN_CHAT, payload={"summary": "Hello there", "content": "Hello there"}
    )
    beat = mailbox_enqueue(agent_id=agent.id, source_type=T.HEARTBEAT, payload={"summary": "Heartbeat"})
    focus_on(agent, chat)
    decision = AgentDecision.objects.create(
        agent=agent,
        mailbox_item=chat,
        decision_type=DecisionType.PICK,
        reasoning="Idle — picked from queue",
        lease_epoch=3,
    )
    activity = AgentActivity.objects.create(agent=agent, mailbox_item=chat, type="chat", label="Chat: Hello there")
    AgentActivityLog.objects.create(activity=activity, seq=1, type="text", content="Thinking about hello")
    session = LLMSession.objects.create(
        id=f"ls_{chat.id}",
        agent=agent,
        mailbox_item=chat,
        messages=[{"role": "user", "content": "Hello there"}],
        turn_count=1,
    )
    chunk = send_agent_message(sender=bea, recipient=agent, text="Can you review?")
    notification = notify_user(user=alice, type=NotificationType.SYSTEM, title="Welcome")
    approval = approval_create(user=alice, title="Deploy?", agent=agent, mailbox_item=chat)
    return {
        "chat": chat,
        "beat": beat,
        "decision": decision,
        "activity": activity,
        "session": session,
        "chunk": chunk,
        "notification": notification,
        "approval": approval,
    }
