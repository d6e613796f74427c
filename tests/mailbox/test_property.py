"""Property: for any sequence of enqueues, dequeues, completes, defers, resurfaces,
consolidations and recoveries, every enqueued item is accounted for exactly once, no
text is lost, and every dequeue takes the minimum of (priority, queued_at, id)."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_consolidate_by_entity, mailbox_enqueue, mailbox_recover
from markus.agents.services import agent_create

T = MailboxType
pytestmark = [pytest.mark.django_db, pytest.mark.pg]
_agents = itertools.count()

# Types chosen so every rule gets exercised: the three dedup groups, status updates,
# heartbeats (collapse), human chat (protected, re-queued by recovery), plain items.
TYPES = [
    T.TASK_COMMENT,
    T.REQUIREMENT_COMMENT,
    T.A2A_MESSAGE,
    T.TASK_STATUS_UPDATE,
    T.HEARTBEAT,
    T.HUMAN_CHAT,
    T.MENTION,
]

enqueue_op = st.tuples(
    st.just("enqueue"),
    st.sampled_from(TYPES),
    st.one_of(st.none(), st.integers(0, 4)),  # priority
    st.sampled_from(["k1", "k2", None]),  # the entity / channel key
    st.booleans(),  # an execution trigger
    st.booleans(),  # written by a human
)
ops = st.lists(
    st.one_of(
        enqueue_op,
        enqueue_op,
        st.just(("dequeue",)),
        st.just(("complete",)),
        st.tuples(st.just("defer"), st.integers(0, 10), st.booleans()),
        st.just(("resurface",)),
        st.just(("recover",)),
        st.just(("consolidate",)),
    ),
    max_size=30,
)


def payload(key, trigger, token):
    extra = {"triggerExecution": True} if trigger else {}
    body = {"summary": f"item {token}", "content": token}
    if key is not None:
        body["taskId"] = key
        body["requirementId"] = key
        extra["channelKey"] = key
    if extra:
        body["extra"] = extra
    return body


def head_in_python(agent_id):
    rows = list(MailboxItem.objects.filter(agent_id=agent_id, status=Status.QUEUED))
    return min(rows, key=lambda r: (r.priority, r.queued_at, r.id)) if rows else None


def root_of(row, rows):
    seen = set()
    while row.status == Status.MERGED:
        assert row.id not in seen, "merged_into forms a cycle"
        seen.add(row.id)
        assert row.merged_into_id in rows, "merged_into points at no row of this agent"
        row = rows[row.merged_into_id]
    return row


def check_accounting(agent_id, tokens):
    rows = {r.id: r for r in MailboxItem.objects.filter(agent_id=agent_id)}
    assert set(rows) == set(tokens), "every enqueued item is a row, and no row came from nowhere"
    alive = [r for r in rows.values() if r.status != Status.MERGED]
    for row in rows.values():
        assert row.status in set(Status)
        if row.status == Status.MERGED:
            root = root_of(row, rows)
            assert root.priority <= row.priority, "the survivor keeps the highest priority"
        else:
            assert row.merged_into_id is None
    for item_id, token in tokens.items():
        holders = [r.id for r in alive if token in r.payload.get("content", "")]
        assert holders == [root_of(rows[item_id], rows).id], f"text of {item_id} lost or duplicated"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=ops)
def test_every_item_is_accounted_for_once_and_dequeues_follow_priority_then_age(alice, sequence):
    agent, _ = agent_create(name="Prop", owner=alice, agent_id=f"prop{next(_agents)}")
    tokens: dict[str, str] = {}
    in_flight: list[str] = []
    for n, op in enumerate(sequence):
        kind = op[0]
        if kind == "enqueue":
            _, source_type, priority, key, trigger, human = op
            token = f"<{n}>"
            item = mailbox_enqueue(
                agent_id=agent.id,
                source_type=source_type,
                payload=payload(key, trigger, token),
                priority=priority,
                metadata={"senderRole": "user" if human else "agent"},
            )
            tokens[item.id] = token
        elif kind == "dequeue":
            expected = head_in_python(agent.id)
            claimed = lifecycle.claim_next(agent_id=agent.id)
            if expected is None:
                assert claimed is None
            else:
                assert claimed is not None and claimed.id == expected.id
                assert claimed.status == Status.PROCESSING
                in_flight.append(claimed.id)
        elif kind == "complete" and in_flight:
            item_id = in_flight.pop(0)
            was_processing = MailboxItem.objects.get(id=item_id).status == Status.PROCESSING
            assert lifecycle.complete(item_id) is was_processing
        elif kind == "defer":
            _, index, timed = op
            open_ids = sorted(
                MailboxItem.objects.filter(
                    agent_id=agent.id, status__in=[Status.QUEUED, Status.PROCESSING]
                ).values_list("id", flat=True)
            )
            if open_ids:
                until = timezone.now() + timedelta(hours=1) if timed else None
                assert lifecycle.defer(open_ids[index % len(open_ids)], until=until)
        elif kind == "resurface":
            lifecycle.resurface_due(agent.id)
        elif kind == "recover":
            mailbox_recover(agent.id)
        elif kind == "consolidate":
            mailbox_consolidate_by_entity(agent.id)
        check_accounting(agent.id, tokens)
