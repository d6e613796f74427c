"""An internal agent hears the bus through its mailbox (ARCHITECTURE decision 7), so a
bus message its mailbox takes is consumed from its bus inbox in the same transaction:
its consumer cursor moves past the chunk, ``pending`` stays 0 and the console shows no
unread work that is not there. The chunk stays on the bus (a read from the start, a
wait already waiting, the stream's events still see it). External agents, who read
the bus themselves, keep what is waiting for them."""

from __future__ import annotations

import pytest
from django.db import transaction

from agentbus import outbox, selectors, services
from agentbus.models import INBOX_TOPIC, ConsumerCursor
from mailbox.models import MailboxItem
from markus.core.actors import Actor
from markus.work.services import task_create

from .conftest import say

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def cursor_of(agent_id: str) -> int | None:
    return (
        ConsumerCursor.objects.filter(agent_id=agent_id, topic=INBOX_TOPIC).values_list("position", flat=True).first()
    )


def test_a_message_the_mailbox_takes_is_consumed_from_the_bus_inbox(eve, ada):
    chunk = say(eve, ada, "is main green?")
    assert MailboxItem.objects.filter(agent_id="ada", source_type="a2a_message").count() == 1
    assert selectors.pending_count("ada") == 0
    assert cursor_of("ada") == chunk.position
    assert selectors.inbox_read("ada")["messages"] == []  # drain / wait without a cursor: nothing new
    # Still on the bus: read from the start, it is there.
    assert [m["payload"]["text"] for m in selectors.inbox_read_from("ada", 0)["messages"]] == ["is main green?"]


def test_every_message_moves_the_cursor_past_it(eve, max_, ada):
    say(eve, ada, "one")
    say(max_, ada, "two")
    last = say(eve, ada, "three")
    assert selectors.pending_count("ada") == 0 and cursor_of("ada") == last.position
    assert selectors.pending_counts(["ada", "eve"]) == {"ada": 0, "eve": 0}


def test_an_external_agent_keeps_what_waits_for_it(eve, max_, ada):
    say(ada, eve, "for eve")
    say(max_, eve, "also for eve")
    assert selectors.pending_count("eve") == 2
    assert cursor_of("eve") is None


def test_a_group_message_is_consumed_for_its_internal_members_only(eve, max_, ada):
    group = services.stream_open(sender=eve.agent, members=[max_.agent, ada.agent])
    services.stream_append(stream_id=group.id, sender=eve.agent, payload={"text": "all"})
    assert selectors.pending_count("ada") == 0
    assert selectors.pending_count("max") == 1


def test_task_lifecycle_records_do_not_pile_up_in_an_internal_inbox(alice, ada, eve):
    with transaction.atomic():
        task = task_create(actor=Actor.for_user(alice), title="Fix the build", assignee_id="ada", start=False)
        task_create(actor=Actor.for_user(alice), title="Other", assignee_id="eve", start=False)
    outbox.outbox_relay()
    assert any(
        m["payload"].get("taskId") == task.id for m in selectors.inbox_read_from("ada", 0)["messages"]
    )  # the record is on the bus
    assert selectors.pending_count("ada") == 0
    assert selectors.pending_count("eve") == 2  # the record, and its mailbox's notice (attention.outside)


def test_the_cursor_moves_in_the_appends_transaction(eve, ada):
    say(eve, ada, "first")
    before = cursor_of("ada")
    with pytest.raises(RuntimeError), transaction.atomic():
        say(eve, ada, "rolled back")
        raise RuntimeError("abort")
    assert cursor_of("ada") == before
    assert MailboxItem.objects.filter(agent_id="ada").count() == 1


def test_the_cursor_never_moves_back(eve, ada):
    say(eve, ada, "x")
    ConsumerCursor.objects.filter(agent_id="ada").update(position=10**6)
    say(eve, ada, "y")
    assert cursor_of("ada") == 10**6


def test_the_agent_api_shows_no_pending_inbox_for_an_internal_agent(alice_client, eve, ada):
    say(eve, ada, "hello")
    assert alice_client.get("/api/agents/ada/").json()["pendingInbox"] == 0
    rows = alice_client.get("/api/agents/?inbox=1").json()
    assert {r["id"]: r["pendingInboxCount"] for r in rows}["ada"] == 0
