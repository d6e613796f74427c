"""A model behind the local OpenAI stub (the real SDK path) that answers every item at
once and reports the same usage for every call, a third of its input cached; prices
for it; and helpers to fill a queue and run the loop by hand."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from tests.llm.stub_openai import StubOpenAI

# Every call: 100 tokens in (40 of them cached), 20 out: 120 tokens.
USAGE = {
    "prompt_tokens": 100,
    "completion_tokens": 20,
    "total_tokens": 120,
    "prompt_tokens_details": {"cached_tokens": 40},
}
PER_CALL = 120
# USD per million: 1 in, 0.5 cached in, 4 out: a call costs (60 + 20 + 80) / 1e6.
PRICE = {"input": 1.0, "cachedInput": 0.5, "output": 4.0}
COST_PER_CALL = 0.00016


@pytest.fixture
def stub(settings, monkeypatch):
    with StubOpenAI([], chooser=lambda body: {"content": "done"}, usage=USAGE) as server:
        for key, value in {
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": server.url,
            "LLM_API_KEY": "sk-test",
            "LLM_MODEL": "stub-model",
            "DELIBERATION": False,
            "INTERRUPT_JUDGE": False,
            "TRIAGE_BACKLOG_THRESHOLD": 1000,
            "PRICES": {**settings.MARKUS["PRICES"], "stub-model": PRICE},
        }.items():
            monkeypatch.setitem(settings.MARKUS, key, value)
        yield server


@pytest.fixture
def bea(alice, team):
    """A second agent of alice's team."""
    agent, _ = agent_create(name="Bea", role="engineer", owner=alice, team=team, agent_id="bea")
    return agent


def notices(agent, n: int, *, priority: int = 2) -> list[MailboxItem]:
    """``n`` system events (each an LLM item), queued in order a minute apart."""
    items = []
    for i in range(n):
        item = mailbox_enqueue(
            agent_id=agent.id, source_type=T.SYSTEM_EVENT, priority=priority, payload={"summary": f"notice {i}"}
        )
        MailboxItem.objects.filter(id=item.id).update(queued_at=timezone.now() - timedelta(minutes=60 - i))
        items.append(item)
    return items


def statuses(agent) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in MailboxItem.objects.filter(agent=agent).values_list("status", flat=True):
        counts[status] = counts.get(status, 0) + 1
    return counts


def llm_requests(server) -> int:
    return sum(1 for r in server.requests if r["path"].endswith("/chat/completions"))
