"""The statements the loop runs for every item on the mailbox's table and the rows it
writes for every item (decision, activity, activity log, main-session line and the
session's last-message time) are made
once per connection (``markus.core.statements``), not built by the ORM for each item:
building them cost more than the database spent running them (issue 39, point 6).
Checked by the ORM's compilers, never by time; the rows written are read back."""

from __future__ import annotations

from collections import Counter

import pytest
from django.db.models.sql.compiler import SQLCompiler, SQLInsertCompiler, SQLUpdateCompiler

from attention import loop
from attention.models import AgentActivity, AgentActivityLog, AgentDecision, DecisionType
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage, ChatSession
from markus.llm.base import set_provider_override

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]

HOT_TABLES = {
    MailboxItem._meta.db_table,
    AgentDecision._meta.db_table,
    AgentActivity._meta.db_table,
    AgentActivityLog._meta.db_table,
    ChatMessage._meta.db_table,
    ChatSession._meta.db_table,
}


@pytest.fixture(autouse=True)
def offline_brain(settings, monkeypatch):
    set_provider_override(None)
    monkeypatch.setitem(settings.MARKUS, "LLM_PROVIDER", "offline")
    monkeypatch.setitem(settings.MARKUS, "DELIBERATION", False)


def enqueue(agent_id: str, n: int) -> list[MailboxItem]:
    return [
        mailbox_enqueue(
            agent_id=agent_id,
            source_type=T.SYSTEM_EVENT,
            payload={"summary": f"item {i}", "content": f"content {i}"},
        )
        for i in range(n)
    ]


def test_an_item_builds_no_statement_on_the_queue_nor_its_records_with_the_orm(agent, monkeypatch):
    # More items than the loop's read holds: triage weighs them and looks past the read
    # for stale ones; the prompt lists the waiting ones.
    enqueue(agent.id, loop.QUEUE_READ_LIMIT + 8)
    loop.run_attention(agent.id, budget=1)  # the first item makes what is made once
    seen: Counter[tuple[str, str]] = Counter()

    def spy(original, kind):
        def as_sql(self, *args, **kwargs):
            model = self.query.model
            seen[(kind, model._meta.db_table if model is not None else "")] += 1
            return original(self, *args, **kwargs)

        return as_sql

    def hot_statements_built(items: int) -> dict[tuple[str, str], int]:
        seen.clear()
        with monkeypatch.context() as patched:
            patched.setattr(SQLCompiler, "as_sql", spy(SQLCompiler.as_sql, "select"))
            patched.setattr(SQLInsertCompiler, "as_sql", spy(SQLInsertCompiler.as_sql, "insert"))
            patched.setattr(SQLUpdateCompiler, "as_sql", spy(SQLUpdateCompiler.as_sql, "update"))
            result = loop.run_attention(agent.id, budget=items)
        assert result.processed == items
        return {key: n for key, n in seen.items() if key[1] in HOT_TABLES}

    # A run builds the same few (once a run, not once an item) whatever its items: none
    # of the records, and no read of the queue but one as the run ends.
    two, five = hot_statements_built(2), hot_statements_built(5)
    assert two == five
    assert not [key for key in five if key[0] in ("insert", "update")]
    assert sum(five.values()) <= 1, five
    # What the statements wrote is what the ORM wrote: read back through it.
    done = list(MailboxItem.objects.filter(agent=agent, status=Status.COMPLETED).order_by("completed_at"))
    assert len(done) == 8
    last = done[-1]
    pick = AgentDecision.objects.get(mailbox_item=last, decision_type=DecisionType.PICK)
    assert pick.agent_id == agent.id and pick.created_at is not None and isinstance(pick.context, dict)
    activity = AgentActivity.objects.get(mailbox_item=last)
    assert activity.ended_at is not None and activity.success and activity.label.endswith(last.summary)
    lines = list(AgentActivityLog.objects.filter(activity=activity).order_by("seq"))
    assert [line.seq for line in lines] == list(range(1, len(lines) + 1)) and all(line.id for line in lines)
    assert isinstance(lines[0].metadata, dict)
    note = ChatMessage.objects.get(metadata__mailboxItemId=last.id)
    assert note.role == ChatMessage.Role.SYSTEM and note.content.startswith("[ACTIVITY: system_event]")
    assert ChatSession.objects.get(id=note.session_id).last_message_at == note.created_at
