"""The outbox: records other agents act on (task lifecycle) reach the bus even if the
process dies right after the commit that caused them.

``outbox_write`` is called inside the causing transaction (the row commits or rolls
back with it; the audience is resolved there, while e.g. a task's outgoing owner is
still on its row). ``outbox_relay`` runs after that commit and from the sweep:

1. Claim a pending row that is due with one conditional UPDATE (pushes
   ``available_at`` ahead: a relayer that dies gives the row back when it passes).
2. Validate the payload against its registered schema; a mismatch marks the row
   ``failed`` (retrying cannot fix it) and is logged.
3. In one transaction, publish (per audience agent: a direct stream from the operator
   persona, one chunk, closed) and mark the row ``relayed``, conditionally on it still
   being pending: a record is published once or not at all.
4. Any exception leaves the row ``pending`` with the error and a back-off, and the
   relay moves on to the next row: a bus failure never stalls the rows behind it and
   never touches the transaction that wrote the row, which has committed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from markus.agents.models import Agent

from . import schemas, services
from .errors import BusError
from .models import OPERATOR_ID, AuditAction, OutboxRecord, OutboxStatus

log = logging.getLogger(__name__)

CLAIM_SECONDS = 60
MAX_BACKOFF_SECONDS = 300
BATCH = 100


@dataclass
class RelayReport:
    relayed: list[int] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


def outbox_write(*, topic: str, payload: dict[str, Any], audience: Iterable[str], schema: str) -> OutboxRecord:
    """Write a record to publish once the current transaction commits. Must be called
    inside that transaction."""
    if not connection.in_atomic_block:
        raise RuntimeError("outbox_write must be called inside the transaction that causes the record")
    if not schemas.is_registered(schema):
        raise BusError(f"unknown schema {schema!r}")
    if not isinstance(topic, str) or not topic:
        raise BusError("topic is required")
    agents = sorted({a for a in audience if isinstance(a, str) and a})
    row = OutboxRecord.objects.create(topic=topic, payload=payload, audience=agents, schema=schema)
    transaction.on_commit(lambda: _relay_after_commit(row.id))
    return row


def _relay_after_commit(row_id: int) -> None:
    try:
        outbox_relay(ids=[row_id])
    except Exception:  # best effort: the sweep relays what this did not
        log.exception("agentbus: relay after commit failed for outbox row %s", row_id)


def _claim(row_id: int, now: datetime) -> bool:
    return (
        OutboxRecord.objects.filter(id=row_id, status=OutboxStatus.PENDING, available_at__lte=now).update(
            available_at=now + timedelta(seconds=CLAIM_SECONDS), attempts=F("attempts") + 1
        )
        == 1
    )


def _publish(row: OutboxRecord) -> list[str]:
    """Publish one record to each audience agent that still exists. Runs inside the
    relay's transaction."""
    published = []
    for agent in Agent.objects.filter(id__in=row.audience).order_by("id"):
        stream = services.stream_open(
            sender=None,
            recipient=agent,
            topic=row.topic,
            stream_id=f"{services.OPERATOR_STREAM_PREFIX}{row.id}.{agent.id}",
            actor=OPERATOR_ID,
        )
        services.stream_append(stream_id=stream.id, sender=None, payload=row.payload, actor=OPERATOR_ID)
        services.stream_close(stream_id=stream.id, sender=None, actor=OPERATOR_ID)
        published.append(agent.id)
    return published


def _backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(2 ** max(attempts, 1), MAX_BACKOFF_SECONDS))


def _relay_one(row_id: int, now: datetime, report: RelayReport) -> None:
    if not _claim(row_id, now):
        return
    row = OutboxRecord.objects.get(id=row_id)
    try:
        schemas.validate_payload(row.schema, row.payload)
    except BusError as exc:
        log.error("agentbus: outbox row %s failed validation: %s", row.id, exc)
        OutboxRecord.objects.filter(id=row.id).update(status=OutboxStatus.FAILED, last_error=str(exc)[:2000])
        report.failed.append(row.id)
        return
    try:
        with transaction.atomic():
            published = _publish(row)
            marked = OutboxRecord.objects.filter(id=row.id, status=OutboxStatus.PENDING).update(
                status=OutboxStatus.RELAYED, relayed_at=timezone.now(), last_error=""
            )
            if marked != 1:
                raise RuntimeError("the row was relayed by someone else")
            services.audit(
                action=AuditAction.RELAY,
                actor=OPERATOR_ID,
                detail={"outboxId": row.id, "topic": row.topic, "audience": published},
            )
    except Exception as exc:
        log.warning("agentbus: outbox row %s not relayed (attempt %s): %s", row.id, row.attempts, exc)
        OutboxRecord.objects.filter(id=row.id, status=OutboxStatus.PENDING).update(
            last_error=f"{type(exc).__name__}: {exc}"[:2000], available_at=timezone.now() + _backoff(row.attempts)
        )
        report.pending.append(row.id)
        return
    report.relayed.append(row.id)


def outbox_relay(*, ids: Iterable[int] | None = None, limit: int = BATCH, now: datetime | None = None) -> RelayReport:
    """Relay due pending rows (all of them, or just ``ids``), oldest first. One row's
    failure never stops the others."""
    now = now or timezone.now()
    due = OutboxRecord.objects.filter(status=OutboxStatus.PENDING, available_at__lte=now)
    if ids is not None:
        due = due.filter(id__in=list(ids))
    report = RelayReport()
    for row_id in due.order_by("id").values_list("id", flat=True)[:limit]:
        _relay_one(row_id, now, report)
    return report


def sweep_relay() -> None:
    """The sweep's backstop (a receiver of ``markus.core.signals.swept``)."""
    outbox_relay()
