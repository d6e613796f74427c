"""The outbox and the schema registry: written inside the causing transaction, relayed
after commit, best effort (a bus failure leaves the row pending and never stalls the
rows behind it), payloads validated against registered schemas at publish time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from agentbus import outbox, schemas, selectors, services
from agentbus.errors import BusError, ForbiddenError
from agentbus.models import OPERATOR_ID, OutboxRecord, OutboxStatus, Stream
from agentbus.schemas import TASK_LIFECYCLE_V1, task_topics
from markus.work.models import TaskState

from .conftest import conversations

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def lifecycle(task_id: str = "tsk_1", to: str = TaskState.IN_PROGRESS, **extra) -> dict:
    return {
        "schema": TASK_LIFECYCLE_V1,
        "taskId": task_id,
        "title": "Fix the build",
        "from": TaskState.PENDING,
        "to": to,
        "actor": {"type": "user", "id": "1", "name": "alice"},
        "ownerId": "eve",
        "at": timezone.now().isoformat(),
        **extra,
    }


def write(payload=None, audience=("eve",), topic="task.in_progress") -> OutboxRecord:
    return outbox.outbox_write(
        topic=topic, payload=payload or lifecycle(), audience=list(audience), schema=TASK_LIFECYCLE_V1
    )


def test_every_task_state_has_its_topic():
    topics = task_topics()
    assert set(topics) == set(TaskState.values)
    assert all(topic == f"task.{state}" for state, topic in topics.items())
    assert schemas.task_topic(TaskState.BLOCKED) == "task.blocked"
    with pytest.raises(BusError):
        schemas.task_topic("no_such_state")


def test_the_lifecycle_schema_is_registered_and_follows_the_states():
    assert TASK_LIFECYCLE_V1 in schemas.registered_schemas()
    assert schemas.schema_for(TASK_LIFECYCLE_V1)["properties"]["to"]["enum"] == list(TaskState.values)
    schemas.validate_payload(TASK_LIFECYCLE_V1, lifecycle())
    for bad in (
        lifecycle(to="teleported"),
        {**lifecycle(), "actor": {"type": "robot", "id": "x"}},
        {k: v for k, v in lifecycle().items() if k != "taskId"},
        ["not", "an", "object"],
    ):
        with pytest.raises(schemas.SchemaViolation):
            schemas.validate_payload(TASK_LIFECYCLE_V1, bad)


@pytest.mark.django_db(transaction=True)
def test_outbox_write_must_run_inside_a_transaction():
    with pytest.raises(RuntimeError):
        write()
    assert not OutboxRecord.objects.exists()


def test_an_unknown_schema_is_refused_at_write():
    with transaction.atomic(), pytest.raises(BusError):
        outbox.outbox_write(topic="x", payload={}, audience=[], schema="nope.v1")


def test_a_rolled_back_transaction_writes_nothing(eve, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(RuntimeError), transaction.atomic():
            write()
            raise RuntimeError("the transition failed")
    assert callbacks == [] and not OutboxRecord.objects.exists() and not conversations().exists()


def test_a_committed_transaction_publishes_exactly_one_record(eve, max_, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            row = write(audience=["eve", "max", "eve"])
    row.refresh_from_db()
    assert row.status == OutboxStatus.RELAYED and row.audience == ["eve", "max"]
    for agent_id in ("eve", "max"):
        messages = selectors.inbox_read(agent_id)["messages"]
        assert len(messages) == 1
        assert messages[0]["sender"] == OPERATOR_ID and messages[0]["topic"] == "task.in_progress"
        assert messages[0]["payload"]["taskId"] == "tsk_1"
    assert Stream.objects.filter(closed_at__isnull=False).count() == 2
    assert outbox.outbox_relay().relayed == []  # nothing left, nothing published twice
    assert sum(len(selectors.inbox_read(a)["messages"]) for a in ("eve", "max")) == 2


def test_a_failing_bus_leaves_the_row_pending_and_relays_the_rows_behind_it(eve, monkeypatch):
    with transaction.atomic():
        first, second, third = write(lifecycle("tsk_1")), write(lifecycle("tsk_2")), write(lifecycle("tsk_3"))
    real = outbox._publish

    def flaky(row):
        if row.id == first.id:
            raise ConnectionError("bus down")
        return real(row)

    monkeypatch.setattr(outbox, "_publish", flaky)
    report = outbox.outbox_relay()
    assert report.pending == [first.id] and report.relayed == [second.id, third.id]
    first.refresh_from_db()
    assert first.status == OutboxStatus.PENDING and "bus down" in first.last_error and first.attempts == 1
    assert not Stream.objects.filter(id__startswith=f"outbox.{first.id}.").exists()  # nothing half-published
    # The sweep retries once the back-off has passed, and then it goes through.
    monkeypatch.setattr(outbox, "_publish", real)
    assert outbox.outbox_relay().relayed == []
    assert outbox.outbox_relay(now=timezone.now() + timedelta(minutes=10)).relayed == [first.id]
    assert [m["payload"]["taskId"] for m in selectors.inbox_read("eve")["messages"]] == ["tsk_2", "tsk_3", "tsk_1"]


def test_a_failure_after_commit_never_reaches_the_committing_caller(
    eve, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(outbox, "_publish", lambda row: (_ for _ in ()).throw(ConnectionError("bus down")))
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            row = write()
    row.refresh_from_db()
    assert row.status == OutboxStatus.PENDING


def test_a_payload_that_breaks_its_schema_fails_without_blocking_others(eve):
    with transaction.atomic():
        bad = write(lifecycle(to="teleported"))
        good = write(lifecycle("tsk_2"))
    report = outbox.outbox_relay()
    assert report.failed == [bad.id] and report.relayed == [good.id]
    bad.refresh_from_db()
    assert bad.status == OutboxStatus.FAILED and "teleported" in bad.last_error


def test_a_claimed_row_is_not_relayed_twice(eve):
    with transaction.atomic():
        row = write()
    now = timezone.now()
    assert outbox._claim(row.id, now) is True
    assert outbox.outbox_relay(now=now).relayed == []  # claimed: another relayer skips it
    later = now + timedelta(seconds=outbox.CLAIM_SECONDS + 1)
    assert outbox.outbox_relay(now=later).relayed == [row.id]  # a dead relayer's claim expires


def test_an_audience_agent_that_no_longer_exists_is_skipped(eve):
    with transaction.atomic():
        row = write(audience=["eve", "ghost"])
    assert outbox.outbox_relay().relayed == [row.id]
    assert len(selectors.inbox_read("eve")["messages"]) == 1


def test_the_relay_task_is_a_thin_wrapper(eve):
    from agentbus.tasks import relay_outbox

    with transaction.atomic():
        write()
    assert relay_outbox() == 1


def test_operator_messages_are_not_enqueued_as_agent_messages(ada):
    from mailbox.models import MailboxItem

    with transaction.atomic():
        write(audience=["ada"])
    outbox.outbox_relay()
    assert len(selectors.inbox_read_from("ada", 0)["messages"]) == 1
    assert not MailboxItem.objects.exists()


def test_an_operator_stream_cannot_be_appended_to_by_an_agent(eve):
    with transaction.atomic():
        write()
    outbox.outbox_relay()
    stream = conversations().get()
    with pytest.raises(ForbiddenError):
        services.stream_append(stream_id=stream.id, sender=eve.agent, payload={})


def test_the_attention_sweep_relays_what_the_after_commit_relay_missed(eve):
    from attention.services import sweep

    with transaction.atomic():
        row = write()  # no on-commit callbacks run in this test: only the sweep can relay it
    sweep()
    row.refresh_from_db()
    assert row.status == OutboxStatus.RELAYED
