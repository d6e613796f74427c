"""ARCHITECTURE decision 7: a bus message to an agent the attention loop runs is also
an agent message in its mailbox (channel key = stream id); an external harness only
reads its inbox. ``send_agent_message`` is the one path agent tools use."""

from __future__ import annotations

import pytest

from agentbus import selectors, services
from agentbus.errors import ConflictError, NotFoundError
from agentbus.models import Chunk, Stream
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status

pytestmark = pytest.mark.django_db


def test_a_message_to_an_internal_agent_is_enqueued_in_its_mailbox(eve, ada):
    stream = services.stream_open(sender=eve.agent, recipient=ada.agent)
    services.stream_append(stream_id=stream.id, sender=eve.agent, payload={"text": "stop, wrong file"})
    item = MailboxItem.objects.get(agent_id="ada")
    assert item.source_type == MailboxType.A2A_MESSAGE
    assert item.payload == {
        "summary": "Eve: stop, wrong file",
        "content": "stop, wrong file",
        "extra": {"channelKey": stream.id},
    }
    assert item.metadata == {
        "senderId": "eve",
        "senderName": "Eve",
        "senderRole": "agent",
        "sequence": 1,
    }
    assert item.marks == {"streamId": stream.id}  # the system's: its answer goes there


def test_a_burst_on_one_stream_coalesces_into_one_queued_item(eve, ada):
    stream = services.stream_open(sender=eve.agent, recipient=ada.agent)
    for text in ("one", "two", "three"):
        services.stream_append(stream_id=stream.id, sender=eve.agent, payload={"text": text})
    queued = MailboxItem.objects.filter(agent_id="ada", status=Status.QUEUED)
    assert queued.count() == 1
    assert MailboxItem.objects.filter(agent_id="ada", status=Status.MERGED).count() == 2
    assert "three" in queued.get().payload["content"]


def test_an_external_agent_gets_no_mailbox_item(ada, eve):
    stream = services.stream_open(sender=ada.agent, recipient=eve.agent)
    services.stream_append(stream_id=stream.id, sender=ada.agent, payload={"text": "hi"})
    assert not MailboxItem.objects.exists()
    assert len(selectors.inbox_read("eve")["messages"]) == 1


def test_a_group_message_reaches_internal_members_but_not_its_sender(eve, ada, max_):
    group = services.stream_open(sender=ada.agent, members=[eve.agent, max_.agent])
    services.stream_append(stream_id=group.id, sender=ada.agent, payload={"text": "from ada"})
    assert not MailboxItem.objects.filter(agent_id="ada").exists()
    services.stream_append(stream_id=group.id, sender=eve.agent, payload={"text": "from eve"})
    assert MailboxItem.objects.get(agent_id="ada").metadata["senderId"] == "eve"


def test_a_failing_enqueue_rolls_the_append_back(eve, ada, monkeypatch):
    stream = services.stream_open(sender=eve.agent, recipient=ada.agent)

    def broken(**kwargs):
        raise RuntimeError("mailbox down")

    monkeypatch.setattr(services, "mailbox_enqueue", broken)
    with pytest.raises(RuntimeError):
        services.stream_append(stream_id=stream.id, sender=eve.agent, payload={"text": "x"})
    assert not Chunk.objects.exists() and Stream.objects.get(id=stream.id).last_sequence == 0


def test_send_agent_message_opens_a_stream_and_continues_it(ada, eve):
    first = services.send_agent_message(sender=ada.agent, recipient=eve.agent, text="build is red")
    again = services.send_agent_message(
        sender=ada.agent, recipient=eve.agent, text="still red", stream_id=first.stream_id
    )
    assert again.stream_id == first.stream_id and again.sequence == 2
    assert [m["payload"]["text"] for m in selectors.inbox_read("eve")["messages"]] == ["build is red", "still red"]


def test_send_agent_message_answers_on_a_reply_stream(ada, eve):
    question = services.send_agent_message(sender=eve.agent, recipient=ada.agent, text="which branch?")
    answer = services.send_agent_message(
        sender=ada.agent, recipient=eve.agent, text="main", stream_id=question.stream_id
    )
    more = services.send_agent_message(
        sender=ada.agent, recipient=eve.agent, text="and rebase", stream_id=question.stream_id
    )
    reply_stream = Stream.objects.get(id=answer.stream_id)
    assert reply_stream.reply_to == question.stream_id and more.stream_id == reply_stream.id
    assert [m["payload"]["text"] for m in selectors.inbox_read("eve")["messages"]] == ["main", "and rebase"]


def test_send_agent_message_to_a_stream_it_is_not_part_of_is_not_found(ada, eve, max_):
    other = services.send_agent_message(sender=eve.agent, recipient=max_.agent, text="private")
    with pytest.raises(NotFoundError):
        services.send_agent_message(sender=ada.agent, recipient=max_.agent, text="hi", stream_id=other.stream_id)


def test_send_agent_message_on_a_closed_stream_is_a_conflict(ada, eve):
    first = services.send_agent_message(sender=ada.agent, recipient=eve.agent, text="done?")
    services.stream_close(stream_id=first.stream_id, sender=ada.agent)
    with pytest.raises(ConflictError):
        services.send_agent_message(sender=ada.agent, recipient=eve.agent, text="late", stream_id=first.stream_id)
