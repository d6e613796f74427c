"""Mailbox benchmark: enqueue and dequeue through the services, and in the same run the
bare SQL they stand for, on the same table; prints rates and the ratio service/bare, and
the statements each path issues per item.

Steps:
1. Create a throwaway agent (external and stopped, so no sweep or worker touches it)
   and mute the enqueue wake-up signal: only this benchmark works the queue.
2. In ROUNDS rounds, per path (service, then bare SQL): enqueue N/ROUNDS items one
   transaction each, then drain the queue (claim the head, complete it) until empty;
   each phase is timed alone (the service's include delivering their UI events) and its
   rows are deleted before the next. Alternating the paths in rounds, and taking the
   median of the rounds' ratios, keeps a noisy, shared machine from favouring whichever
   path ran in a quiet moment.
3. Count the statements of a few service enqueues and claim + complete pairs.
4. Delete the agent and its rows, whatever happened.

Figures: the two ratios against the bare SQL of the same run (goals from issue 12:
enqueue >= 0.9, claim + complete >= 0.75) and the statements per item beside the bare
SQL's (1 INSERT; 1 UPDATE … RETURNING and 1 UPDATE).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from unittest import mock

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import item_enqueued, mailbox_enqueue
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.bench.report import Figure
from markus.core import events
from markus.core.ids import mailbox_id, new_id

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

SUITE = "mailbox"
DEFAULT_N = 2000
ROUNDS = 20
WARMUP = 20
STATEMENT_SAMPLE = 10
ENQUEUE_GOAL = 0.9  # service / bare INSERT (issue 12)
DEQUEUE_GOAL = 0.75  # claim + complete through the service / bare SQL (issue 12)
BARE_ENQUEUE_STATEMENTS = 1
BARE_DEQUEUE_STATEMENTS = 2
SOURCE_TYPE = MailboxType.SYSTEM_EVENT  # no dedup group: one row per enqueue on both paths
TABLE = MailboxItem._meta.db_table

INSERT_SQL = (
    f"INSERT INTO {TABLE} (id, agent_id, source_type, priority, status, payload, metadata, marks, queued_at,"
    " attempts, drop_reason) VALUES (%s, %s, %s, %s, %s, %s, %s, '{}', %s, 0, '')"
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
    while (item := lifecycle.claim_next(agent_id=agent_id)) is not None:
        lifecycle.complete(item.id)
        done += 1
    return done


def _delivered(fn: Callable[[str, int], None]) -> Callable[[str, int], None]:
    """A service phase ends when its UI events are out (the Redis publisher's thread)."""

    def phase(agent_id: str, n: int) -> None:
        fn(agent_id, n)
        events.flush()

    return phase


def _service_dequeue_delivered(agent_id: str) -> int:
    done = service_dequeue(agent_id)
    events.flush()
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


class _Timed:
    """One path's enqueue and dequeue, with the seconds and items timed so far."""

    def __init__(self, enqueue: Callable[[str, int], None], dequeue: Callable[[str], int]) -> None:
        self.enqueue, self.dequeue = enqueue, dequeue
        self.enqueue_s = self.dequeue_s = 0.0
        self.items = 0
        self.per_round: list[tuple[float, float]] = []  # seconds per item: enqueue, dequeue

    def warm_up(self, agent_id: str) -> None:
        self.enqueue(agent_id, WARMUP)
        self.dequeue(agent_id)
        MailboxItem.objects.filter(agent_id=agent_id).delete()

    def round(self, agent_id: str, n: int) -> None:
        """Enqueue n, then drain; both timed; the rows are checked and deleted."""
        rows = MailboxItem.objects.filter(agent_id=agent_id)
        enqueue_s = _timed(lambda: self.enqueue(agent_id, n))
        drained = 0

        def drain() -> None:
            nonlocal drained
            drained = self.dequeue(agent_id)

        dequeue_s = _timed(drain)
        completed = rows.filter(status=Status.COMPLETED).count()
        if drained != n or completed != n:
            raise RuntimeError(f"bench: drained {drained}, completed {completed}, expected {n}")
        rows.delete()
        self.enqueue_s += enqueue_s
        self.dequeue_s += dequeue_s
        self.items += n
        self.per_round.append((enqueue_s / n, dequeue_s / n))

    @property
    def rates(self) -> tuple[float, float]:
        return self.items / self.enqueue_s, self.items / self.dequeue_s


@dataclass(frozen=True)
class Result:
    """Rates (items per second, over all rounds) and ratios service/bare (the median
    of the rounds' ratios: a burst of load on the shared machine moves one round, not
    the figure)."""

    service: tuple[float, float]
    bare: tuple[float, float]
    ratios: tuple[float, float]
    rounds: int


def _measure(agent_id: str, n: int) -> Result:
    """The service and the bare SQL, enqueue then drain, alternating in rounds."""
    service = _Timed(_delivered(service_enqueue), _service_dequeue_delivered)
    bare = _Timed(bare_enqueue, bare_dequeue)
    service.warm_up(agent_id)
    bare.warm_up(agent_id)
    rounds = max(1, min(ROUNDS, n))
    for i in range(rounds):
        size = n // rounds + (1 if i < n % rounds else 0)
        service.round(agent_id, size)
        bare.round(agent_id, size)
    pairs = list(zip(service.per_round, bare.per_round, strict=True))
    ratios = (
        statistics.median(b[0] / s[0] for s, b in pairs),
        statistics.median(b[1] / s[1] for s, b in pairs),
    )
    return Result(service.rates, bare.rates, ratios, rounds)


def count_statements(agent_id: str, k: int = STATEMENT_SAMPLE) -> tuple[float, float]:
    """Statements per service enqueue and per claim + complete, over k items."""
    with CaptureQueriesContext(connection) as enqueued:
        service_enqueue(agent_id, k)
    with CaptureQueriesContext(connection) as dequeued:
        drained = service_dequeue(agent_id)
    MailboxItem.objects.filter(agent_id=agent_id).delete()
    # The final claim that finds the queue empty is one more statement, not an item.
    return len(enqueued) / k, (len(dequeued) - 1) / max(drained, 1)


def run(stdout: SupportsWrite[str], options: dict[str, Any]) -> list[Figure]:
    n = options.get("n") or DEFAULT_N
    agent, _ = agent_create(name="bench", kind=Agent.Kind.EXTERNAL, agent_id=new_id("bench"))
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.STOPPED)
    try:
        with quiet_wakeups():
            result = _measure(agent.id, n)
            per_enqueue, per_dequeue = count_statements(agent.id)
    finally:
        MailboxItem.objects.filter(agent_id=agent.id).delete()
        agent.delete()
    service, bare = result.service, result.bare
    # Lines end in "\n" themselves, so a plain stream reads as well as a command's stdout.
    stdout.write(f"mailbox bench on {connection.vendor}, {n} items per phase in {result.rounds} rounds\n")
    for i, phase in enumerate(("enqueue", "dequeue")):
        stdout.write(
            f"{phase}: service {service[i]:.0f}/s, bare SQL {bare[i]:.0f}/s, ratio service/bare"
            f" {result.ratios[i]:.2f} (median of the rounds; of the totals {service[i] / bare[i]:.2f})\n"
        )
    stdout.write(
        f"statements: {per_enqueue:g} per enqueue (bare {BARE_ENQUEUE_STATEMENTS}),"
        f" {per_dequeue:g} per claim + complete (bare {BARE_DEQUEUE_STATEMENTS})\n"
    )
    on = connection.vendor
    return [
        Figure(
            SUITE,
            f"enqueue through the service / bare INSERT ({on})",
            result.ratios[0],
            "x",
            f"bare INSERT {bare[0]:.0f}/s (service {service[0]:.0f}/s)",
            ENQUEUE_GOAL,
        ),
        Figure(
            SUITE,
            f"claim + complete through the service / bare SQL ({on})",
            result.ratios[1],
            "x",
            f"bare UPDATE … RETURNING + UPDATE {bare[1]:.0f}/s (service {service[1]:.0f}/s)",
            DEQUEUE_GOAL,
        ),
        Figure(
            SUITE,
            f"statements per enqueue, no dedup group ({on})",
            per_enqueue,
            "statements",
            f"bare SQL {BARE_ENQUEUE_STATEMENTS} (INSERT)",
            BARE_ENQUEUE_STATEMENTS,
            "lower",
        ),
        Figure(
            SUITE,
            f"statements per claim + complete ({on})",
            per_dequeue,
            "statements",
            f"bare SQL {BARE_DEQUEUE_STATEMENTS} (UPDATE … RETURNING, UPDATE)",
            BARE_DEQUEUE_STATEMENTS,
            "lower",
        ),
    ]
