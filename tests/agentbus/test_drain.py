"""pending and drain: at once, with the consumed position kept at the server
(compare-and-set), the same cursor as wait's, and never closing a stream."""

from __future__ import annotations

import threading

import pytest
from asgiref.sync import async_to_sync

from agentbus import selectors, services
from agentbus.models import ConsumerCursor, Stream
from agentbus.waiting import inbox_wait

from .conftest import run_threads, say


def texts(result) -> list[str]:
    return [m["payload"]["text"] for m in result["messages"]]


@pytest.mark.django_db
@pytest.mark.pg
class TestDrain:
    def test_pending_counts_what_waits_and_drain_takes_it(self, eve, max_):
        say(max_, eve, "one")
        say(max_, eve, "two")
        assert selectors.pending_count("eve") == 2
        assert texts(services.inbox_drain(agent_id="eve")) == ["one", "two"]
        assert selectors.pending_count("eve") == 0
        assert services.inbox_drain(agent_id="eve")["messages"] == []

    def test_peek_looks_without_consuming(self, eve, max_):
        say(max_, eve, "one")
        assert texts(services.inbox_drain(agent_id="eve", peek=True)) == ["one"]
        assert selectors.pending_count("eve") == 1
        assert not ConsumerCursor.objects.exists()

    def test_drain_with_a_limit_takes_the_oldest_first(self, eve, max_):
        for i in range(5):
            say(max_, eve, f"m{i}")
        assert texts(services.inbox_drain(agent_id="eve", limit=2)) == ["m0", "m1"]
        assert texts(services.inbox_drain(agent_id="eve", limit=10)) == ["m2", "m3", "m4"]

    def test_draining_never_closes_a_stream(self, eve, max_):
        chunk = say(max_, eve, "one")
        services.inbox_drain(agent_id="eve")
        assert Stream.objects.get(id=chunk.stream_id).closed_at is None
        services.stream_append(stream_id=chunk.stream_id, sender=max_.agent, payload={"text": "two"})
        assert texts(services.inbox_drain(agent_id="eve")) == ["two"]

    def test_drain_and_wait_spell_the_same_cursor(self, eve, max_):
        say(max_, eve, "one")
        drained = services.inbox_drain(agent_id="eve")
        say(max_, eve, "two")
        waited = async_to_sync(inbox_wait)(agent_id="eve", after_cursor=drained["next_cursor"], timeout=0)
        assert texts(waited) == ["two"]
        say(max_, eve, "three")
        # The agent's wait with a cursor acknowledges it, so drain continues after it.
        async_to_sync(inbox_wait)(agent_id="eve", after_cursor=waited["next_cursor"], timeout=0, ack=True)
        assert texts(services.inbox_drain(agent_id="eve")) == ["three"]

    def test_wait_without_a_cursor_starts_at_the_consumer_cursor(self, eve, max_):
        say(max_, eve, "old")
        services.inbox_drain(agent_id="eve")
        say(max_, eve, "new")
        assert texts(async_to_sync(inbox_wait)(agent_id="eve", timeout=0)) == ["new"]

    def test_an_acknowledgement_never_moves_the_consumer_cursor_back(self, eve, max_):
        say(max_, eve, "one")
        early = selectors.inbox_read("eve")["next_cursor"]
        say(max_, eve, "two")
        services.inbox_drain(agent_id="eve")
        assert services.inbox_ack(agent_id="eve", cursor=early) is False
        assert selectors.pending_count("eve") == 0

    def test_a_lost_compare_and_set_retries_instead_of_double_delivering(self, eve, max_, monkeypatch):
        say(max_, eve, "one")
        services.inbox_drain(agent_id="eve")
        say(max_, eve, "two")
        real = selectors.inbox_read_from
        calls = []

        def racing(agent_id, position, **kwargs):
            result = real(agent_id, position, **kwargs)
            if not calls:  # another drain moves the cursor between our read and our CAS
                calls.append(1)
                row = ConsumerCursor.objects.get(agent_id="eve")
                ConsumerCursor.objects.filter(id=row.id).update(cursor="moved", position=result["position"])
            return result

        monkeypatch.setattr(selectors, "inbox_read_from", racing)
        assert services.inbox_drain(agent_id="eve")["messages"] == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.pg
def test_concurrent_drains_hand_out_each_message_exactly_once(eve, max_):
    stream = services.stream_open(sender=max_.agent, recipient=eve.agent)
    for i in range(40):
        services.stream_append(stream_id=stream.id, sender=max_.agent, payload={"text": f"m{i}"})
    taken: list[str] = []
    lock = threading.Lock()

    def drainer():
        for _ in range(20):
            got = texts(services.inbox_drain(agent_id="eve", limit=3))
            with lock:
                taken.extend(got)

    errors = run_threads([drainer] * 4)
    assert not errors
    assert sorted(taken) == sorted(f"m{i}" for i in range(40))
