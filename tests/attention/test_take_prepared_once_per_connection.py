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
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def offline_brain(offline_loop):
    assert connection.vendor == "postgresql", "this test needs PostgreSQL"
    offline_loop(WAKE_ON_ENQUEUE=False)


def prepared(pattern: str) -> list[tuple[str, int]]:
    """This connection's prepared statements whose SQL is like ``pattern``, and how
    often each was executed."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements WHERE statement LIKE %s",
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
