"""Two beats by mistake (issue 16, item 1): beat ticks running at the same moment, each
in its own thread and database connection, give every agent one heartbeat per period.
Each period is claimed by a conditional UPDATE of the agent's ``next_heartbeat_at``."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection
from django.utils import timezone

from attention import tasks
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from markus.agents.models import Agent
from markus.agents.services import agent_create

pytestmark = [pytest.mark.pg, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def beats_at_once(n: int) -> list[int]:
    """``n`` heartbeat ticks released together; what each enqueued."""
    start = threading.Barrier(n)
    enqueued: list[int] = []
    errors: list[Exception] = []

    def beat() -> None:
        try:
            start.wait(timeout=30)
            enqueued.append(tasks.heartbeat_all())
        except Exception as exc:  # reported by the test, not lost in a thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=beat) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads) and errors == []
    return enqueued


@pytest.mark.parametrize("beats", [2, 6])
def test_beat_ticks_at_once_give_each_agent_one_heartbeat(alice, beats):
    crew = [agent_create(name=f"A{i}", owner=alice, agent_id=f"a{i}")[0].id for i in range(8)]
    enqueued = beats_at_once(beats)
    per_agent = Counter(MailboxItem.objects.filter(source_type=T.HEARTBEAT).values_list("agent_id", flat=True))
    print(f"\n{beats} beats: enqueued {enqueued}, heartbeats per agent {dict(per_agent)}")
    assert per_agent == Counter(crew), f"heartbeats per agent: {dict(per_agent)}"
    assert sum(enqueued) == len(crew)
    now = timezone.now()
    assert all(a.next_heartbeat_at > now for a in Agent.objects.filter(id__in=crew))

    # The next period, once the first heartbeats are handled: again one each.
    MailboxItem.objects.filter(source_type=T.HEARTBEAT).update(status="completed")
    Agent.objects.filter(id__in=crew).update(next_heartbeat_at=now)
    beats_at_once(beats)
    per_agent = Counter(MailboxItem.objects.filter(source_type=T.HEARTBEAT).values_list("agent_id", flat=True))
    assert set(per_agent.values()) == {2}, f"heartbeats per agent: {dict(per_agent)}"
