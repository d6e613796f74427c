"""A row held by another database session, for tests of what waits for it (PostgreSQL)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections


@contextmanager
def row_locked(table: str, pk: object, *, key: str = "id") -> Iterator[None]:
    """The row of ``table`` whose ``key`` is ``pk`` held FOR UPDATE by another session (a
    thread of its own, its own connection) until the block ends."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        other = connections.create_connection("default")
        try:
            other.set_autocommit(False)
            with other.cursor() as cursor:
                cursor.execute(f"SELECT 1 FROM {table} WHERE {key} = %s FOR UPDATE", [pk])
                locked.set()
                release.wait(30)
            other.rollback()
        finally:
            other.close()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert locked.wait(10), "the other session did not get the row"
    try:
        yield
    finally:
        release.set()
        holder.join(10)
