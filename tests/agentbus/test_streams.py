"""Streams: open, append with a per-stream sequence, close by the sender only, events
after a sequence, and an audit row for every action."""

from __future__ import annotations

import pytest

from agentbus import selectors, services
from agentbus.errors import BusError, ConflictError, ForbiddenError, NotFoundError
from agentbus.models import AuditEvent, Chunk, Stream

pytestmark = pytest.mark.django_db


def test_direct_stream_sequences_are_per_stream(eve, max_, ada):
    one = services.stream_open(sender=eve.agent, recipient=max_.agent, stream_id="one")
    two = services.stream_open(sender=eve.agent, recipient=ada.agent)
    seqs = [
        services.stream_append(stream_id=s.id, sender=eve.agent, payload={"n": i}).sequence
        for i, s in enumerate([one, two, one, one, two])
    ]
    assert seqs == [1, 1, 2, 3, 2]
    assert Stream.objects.get(id="one").last_sequence == 3


def test_inbox_positions_are_global_and_increasing(eve, max_, ada):
    a = services.stream_open(sender=eve.agent, recipient=max_.agent)
    b = services.stream_open(sender=max_.agent, recipient=ada.agent)
    chunks = [services.stream_append(stream_id=s.id, sender=s.sender, payload={}) for s in (a, b, a, b)]
    positions = [c.position for c in chunks]
    assert positions == sorted(positions) and len(set(positions)) == 4
    assert [c.created_at for c in chunks] == sorted(c.created_at for c in chunks)


def test_append_to_a_closed_stream_is_a_conflict(eve, max_):
    stream = services.stream_open(sender=eve.agent, recipient=max_.agent)
    services.stream_close(stream_id=stream.id, sender=eve.agent)
    with pytest.raises(ConflictError):
        services.stream_append(stream_id=stream.id, sender=eve.agent, payload={"text": "late"})


def test_only_the_sender_closes_a_stream_and_closing_twice_is_a_no_op(eve, max_):
    stream = services.stream_open(sender=eve.agent, recipient=max_.agent)
    with pytest.raises(ForbiddenError):
        services.stream_close(stream_id=stream.id, sender=max_.agent)
    first = services.stream_close(stream_id=stream.id, sender=eve.agent).closed_at
    assert services.stream_close(stream_id=stream.id, sender=eve.agent).closed_at == first
    assert AuditEvent.objects.filter(stream_id=stream.id, action="close").count() == 1


def test_the_recipient_of_a_direct_stream_answers_on_a_reply_stream(eve, max_):
    stream = services.stream_open(sender=eve.agent, recipient=max_.agent)
    with pytest.raises(ForbiddenError):
        services.stream_append(stream_id=stream.id, sender=max_.agent, payload={"text": "answer"})
    reply = services.stream_open(sender=max_.agent, recipient=eve.agent, reply_to=stream.id)
    assert reply.reply_to == stream.id


def test_only_an_audience_of_a_stream_may_reply_to_it(eve, max_, ada):
    stream = services.stream_open(sender=eve.agent, recipient=max_.agent)
    with pytest.raises(NotFoundError):
        services.stream_open(sender=ada.agent, recipient=eve.agent, reply_to=stream.id)


def test_group_stream_members_include_the_sender_and_may_append(eve, max_, ada):
    group = services.stream_open(sender=eve.agent, members=[max_.agent, ada.agent], topic="standup")
    assert selectors.stream_data(group)["members"] == ["ada", "eve", "max"]
    chunk = services.stream_append(stream_id=group.id, sender=max_.agent, payload={"text": "hi"})
    assert chunk.topic == "standup" and chunk.recipient_id is None


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({}, BusError),
        ({"recipient": "self"}, BusError),
        ({"stream_id": "has space", "recipient": "max"}, BusError),
        ({"topic": "x" * 201, "recipient": "max"}, BusError),
        ({"stream_id": "outbox.1.max", "recipient": "max"}, BusError),  # reserved for the outbox relay
    ],
)
def test_open_rejects_bad_input(eve, max_, kwargs, error):
    if kwargs.get("recipient") == "self":
        kwargs["recipient"] = eve.agent
    elif kwargs.get("recipient") == "max":
        kwargs["recipient"] = max_.agent
    with pytest.raises(error):
        services.stream_open(sender=eve.agent, **kwargs)


def test_a_duplicate_stream_id_is_a_conflict(eve, max_):
    services.stream_open(sender=eve.agent, recipient=max_.agent, stream_id="correction-1")
    with pytest.raises(ConflictError):
        services.stream_open(sender=eve.agent, recipient=max_.agent, stream_id="correction-1")


def test_payload_must_be_an_object(eve, max_):
    stream = services.stream_open(sender=eve.agent, recipient=max_.agent)
    with pytest.raises(BusError):
        services.stream_append(stream_id=stream.id, sender=eve.agent, payload=["not", "an", "object"])
    assert not Chunk.objects.exists()


def test_events_after_a_sequence(eve, max_):
    stream = services.stream_open(sender=eve.agent, recipient=max_.agent)
    for i in range(4):
        services.stream_append(stream_id=stream.id, sender=eve.agent, payload={"n": i})
    events = selectors.stream_events(stream, after=2)
    assert [(e["sequence"], e["payload"]["n"]) for e in events] == [(3, 2), (4, 3)]
    assert set(events[0]) == {
        "streamId",
        "sequence",
        "sender",
        "senderName",
        "senderTeam",
        "topic",
        "payload",
        "createdAt",
    }


def test_every_action_is_audited(eve, max_):
    stream = services.stream_open(sender=eve.agent, recipient=max_.agent, stream_id="audited")
    services.stream_append(stream_id=stream.id, sender=eve.agent, payload={"text": "x"})
    services.stream_close(stream_id=stream.id, sender=eve.agent)
    services.inbox_drain(agent_id=max_.id, peek=True, actor="agent:max")
    services.inbox_drain(agent_id=max_.id, actor="agent:max")
    actions = list(AuditEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["open", "append", "close", "peek", "drain"]
    assert AuditEvent.objects.get(action="append").actor == "agent:eve"
