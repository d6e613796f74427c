"""On PostgreSQL the run's take of its lease (with its first queue read) and the fenced
claim of its first item are planned once per connection: prepared statements, executed
by every later run. Planning the take was most of its time (0.39 ms of 0.49 in ``EXPLAIN
ANALYZE``), and the two are what a woken worker sends before its item starts. Each is
still one statement, seen by Django's query log and counters
(``test_first_read_with_the_take``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection, connections

from attention import loop
from attention.models import LLMSession
from attention.session import SESSION_PREFIX
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from markus.core.db import fixed_values_written_in

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def offline_brain(offline_loop):
    assert connection.vendor == "postgresql", "this test needs PostgreSQL"
    offline_loop(WAKE_ON_ENQUEUE=False)


def prepared(pattern: str) -> list[tuple[str, int]]:
    """This connection's prepared statements whose SQL is like ``pattern``, and how
    often each was executed."""
    return [(statement, generic + custom) for statement, generic, custom in plans(pattern)]


def plans(pattern: str) -> list[tuple[str, int, int]]:
    """This connection's prepared statements like ``pattern``: how often each ran on its
    generic plan, and how often on a plan made for the call's values."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
            [pattern],
        )
        return cursor.fetchall()


def test_runs_on_one_connection_execute_the_take_prepared_by_the_first(agent):
    loop.run_attention(agent.id)  # the agent's first run makes its attention row
    for summary in ("one", "two", "three"):
        mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": summary, "content": "x"})
        assert loop.run_attention(agent.id).processed == 1
    takes = prepared("%lease_epoch = lease_epoch + 1%")
    assert len(takes) == 1, takes  # one statement, prepared once
    statement, executed = takes[0]
    assert executed >= 3
    assert "mailbox_items" in statement  # the queue read went with it


@pytest.fixture
def history(agent):
    """A deployment that has worked a while, its statistics up to date: finished items of
    other agents and their saved sessions (the planner's estimates follow the tables)."""
    others = [Agent.objects.create(id=f"other-{n}", name=f"other {n}", role="worker") for n in range(20)]
    items = [
        MailboxItem(agent=others[n % 20], source_type=T.SYSTEM_EVENT, status=Status.COMPLETED, payload={})
        for n in range(4000)
    ]
    MailboxItem.objects.bulk_create(items, batch_size=1000)
    LLMSession.objects.bulk_create(
        [LLMSession(id=f"{SESSION_PREFIX}{i.id}", agent_id=i.agent_id, mailbox_item=i) for i in items], batch_size=1000
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


@pytest.mark.parametrize("statement", ["%lease_epoch = lease_epoch + 1%", "WITH fence AS (UPDATE%"])
def test_after_five_runs_the_take_and_the_claim_are_not_planned_again(agent, history, statement):
    """PostgreSQL plans a prepared statement for the call's values five times, then keeps
    one generic plan when it costs no more: only then is planning saved. With the take's
    and the read's fixed values (statuses, kinds, flags) sent as parameters the generic
    plan could use no partial index and looked worse: the take was planned anew on every
    wake-up (1 ms of its 1.2 here)."""
    loop.run_attention(agent.id)
    for n in range(8):
        mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": f"{n}", "content": "x"})
        assert loop.run_attention(agent.id).processed == 1
    [(_, generic, custom)] = plans(statement)
    assert custom <= 5 and generic >= 3, (generic, custom)


def test_runs_on_one_connection_execute_the_fenced_claim_prepared_by_the_first(agent):
    loop.run_attention(agent.id)
    for summary in ("one", "two", "three"):
        mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": summary, "content": "x"})
        assert loop.run_attention(agent.id).processed == 1
    claims = prepared("WITH fence AS (UPDATE%")
    assert len(claims) == 1, claims
    statement, executed = claims[0]
    assert executed == 3 and "mailbox_items" in statement


@contextmanager
def column_widened_by_another_session(table: str, column: str, length: int) -> Iterator[None]:
    """A migration run elsewhere: ``table.column`` becomes ``varchar(length + 1)`` in
    another session for the block, then ``varchar(length)`` again."""
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE varchar({length + 1})")
        yield
    finally:
        with other.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE varchar({length})")
        other.close()


def test_a_migration_that_changes_a_returned_columns_type_does_not_break_the_prepared_take(agent):
    """Another process migrates a column the take returns (the agent's role, wider) while a
    worker's connection keeps the take prepared: PostgreSQL refuses the old statement
    ("cached plan must not change result type"), so the take prepares it again and runs."""
    loop.run_attention(agent.id)
    loop.run_attention(agent.id)
    assert prepared("%lease_epoch = lease_epoch + 1%")
    with column_widened_by_another_session("agents", "role", 200):
        mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "after", "content": "x"})
        assert loop.run_attention(agent.id).processed == 1


def test_after_a_migration_of_an_items_column_the_next_run_claims_with_both_prepared_anew(agent):
    """A column both statements return (the take with its queue read, and the fenced claim):
    the run's take meets the refusal first, outside any transaction, and makes the
    connection forget every prepared statement, the claim's too, so the claim is
    prepared anew rather than refused inside its transaction. (A migration between a
    run's take and a later claim aborts that claim's transaction; its ROLLBACK makes
    psycopg forget them all the same.)"""
    loop.run_attention(agent.id)
    mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "before", "content": "x"})
    assert loop.run_attention(agent.id).processed == 1
    assert prepared("WITH fence AS (UPDATE%")
    with column_widened_by_another_session("mailbox_items", "drop_reason", 300):
        mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "after", "content": "x"})
        assert loop.run_attention(agent.id).processed == 1
        claims = prepared("WITH fence AS (UPDATE%")
        assert [executed for _, executed in claims] == [1]  # prepared again, run once


def test_fixed_values_are_written_in_as_literals_and_only_the_varying_are_sent():
    sql, params = fixed_values_written_in(
        connection, "SELECT %s, '100%%', %s, %s, %s", ["it's 5%", 7, "x", True], varying={1}
    )
    assert params == [7] and sql.count("%s") == 1
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        assert cursor.fetchone() == ("it's 5%", "100%", 7, "x", True)
