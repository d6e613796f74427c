"""Mailbox benchmark: enqueue and dequeue through the services, and in the same run the
bare SQL they stand for, on the same table; prints rates and the ratio service/bare.

Steps:
1. Create a throwaway agent (external and stopped, so no sweep or worker touches it)
   and mute the enqueue wake-up signal: only this benchmark works the queue.
2. Per path (service, then bare SQL): enqueue N items one transaction each, then drain
   the queue (claim the head, complete it) until empty; each phase is timed alone and
   its rows are deleted before the next.
3. Delete the agent and its rows, whatever happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from unittest import mock

from django.db import connection
from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import item_enqueued, mailbox_claim_next, mailbox_complete, mailbox_enqueue
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.core.ids import mailbox_id, new_id

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

DEFAULT_N = 2000
WARMUP = 20
SOURCE_TYPE = MailboxType.SYSTEM_EVENT  # no dedup group: one row per enqueue on both paths
TABLE = MailboxItem._meta.db_table

INSERT_SQL = (
    f"INSERT INTO {TABLE} (id, agent_id, source_type, priority, status, payload, metadata, queued_at,"
    " attempts, drop_reason) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, 0, '')"
)
CLAIM_SQL = (
    f"UPDATE {TABLE} SET status = %s, started_at = %s, attempts = attempts + 1"
    f" WHERE id = (SELECT id FROM {TABLE} WHERE agent_id = %s AND status = %s"
    " ORDER BY priority, queued_at, id LIMIT 1) AND status = %s RETURNING id"
)
COMPLETE_SQL = f"UPDATE {TABLE} SET status = %s, completed_at = %s WHERE id = %s AND status = %s"


@contextmanager
def quiet_wakeups() -> Iterator[None]:
    """Disconnect the receivers of ``item_enqueued`` (the attention wake-up) for a while."""
    with mock.patch.object(item_enqueued, "receivers", []):
        item_enqueued.sender_receivers_cache.clear()
        yield
    item_enqueued.sender_receivers_cache.clear()


def _payload(i: int) -> dict[str, str]:
    return {"summary": f"bench item {i}", "content": f"bench content {i}"}


def service_enqueue(agent_id: str, n: int) -> None:
    for i in range(n):
        mailbox_enqueue(agent_id=agent_id, source_type=SOURCE_TYPE, payload=_payload(i), priority=i % 5)


def service_dequeue(agent_id: str) -> int:
    done = 0
    while (item := mailbox_claim_next(agent_id=agent_id)) is not None:
        mailbox_complete(item.id)
        done += 1
    return done


def bare_enqueue(agent_id: str, n: int) -> None:
    ops = connection.ops
    with connection.cursor() as cursor:
        for i in range(n):
            cursor.execute(
                INSERT_SQL,
                [
                    mailbox_id(),
                    agent_id,
                    SOURCE_TYPE.value,
                    i % 5,
                    Status.QUEUED.value,
                    ops.adapt_json_value(_payload(i), None),
                    ops.adapt_json_value({}, None),
                    ops.adapt_datetimefield_value(timezone.now()),
                ],
            )


def bare_dequeue(agent_id: str) -> int:
    ops, done = connection.ops, 0
    with connection.cursor() as cursor:
        while True:
            now = ops.adapt_datetimefield_value(timezone.now())
            cursor.execute(
                CLAIM_SQL, [Status.PROCESSING.value, now, agent_id, Status.QUEUED.value, Status.QUEUED.value]
            )
            row = cursor.fetchone()
            if row is None:
                return done
            cursor.execute(COMPLETE_SQL, [Status.COMPLETED.value, now, row[0], Status.PROCESSING.value])
            done += 1


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _measure(
    agent_id: str, n: int, enqueue: Callable[[str, int], None], dequeue: Callable[[str], int]
) -> tuple[float, float]:
    """Rates (items per second) of one path: enqueue n, then drain."""
    rows = MailboxItem.objects.filter(agent_id=agent_id)
    enqueue(agent_id, WARMUP)
    dequeue(agent_id)
    rows.delete()
    enq = _timed(lambda: enqueue(agent_id, n))
    drained = 0

    def drain() -> None:
        nonlocal drained
        drained = dequeue(agent_id)

    deq = _timed(drain)
    completed = rows.filter(status=Status.COMPLETED).count()
    if drained != n or completed != n:
        raise RuntimeError(f"bench: drained {drained}, completed {completed}, expected {n}")
    rows.delete()
    return n / enq, n / deq


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> dict[str, float]:
    n = options.get("n") or DEFAULT_N
    agent, _ = agent_create(name="bench", kind=Agent.Kind.EXTERNAL, agent_id=new_id("bench"))
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.STOPPED)
    try:
        with quiet_wakeups():
            service = _measure(agent.id, n, service_enqueue, service_dequeue)
            bare = _measure(agent.id, n, bare_enqueue, bare_dequeue)
    finally:
        MailboxItem.objects.filter(agent_id=agent.id).delete()
        agent.delete()
    figures = {
        "enqueue_service": service[0],
        "enqueue_bare": bare[0],
        "enqueue_ratio": service[0] / bare[0],
        "dequeue_service": service[1],
        "dequeue_bare": bare[1],
        "dequeue_ratio": service[1] / bare[1],
    }
    # Lines end in "\n" themselves, so a plain stream reads as well as a command's stdout.
    stdout.write(f"mailbox bench on {connection.vendor}, {n} items per phase\n")
    for phase in ("enqueue", "dequeue"):
        stdout.write(
            f"{phase}: service {figures[f'{phase}_service']:.0f}/s, bare SQL {figures[f'{phase}_bare']:.0f}/s, "
            f"ratio service/bare {figures[f'{phase}_ratio']:.2f}\n"
        )
    return figures
