"""The ordering hole, closed: under concurrent writers a cursor reader never skips a
committed chunk. Runs on SQLite, and on PostgreSQL in the ``pg`` pass."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest
from asgiref.sync import async_to_sync
from django.db import connection, transaction

from agentbus import selectors, services
from agentbus.models import Chunk
from agentbus.waiting import inbox_wait
from markus.agents.models import Agent
from markus.agents.services import agent_create

from .conftest import run_threads

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg, pytest.mark.slow]

WRITERS = 6
PER_WRITER = 40


def test_a_watcher_with_a_cursor_sees_every_message_under_concurrent_writers(alice, team, monkeypatch):
    watcher = agent_create(name="Watcher", owner=alice, team=team, agent_id="watcher", kind=Agent.Kind.EXTERNAL)[0]
    writers = [
        agent_create(name=f"W{i}", owner=alice, team=team, agent_id=f"w{i}", kind=Agent.Kind.EXTERNAL)[0]
        for i in range(WRITERS)
    ]
    streams = {}
    for w in writers:  # several streams per writer: direct ones and a shared group
        streams[w.id] = [services.stream_open(sender=w, recipient=watcher).id for _ in range(2)]
    group = services.stream_open(sender=writers[0], members=[watcher, *writers[1:]]).id

    # Hold the inbox clock a little longer before commit: a design that could skip a
    # chunk committing late would do so here.
    real_next = services._next_position

    def slow_next():
        position = real_next()
        time.sleep(random.random() * 0.003)
        return position

    monkeypatch.setattr(services, "_next_position", slow_next)
    sent: list[str] = []
    sent_lock = threading.Lock()
    done = threading.Event()

    def writer(agent: Agent):
        def run():
            rng = random.Random(agent.id)
            for n in range(PER_WRITER):
                stream_id = rng.choice(streams[agent.id] + [group])
                text = f"{agent.id}:{n}"
                services.stream_append(stream_id=stream_id, sender=agent, payload={"text": text})
                with sent_lock:
                    sent.append(text)
                time.sleep(rng.random() * 0.002)

        return run

    seen: list[str] = []

    def watch():
        cursor, idle_after_done = None, 0
        rng = random.Random(7)
        while idle_after_done < 3:
            result = async_to_sync(inbox_wait)(
                agent_id="watcher", after_cursor=cursor, timeout=0.05, limit=rng.randint(1, 7)
            )
            seen.extend(m["payload"]["text"] for m in result["messages"])
            cursor = result["next_cursor"]
            if done.is_set() and not result["messages"]:
                idle_after_done += 1

    watcher_thread_errors: list[BaseException] = []
    watcher_thread = threading.Thread(target=lambda: _guard(watch, watcher_thread_errors))
    watcher_thread.start()
    errors = run_threads([writer(w) for w in writers])
    done.set()
    watcher_thread.join(timeout=120)
    assert not errors and not watcher_thread_errors, errors + watcher_thread_errors

    expected = set(sent)  # the watcher never writes: everything sent is addressed to it
    counts = Counter(seen)
    assert len(sent) == WRITERS * PER_WRITER
    assert set(counts) == expected, f"missed: {sorted(expected - set(counts))[:10]}"
    assert max(counts.values()) == 1  # positions make it exactly once, not just at least once
    assert Chunk.objects.count() == WRITERS * PER_WRITER


def _guard(fn, errors: list[BaseException]) -> None:
    try:
        fn()
    except BaseException as exc:
        errors.append(exc)
    finally:
        connection.close()


def test_a_later_append_cannot_commit_before_an_earlier_uncommitted_one(alice, team):
    """The mechanism itself: B's append waits for A's commit, so A's position (lower)
    is visible no later than B's."""
    watcher = agent_create(name="Watcher", owner=alice, team=team, agent_id="watcher")[0]
    a, b = (
        agent_create(name=n, owner=alice, team=team, agent_id=n, kind=Agent.Kind.EXTERNAL)[0]
        for n in ("writer-a", "writer-b")
    )
    sa = services.stream_open(sender=a, recipient=watcher).id
    sb = services.stream_open(sender=b, recipient=watcher).id
    a_has_position = threading.Event()
    marks: dict[str, float] = {}
    observations: list[list[str]] = []

    def slow_writer():
        with transaction.atomic():
            services.stream_append(stream_id=sa, sender=a, payload={"text": "A"})
            a_has_position.set()
            time.sleep(0.4)
            marks["a_commit"] = time.monotonic()

    def fast_writer():
        a_has_position.wait(5)
        services.stream_append(stream_id=sb, sender=b, payload={"text": "B"})
        marks["b_done"] = time.monotonic()

    def reader():
        a_has_position.wait(5)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            result = selectors.inbox_read_from("watcher", 0)
            observations.append([m["payload"]["text"] for m in result["messages"]])
            time.sleep(0.01)

    assert not run_threads([slow_writer, fast_writer, reader])
    assert marks["b_done"] >= marks["a_commit"]
    assert all(seen in ([], ["A"], ["A", "B"]) for seen in observations), observations
    assert observations[-1] == ["A", "B"]
