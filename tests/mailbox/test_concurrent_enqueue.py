"""Eight producers enqueue comments for a handful of tasks (and other items) while a
worker claims and completes: every row is accounted for and no comment text is lost
(a heartbeat that duplicates one already queued or processing is discarded, dropped)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from markus.bench.mailbox import quiet_wakeups

T = MailboxType
PRODUCERS, PER_PRODUCER, TASKS = 8, 50, 4
OTHER_TYPES = [T.MENTION, T.A2A_MESSAGE, T.HEARTBEAT, T.TASK_STATUS_UPDATE]


def produce(agent_id, n, tokens, lock, errors):
    try:
        for i in range(PER_PRODUCER):
            token = f"<p{n}.{i}>"
            if i % 5 == 4:
                source_type, payload = OTHER_TYPES[(n + i) % len(OTHER_TYPES)], {"taskId": f"tsk_{i % TASKS}"}
            else:
                source_type, payload = T.TASK_COMMENT, {"taskId": f"tsk_{(n + i) % TASKS}"}
            item = mailbox_enqueue(
                agent_id=agent_id,
                source_type=source_type,
                payload={"summary": f"from {n}", "content": token, **payload},
            )
            with lock:
                tokens[item.id] = token
    except Exception as exc:  # reported by the test, not lost in a thread
        errors.append(exc)
    finally:
        connection.close()


def consume(agent_id, producing, seen, errors):
    try:
        while True:
            item = lifecycle.claim_next(agent_id=agent_id)
            if item is None:
                if not producing.is_set():
                    return
                time.sleep(0.002)
                continue
            seen[item.id] = item.payload["content"]
            if not lifecycle.complete(item.id):
                errors.append(AssertionError(f"could not complete {item.id}"))
    except Exception as exc:
        errors.append(exc)
    finally:
        connection.close()


@pytest.mark.pg
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrent_enqueues_while_a_worker_drains_lose_no_item_and_no_text(alice):
    agent, _ = agent_create(name="Busy", owner=alice, agent_id="busy")
    tokens: dict[str, str] = {}
    seen: dict[str, str] = {}
    errors: list[Exception] = []
    lock, producing = threading.Lock(), threading.Event()
    producing.set()
    producers = [threading.Thread(target=produce, args=(agent.id, n, tokens, lock, errors)) for n in range(PRODUCERS)]
    worker = threading.Thread(target=consume, args=(agent.id, producing, seen, errors))
    with quiet_wakeups():  # the thread below is the only worker: no attention loop joins in
        worker.start()
        for t in producers:
            t.start()
        for t in producers:
            t.join(timeout=120)
        producing.clear()
        worker.join(timeout=120)
    assert not worker.is_alive() and not any(t.is_alive() for t in producers)
    assert errors == []

    rows = {r.id: r for r in MailboxItem.objects.filter(agent=agent)}
    assert len(tokens) == PRODUCERS * PER_PRODUCER
    assert set(rows) == set(tokens)
    by_status = {s: [r for r in rows.values() if r.status == s] for s in Status}
    allowed = {Status.COMPLETED, Status.MERGED, Status.QUEUED, Status.DROPPED}
    assert {s for s, members in by_status.items() if members} <= allowed
    # Only a heartbeat is discarded, and only as the duplicate of one queued or processing
    # (heartbeat collapse keeps nothing of it: its text is in no other item).
    assert all(r.source_type == T.HEARTBEAT for r in by_status[Status.DROPPED])
    discarded = {r.id for r in by_status[Status.DROPPED]}
    assert {r.id for r in by_status[Status.COMPLETED]} == set(seen)
    assert by_status[Status.MERGED], "comments arriving together should merge"
    for row in by_status[Status.MERGED]:
        target = rows[row.merged_into_id]
        assert target.status != Status.MERGED and target.source_type == row.source_type
    for item_id, token in tokens.items():
        if item_id in discarded:
            continue
        holders = [r.id for r in rows.values() if r.status != Status.MERGED and token in r.payload["content"]]
        owner = rows[item_id].merged_into_id or item_id
        assert holders == [owner], f"{token} should be in exactly one surviving item"
    for item_id, content in seen.items():
        assert rows[item_id].payload["content"] == content, "nothing was merged into an item after its claim"
