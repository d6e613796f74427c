"""A bus append sent again with its ``Idempotency-Key`` is stored once, as a posted item
or a chat is: an outside agent whose answer was lost (a cut connection, a 503 after the
commit) cannot tell whether its message went, and sent again without a key the
recipient gets it twice (an agent the loop runs answers it twice). The key is the
sender's own, per stream; the same key with another message is a 422 that stores
nothing; a malformed key is a 400 stating the rule. eve is an outside agent, ada is run
by the loop."""

from __future__ import annotations

import threading

import pytest

from agentbus import services
from agentbus.models import Chunk
from mailbox.models import MailboxItem

from .conftest import append, open_stream, run_threads

pytestmark = pytest.mark.django_db


def test_an_append_sent_again_with_its_key_is_stored_once_and_answered_as_the_first(eve, ada):
    client = eve.client()
    stream_id = open_stream(client, eve.id, ada.id)

    first = append(client, stream_id, eve.id, "Is the build green?", "k-1")
    again = append(client, stream_id, eve.id, "Is the build green?", "k-1")

    assert first.status_code == 201 and "Idempotent-Replayed" not in first
    assert again.status_code == 200 and again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert Chunk.objects.filter(stream_id=stream_id).count() == 1
    assert MailboxItem.objects.filter(agent_id=ada.id).count() == 1


def test_the_same_key_with_another_message_is_a_422_that_stores_nothing(eve, ada):
    client = eve.client()
    stream_id = open_stream(client, eve.id, ada.id)
    assert append(client, stream_id, eve.id, "Is the build green?", "k-1").status_code == 201

    reused = append(client, stream_id, eve.id, "And the docs?", "k-1")

    assert reused.status_code == 422, reused.content
    assert reused.json()["code"] == "idempotency_key_reused" and "sequence 1" in reused.json()["detail"]
    assert Chunk.objects.filter(stream_id=stream_id).count() == 1


def test_a_key_is_per_stream_and_no_key_stores_each_send(eve, max_):
    client = eve.client()
    one, two = open_stream(client, eve.id, max_.id), open_stream(client, eve.id, max_.id)
    assert append(client, one, eve.id, "hello", "k-1").status_code == 201
    assert append(client, two, eve.id, "hello", "k-1").status_code == 201
    assert append(client, one, eve.id, "hello", None).status_code == 201
    assert append(client, one, eve.id, "hello", None).status_code == 201
    assert Chunk.objects.filter(stream_id=one).count() == 3 and Chunk.objects.filter(stream_id=two).count() == 1


def test_a_malformed_key_is_a_400_stating_the_rule(eve, max_):
    client = eve.client()
    stream_id = open_stream(client, eve.id, max_.id)
    refused = append(client, stream_id, eve.id, "hello", "has a space")
    assert refused.status_code == 400
    assert "Idempotency-Key must be 1 to 200 visible ASCII characters" in refused.json()["detail"]
    assert not Chunk.objects.filter(stream_id=stream_id).exists()


@pytest.mark.pg
@pytest.mark.django_db(transaction=True)
def test_sends_racing_with_one_key_store_one_message(eve, max_):
    """Four sends of one message with one key at once (a client's retries overlapping the
    first): the stream's row lock orders them, one stores, the others answer its message.
    Runs on SQLite, and on PostgreSQL in the ``pg`` pass."""
    stream = services.stream_open(sender=eve.agent, recipient=max_.agent)
    start = threading.Barrier(4)
    answers: list[tuple[int, bool]] = []

    def send() -> None:
        start.wait(timeout=10)
        chunk, replayed = services.stream_append_once(
            stream_id=stream.id, sender=eve.agent, payload={"text": "once"}, request_key="k-race"
        )
        answers.append((chunk.sequence, replayed))

    errors = run_threads([send] * 4)
    assert not errors, errors
    assert sorted(answers) == [(1, False), (1, True), (1, True), (1, True)]
    assert Chunk.objects.filter(stream_id=stream.id).count() == 1
