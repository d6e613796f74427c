"""The statements the loop runs for every item on the mailbox's table and the rows it
writes for every item (decision, activity, activity log, main-session line, the
session's last-message time, the item's LLM session and triage's working-memory entry)
are made
once per connection (``markus.core.statements``), not built by the ORM for each item:
building them cost more than the database spent running them (issue 39, point 6).
Checked by the ORM's compilers, never by time; the rows written are read back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db.models.sql.compiler import SQLCompiler, SQLInsertCompiler, SQLUpdateCompiler

from attention import loop, queue_read
from attention.models import AgentActivity, AgentActivityLog, AgentDecision, DecisionType, LLMSession
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage, ChatSession, WorkingMemory

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("offline_loop")]

HOT_TABLES = {
    MailboxItem._meta.db_table,
    AgentDecision._meta.db_table,
    AgentActivity._meta.db_table,
    AgentActivityLog._meta.db_table,
    ChatMessage._meta.db_table,
    ChatSession._meta.db_table,
    LLMSession._meta.db_table,
    WorkingMemory._meta.db_table,
}


def enqueue(agent_id: str, n: int) -> list[MailboxItem]:
    return [
        mailbox_enqueue(
            agent_id=agent_id,
            source_type=T.SYSTEM_EVENT,
            payload={"summary": f"item {i}", "content": f"content {i}"},
        )
        for i in range(n)
    ]


@contextmanager
def orm_statements_built(monkeypatch, kinds=("select", "insert", "update")) -> Iterator[Counter[tuple[str, str]]]:
    """The statements the ORM's compilers build meanwhile, counted by (kind, table)."""
    compilers = {"select": SQLCompiler, "insert": SQLInsertCompiler, "update": SQLUpdateCompiler}
    built: Counter[tuple[str, str]] = Counter()

    def spy(original, kind):
        def as_sql(self, *args, **kwargs):
            model = self.query.model
            built[(kind, model._meta.db_table if model is not None else "")] += 1
            return original(self, *args, **kwargs)

        return as_sql

    with monkeypatch.context() as patched:
        for kind in kinds:
            patched.setattr(compilers[kind], "as_sql", spy(compilers[kind].as_sql, kind))
        yield built


def test_an_item_builds_no_statement_on_the_queue_nor_its_records_with_the_orm(agent, monkeypatch):
    # More items than the loop's read holds: triage weighs them and looks past the read
    # for stale ones; the prompt lists the waiting ones.
    enqueue(agent.id, queue_read.QUEUE_READ_LIMIT + 8)
    loop.run_attention(agent.id, budget=1)  # the first item makes what is made once

    def hot_statements_built(items: int) -> dict[tuple[str, str], int]:
        with orm_statements_built(monkeypatch) as seen:
            result = loop.run_attention(agent.id, budget=items)
        assert result.processed == items
        return {key: n for key, n in seen.items() if key[1] in HOT_TABLES}

    # A run builds the same few (once a run, not once an item) whatever its items: none
    # of the records, no read of the queue but one as the run ends, and the one read of
    # the agent's working memory the run keeps a copy of.
    two, five = hot_statements_built(2), hot_statements_built(5)
    assert two == five
    assert not [key for key in five if key[0] in ("insert", "update")]
    memory_reads = five.pop(("select", WorkingMemory._meta.db_table), 0)
    assert memory_reads <= 1 and sum(five.values()) <= 1, five
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
    # The item's session, inserted and then updated, as the ORM would have stored it.
    session = LLMSession.objects.get(mailbox_item=last)
    assert session.agent_id == agent.id and session.updated_at is not None and session.attempt
    assert isinstance(session.messages, list) and session.messages and isinstance(session.messages[0], dict)
    assert isinstance(session.absorbed_ids, list) and session.scenario
    # Triage's working-memory entry: one row for its key, its time as written.
    entries = list(WorkingMemory.objects.filter(agent=agent))
    assert len({e.key for e in entries}) == len(entries) and entries
    assert all(e.updated_at is not None and isinstance(e.content, str) for e in entries)


def test_a_session_save_and_a_memory_write_read_back_as_the_orm_wrote_them(agent, monkeypatch):
    # The session's second save (an UPDATE) and a rewrite of a memory entry (an UPDATE
    # by agent and key), beside the first of each (the INSERTs): none built by the ORM,
    # and the JSON columns read back as the ORM stores them.
    from types import SimpleNamespace

    from attention.focus import HeldSession
    from attention.lease import fenced, lease_release, lease_take
    from attention.session import save_session
    from markus.agents import memory

    item = enqueue(agent.id, 1)[0]
    messages = [{"role": "user", "content": 'héllo ✓ "quoted"', "extra": {"n": 1, "none": None}}]
    session = LLMSession(id=f"ls_{item.id}", agent_id=agent.id, mailbox_item=item, scenario="x", messages=messages)
    focus = SimpleNamespace(held=HeldSession(session, stored=False, dirty=True))
    lease = lease_take(agent.id)
    assert lease is not None
    try:
        with orm_statements_built(monkeypatch, ("insert", "update")) as built:
            with fenced(lease) as tx:
                save_session(tx, focus, session)  # type: ignore[arg-type]
            stored = LLMSession.objects.get(id=session.id)
            assert stored.messages == messages and stored.absorbed_ids == [] and stored.turn_count == 0
            assert stored.attempt == session.attempt and stored.updated_at == session.updated_at
            first_saved = stored.updated_at
            session.messages = [*messages, {"role": "assistant", "content": ["a", 2, 3.5, True]}]
            session.turn_count, session.absorbed_ids = 2, ["mbx_1", "mbx_2"]
            with fenced(lease) as tx:
                save_session(tx, focus, session)  # type: ignore[arg-type]
            memory.remember(agent.id, "note", "first")
            second = memory.remember(agent.id, "note", "second ✓")
    finally:
        lease_release(lease)
    assert [t for _, t in built.elements() if t in HOT_TABLES] == []
    stored = LLMSession.objects.get(id=session.id)
    assert stored.messages == session.messages and stored.turn_count == 2
    assert stored.absorbed_ids == ["mbx_1", "mbx_2"] and stored.updated_at >= first_saved
    rows = list(WorkingMemory.objects.filter(agent=agent, key="note"))
    assert [(r.content, r.updated_at) for r in rows] == [("second ✓", second.entry.updated_at)]
