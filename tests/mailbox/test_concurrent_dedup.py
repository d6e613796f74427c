"""Enqueue dedup under concurrency (issue 11, item 4): twenty threads enqueue items of
one dedup group at the same moment. Afterwards there is exactly one queued item for the
group, every other row was merged into it, and every text is in the survivor (the
heartbeat's others are discarded instead, nothing appended: heartbeat collapse). On
PostgreSQL this needs the per-group lock; on SQLite the IMMEDIATE transaction already
serialises the writers."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.services import agent_create
from markus.bench.mailbox import quiet_wakeups

T = MailboxType
THREADS, ROUNDS = 20, 3

# One dedup group per type: the same channel, the same task, the agent's heartbeat.
GROUPS = {
    T.A2A_MESSAGE: {"extra": {"channelKey": "stm_same"}},
    T.TASK_COMMENT: {"taskId": "tsk_same"},
    T.HEARTBEAT: {},
}


def _enqueue_together(agent_id: str, source_type: str, fields: dict) -> tuple[dict[str, str], list[Exception]]:
    tokens: dict[str, str] = {}
    errors: list[Exception] = []
    lock = threading.Lock()
    start = threading.Barrier(THREADS)

    def one(n: int) -> None:
        token = f"<text {n}>"
        try:
            start.wait(timeout=30)
            item = mailbox_enqueue(
                agent_id=agent_id,
                source_type=source_type,
                payload={"summary": f"from {n}", "content": token, **fields},
                metadata={"senderId": f"sender-{n}", "senderName": f"Sender {n}"},
            )
            with lock:
                tokens[item.id] = token
        except Exception as exc:  # reported by the test, not lost in a thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(n,)) for n in range(THREADS)]
    with quiet_wakeups():
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    return tokens, errors


@pytest.mark.pg
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("source_type", list(GROUPS), ids=str)
def test_twenty_concurrent_enqueues_of_one_dedup_group_leave_one_queued_item_with_every_text(alice, source_type):
    queued_per_round = []
    for r in range(ROUNDS):
        agent, _ = agent_create(name=f"Busy {r}", owner=alice, agent_id=f"busy-{r}")
        tokens, errors = _enqueue_together(agent.id, source_type, GROUPS[source_type])
        assert errors == []
        assert len(tokens) == THREADS

        rows = {r.id: r for r in MailboxItem.objects.filter(agent=agent)}
        assert set(rows) == set(tokens)
        queued = [r for r in rows.values() if r.status == Status.QUEUED]
        queued_per_round.append(len(queued))
        if len(queued) != 1:
            continue  # reported below with every round's figure
        survivor = queued[0]
        others = [r for r in rows.values() if r.id != survivor.id]
        if source_type == T.HEARTBEAT:  # heartbeat collapse: the later ones are discarded, nothing appended
            assert all(r.status == Status.DROPPED and survivor.id in r.drop_reason for r in others)
            assert survivor.payload["content"] == tokens[survivor.id]
            continue
        assert all(r.status == Status.MERGED and r.merged_into_id == survivor.id for r in others)
        for token in tokens.values():
            assert token in survivor.payload["content"], f"{token} lost"
        assert survivor.payload["summary"].endswith(f"(+{THREADS - 1})")
    print(f"\n{source_type}: queued rows per round {queued_per_round}")
    assert queued_per_round == [1] * ROUNDS, f"queued rows per dedup key: {queued_per_round}"
