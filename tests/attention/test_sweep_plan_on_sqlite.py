"""The sweep's plan on SQLite, the default database (the first pass of `make test`; the
PostgreSQL plan prefers a sequential scan on a table this small whatever the query, so
the scale bench measures it there): every statement of the sweep that reads the items
is a SEARCH by the index per agent, never a SCAN."""

from __future__ import annotations

import pytest
from django.db import connection

from mailbox.registry import Status

from .test_sweep_finds_due_agents_by_index import TABLE, agents, item, kicked, no_wake_on_enqueue, sweep_statements

pytestmark = pytest.mark.django_db
__all__ = ["kicked", "no_wake_on_enqueue"]  # the fixtures, from the sweep's tests


def test_the_sweep_reads_the_items_by_index_seeks_only(alice, kicked):
    """SQLite's plan of every sweep statement that reads the items: a SEARCH by the index
    per agent, never a SCAN of the table or of an index (the PostgreSQL plan prefers a
    sequential scan on a table this small whatever the query: the bench measures it)."""
    names = [f"s{i}" for i in range(5)]
    agents(alice, *names)
    for name in names:
        item(name, Status.QUEUED, n=30)
    reading = [sql for sql in sweep_statements() if f'"{TABLE}"' in sql and sql.lstrip().upper().startswith("SELECT")]
    assert reading
    for sql in reading:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            plan = "\n".join(str(row[-1]) for row in cursor.fetchall())
        assert f"SCAN {TABLE}" not in plan, plan
