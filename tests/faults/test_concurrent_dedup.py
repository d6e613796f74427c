"""Scenario 6: twenty threads enqueue items of one dedup group at the same moment
(threads of the test process, each with its own PostgreSQL session on the scenario's
database). Afterwards the group has exactly one queued item and every other row was
merged into it: a message on one channel, a comment on one task, the heartbeat (its
others discarded, heartbeat collapse)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from .figures import collect
from .harness import seed

pytestmark = [pytest.mark.pg, pytest.mark.redis, pytest.mark.slow, pytest.mark.faults]

THREADS, ROUNDS = 20, 2
GROUPS = {
    "a2a_message": lambda r: {"extra": {"channelKey": f"stm_faults_{r}"}},
    "task_comment": lambda r: {"taskId": f"tsk_faults{r}"},
    "heartbeat": lambda r: {},
}


def enqueue_together(agent_id: str, source_type: str, fields: dict) -> list[str]:
    from mailbox.services import mailbox_enqueue

    errors: list[str] = []
    start = threading.Barrier(THREADS)

    def one(n: int) -> None:
        try:
            start.wait(timeout=30)
            mailbox_enqueue(
                agent_id=agent_id,
                source_type=source_type,
                payload={"summary": f"from {n}", "content": f"<text {n}>", **fields},
                metadata={"senderId": f"sender-{n}", "senderName": f"Sender {n}", "senderRole": "agent"},
            )
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    return errors


def test_twenty_way_concurrent_enqueue_of_one_dedup_key_queues_one_item(cluster, report, clock):
    from mailbox.models import MailboxItem

    seeded = seed(len(GROUPS) * ROUNDS)
    errors: list[str] = []
    queued: dict[str, int] = {}
    strays: list[str] = []
    agents = iter(seeded.agents)
    for r in range(ROUNDS):
        for source_type, fields in GROUPS.items():
            agent = next(agents)  # one agent per group: a heartbeat has one group per agent
            errors += enqueue_together(agent, source_type, fields(r))
            rows = MailboxItem.objects.filter(agent_id=agent, source_type=source_type)
            survivors = set(rows.filter(status="queued").values_list("id", flat=True))
            queued[f"{source_type}#{r}"] = len(survivors)
            # Every other row was merged into a queued survivor (nothing lost on the way).
            # (A heartbeat is discarded instead, its reason naming the survivor: heartbeat collapse.)
            others = rows.exclude(id__in=survivors).exclude(merged_into_id__in=survivors)
            strays += [
                i
                for i, status, reason in others.values_list("id", "status", "drop_reason")
                if not (status == "dropped" and any(s in reason for s in survivors))
            ]
    figures = collect(others="n/a")
    figures.lost = strays  # nothing is processed here (no worker runs): queued is the outcome
    figures.extra = f"threads={THREADS} groups={len(queued)} queued_per_group={sorted(queued.values())}"
    report(figures.line("6 concurrent-dedup", clock()))
    assert not errors, errors[:5]
    assert not strays, f"rows neither queued nor merged into the queued item: {strays[:8]}"
    doubles = {group: n for group, n in queued.items() if n != 1}
    assert not doubles, f"queued items per dedup group (want 1): {doubles}"
