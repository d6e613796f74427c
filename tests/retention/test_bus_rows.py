"""Bus rows: a chunk goes once it is old and every inbox it reaches has its consumer
cursor past it (never its sender's, which it does not reach); a relayed outbox row goes
after its days, a pending or failed one never; audit rows by age."""

from __future__ import annotations

import pytest

from agentbus import services
from agentbus.models import AuditEvent, Chunk, OutboxRecord, OutboxStatus
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.retention.services import prune

from .rows import OLD, days_ago

pytestmark = [pytest.mark.django_db, pytest.mark.pg]

CHUNK_OLD = 10  # days: past the 7-day default


@pytest.fixture
def harness(alice, team):
    """Two external agents (coding CLIs): they read the bus by draining, nothing else moves their cursor."""
    made = [
        agent_create(name=n, kind=Agent.Kind.EXTERNAL, owner=alice, team=team, agent_id=n.lower())[0]
        for n in ("Cli", "Dee")
    ]
    return made


def send(sender, *, to=None, members=(), age=CHUNK_OLD) -> Chunk:
    stream = services.stream_open(sender=sender, recipient=to, members=list(members))
    chunk = services.stream_append(stream_id=stream.id, sender=sender, payload={"text": "hi"})
    Chunk.objects.filter(pk=chunk.pk).update(created_at=days_ago(age))
    return chunk


def alive(chunk: Chunk) -> bool:
    return Chunk.objects.filter(pk=chunk.pk).exists()


def test_a_chunk_stays_until_its_recipient_has_drained_past_it(agent, harness):
    cli, _ = harness
    chunk = send(agent, to=cli)
    prune()
    assert alive(chunk)

    services.inbox_drain(agent_id=cli.id)
    run = prune()
    assert not alive(chunk) and run.counts["agentbus_chunks"] == 1


def test_a_consumed_chunk_younger_than_its_days_stays(agent, harness):
    cli, _ = harness
    chunk = send(agent, to=cli, age=2)
    services.inbox_drain(agent_id=cli.id)
    prune()
    assert alive(chunk)


def test_a_group_chunk_does_not_wait_for_its_sender_nor_an_internal_member(agent, harness):
    cli, dee = harness
    chunk = send(cli, members=[dee, agent])  # ada's mailbox takes it: her cursor moves at once
    prune()
    assert alive(chunk)  # dee has not drained

    services.inbox_drain(agent_id=dee.id)
    prune()
    assert not alive(chunk)  # cli, its sender, never drained: it is not in cli's inbox


def test_a_group_chunk_waits_for_a_member_that_never_drained(agent, harness):
    cli, dee = harness
    chunk = send(agent, members=[cli, dee])
    services.inbox_drain(agent_id=cli.id)
    prune()
    assert alive(chunk)
    services.inbox_drain(agent_id=dee.id)
    prune()
    assert not alive(chunk)


def test_the_operators_chunk_to_an_internal_agent_goes_once_its_mailbox_took_it(agent):
    chunk = send(None, to=agent)  # the operator has no agent row: a null sender
    prune()
    assert not alive(chunk)


def test_a_later_chunk_a_cursor_has_not_reached_stays(agent, harness):
    cli, _ = harness
    first = send(agent, to=cli)
    services.inbox_drain(agent_id=cli.id)
    second = send(agent, to=cli)
    prune()
    assert not alive(first) and alive(second)


def test_only_relayed_outbox_rows_go_after_their_days():
    def row(status, age, relayed=True) -> OutboxRecord:
        at = days_ago(age)
        return OutboxRecord.objects.create(
            topic="task.completed", schema="s", status=status, created_at=at, relayed_at=at if relayed else None
        )

    old_relayed = row(OutboxStatus.RELAYED, CHUNK_OLD)
    kept = [
        row(OutboxStatus.RELAYED, 2),
        row(OutboxStatus.PENDING, OLD, relayed=False),
        row(OutboxStatus.FAILED, OLD, relayed=False),
    ]
    run = prune()
    assert set(OutboxRecord.objects.values_list("pk", flat=True)) == {r.pk for r in kept}
    assert not OutboxRecord.objects.filter(pk=old_relayed.pk).exists()
    assert run.counts["agentbus_outbox"] == 1


def test_audit_rows_go_after_their_days():
    old = AuditEvent.objects.create(action="append", actor="cli", created_at=days_ago(100))
    recent = AuditEvent.objects.create(action="append", actor="cli", created_at=days_ago(OLD))
    prune()
    assert not AuditEvent.objects.filter(pk=old.pk).exists()
    assert AuditEvent.objects.filter(pk=recent.pk).exists()
