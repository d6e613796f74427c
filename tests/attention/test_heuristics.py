"""Each interrupt rule, first match wins (pure function, no database)."""

from __future__ import annotations

import pytest

from attention.heuristics import heuristic_decision
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T


def item(kind, priority=None, **payload_and_meta):
    meta = payload_and_meta.pop("meta", {})
    from mailbox.registry import descriptor

    return MailboxItem(
        id=f"mbx_{kind}",
        agent_id="a",
        source_type=kind,
        priority=descriptor(kind).default_priority if priority is None else priority,
        payload=payload_and_meta,
        metadata=meta,
    )


CASES = [
    (
        "R0",
        item(T.HUMAN_CHAT, meta={"senderId": "u1", "sessionId": "s"}),
        item(T.HUMAN_CHAT, meta={"senderId": "u1", "sessionId": "s"}),
        "merge",
    ),
    (
        "R0 either without session",
        item(T.HUMAN_CHAT, meta={"senderId": "u1"}),
        item(T.HUMAN_CHAT, meta={"senderId": "u1", "sessionId": "s"}),
        "merge",
    ),
    (
        "R1 chat preempts task work",
        item(T.TASK_STATUS_UPDATE, taskId="t", extra={"triggerExecution": True}),
        item(T.HUMAN_CHAT, meta={"senderId": "u1"}),
        "preempt",
    ),
    (
        "R1 human comment preempts",
        item(T.HEARTBEAT),
        item(T.TASK_COMMENT, 0, taskId="x", meta={"senderRole": "user"}),
        "preempt",
    ),
    ("R1.5 a2a preempts background", item(T.MEMORY_CONSOLIDATION), item(T.A2A_MESSAGE), "preempt"),
    (
        "R2 comment on current task merges",
        item(T.TASK_STATUS_UPDATE, taskId="t", extra={"triggerExecution": True}),
        item(T.TASK_COMMENT, taskId="t", meta={"senderRole": "agent"}),
        "merge",
    ),
    (
        "R3 requirement comment merges",
        item(T.REQUIREMENT_UPDATE, requirementId="r", extra={"actionRequired": True}),
        item(T.REQUIREMENT_COMMENT, requirementId="r"),
        "merge",
    ),
    ("R4 critical preempts", item(T.REVIEW_REQUEST, 1), item(T.SYSTEM_EVENT, 0), "preempt"),
    ("R6 more urgent preempts", item(T.DAILY_REPORT, 2, taskId=None), item(T.REVIEW_REQUEST, 1), "preempt"),
    ("R8 equal priority over system work", item(T.SYSTEM_EVENT, 1), item(T.REVIEW_REQUEST, 1), "preempt"),
    ("R9 mention on normal work", item(T.A2A_MESSAGE, 2), item(T.MENTION, 2), "preempt"),
    ("continue otherwise", item(T.REVIEW_REQUEST, 1), item(T.SESSION_REPLY, 1), "continue"),
    (
        "a2a does not preempt a user interaction",
        item(T.HUMAN_CHAT, meta={"senderId": "u"}),
        item(T.A2A_MESSAGE),
        "continue",
    ),
    (
        "other sender's chat is not merged",
        item(T.HUMAN_CHAT, meta={"senderId": "u1"}),
        item(T.HUMAN_CHAT, meta={"senderId": "u2"}),
        "continue",
    ),
]


@pytest.mark.parametrize("name,current,new,expected", CASES, ids=[c[0] for c in CASES])
def test_heuristic_rules_in_order(name, current, new, expected):
    assert heuristic_decision(current, new).decision == expected


def test_heuristics_never_cancel():
    kinds = list(T)
    for a in kinds:
        for b in kinds:
            for pa in range(5):
                for pb in range(5):
                    assert heuristic_decision(item(a, pa), item(b, pb)).decision != "cancel"


def test_r0_does_not_merge_when_the_stream_was_cancelled():
    a, b = item(T.HUMAN_CHAT, meta={"senderId": "u"}), item(T.HUMAN_CHAT, meta={"senderId": "u"})
    assert heuristic_decision(a, b, stream_cancelled=True).decision == "continue"
