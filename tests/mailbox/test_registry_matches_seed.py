"""The registry's values, row by row, against the seed's tables: the type registry
(section 3.1: label, default priority, category, icon, activity type, creates-activity,
invokes-LLM), the filter categories (3.3), the activity type derivation (6.3) and the
dedup groups (14). The seed's rows are copied here as the seed prints them. Where this
project differs on purpose it is a named row of ``ADDITIONS`` (a type the seed does not
have), never a silent difference."""

from __future__ import annotations

import pytest

from attention.records import activity_type_for
from mailbox.models import MailboxItem
from mailbox.registry import MAILBOX_TYPE_REGISTRY, MESSAGE_SEPARATOR, MailboxType, descriptor, types_in_category

# Seed section 3.1, as printed:
# type: (label, defaultPriority, category, icon, activityType, createsActivity, invokesLLM)
SEED_REGISTRY = {
    "system_event": ("System Event", 1, "system", "⚙", "internal", True, True),
    "human_chat": ("Chat", 0, "interaction", "💬", "chat", True, True),
    "task_comment": ("Task Comment", 2, "task", "💬", None, False, False),
    "mention": ("Mention", 1, "interaction", "@", "chat", True, True),
    "session_reply": ("Session Reply", 1, "task", "↩", "respond_in_session", True, True),
    "task_status_update": ("Task Status", 1, "task", "📋", None, True, False),
    "a2a_message": ("Agent Message", 2, "interaction", "🔗", "a2a", True, True),
    "review_request": ("Review Request", 1, "task", "👀", "chat", True, True),
    "requirement_comment": ("Requirement Comment", 2, "task", "💬", None, False, False),
    "requirement_update": ("Requirement Update", 1, "notification", "📝", "internal", True, False),
    "daily_report": ("Daily Report", 2, "system", "📊", "internal", True, True),
    "heartbeat": ("Heartbeat", 3, "system", "♡", "heartbeat", True, True),
    "memory_consolidation": ("Memory Consolidation", 4, "system", "🧠", "internal", True, True),
}
# Types of ours the seed does not list, and why (README: the rhythm and memory).
ADDITIONS = {
    "reminder": "an item the agent put in its own future (schedule_reminder)",
    "callback_result": "the answer an agent awaited (agent_send_message await_reply), upstream's callback_result",
}

# Seed section 3.3.
SEED_CATEGORIES = {
    "interaction": {"human_chat", "a2a_message", "mention"},
    "task": {"task_status_update", "task_comment", "requirement_comment", "review_request", "session_reply"},
    "notification": {"requirement_update"},
    "system": {"system_event", "heartbeat", "daily_report", "memory_consolidation"},
}

# Seed section 14: group -> (dedup key, the type). The registry's key is a path into the payload.
SEED_DEDUP = {"task_comment": "taskId", "requirement_comment": "requirementId", "a2a_message": "extra.channelKey"}

# Seed section 6.3: the activity a run of each type makes, by mode where it depends on one.
SEED_ACTIVITY = [
    ("human_chat", "chat", "chat"),
    ("a2a_message", "a2a", "a2a"),
    ("task_comment", "comment_response", "chat"),  # inactive task: falls back to chat
    ("requirement_comment", "comment_response", "chat"),
    ("task_status_update", "task_execution", "task"),  # execution mode
    ("requirement_update", "requirement_action", "internal"),  # actionRequired
    ("mention", "mention_response", "chat"),
    ("review_request", "review", "chat"),
    ("session_reply", "session_response", "respond_in_session"),
    ("heartbeat", "check_in", "heartbeat"),
    ("system_event", "system_notice", "internal"),
    ("daily_report", "daily_report_writing", "internal"),
    ("memory_consolidation", "dream_cycle", "internal"),
]


def test_the_registry_has_the_seed_types_and_only_the_named_additions():
    ours = {t.value for t in MAILBOX_TYPE_REGISTRY}
    assert ours - set(SEED_REGISTRY) <= set(ADDITIONS), "a type the seed does not have: name it in ADDITIONS"
    assert "reminder" in ours
    assert set(SEED_REGISTRY) - ours == set()


@pytest.mark.parametrize("source_type", sorted(SEED_REGISTRY))
def test_each_registry_row_is_the_seed_row(source_type):
    label, priority, category, icon, activity, creates, invokes = SEED_REGISTRY[source_type]
    d = descriptor(source_type)
    row = (
        d.label,
        int(d.default_priority),
        d.category.value,
        d.icon,
        d.activity_type.value if d.activity_type else None,
        d.creates_activity,
        d.invokes_llm,
    )
    assert row == (label, priority, category, icon, activity, creates, invokes)


@pytest.mark.parametrize("category", sorted(SEED_CATEGORIES))
def test_each_filter_category_holds_the_seed_types(category):
    ours = set(types_in_category(category)) - set(ADDITIONS)
    assert ours == SEED_CATEGORIES[category]


@pytest.mark.parametrize("source_type", sorted(SEED_REGISTRY))
def test_the_merge_rule_of_each_type_is_the_seed_dedup_table(source_type):
    """Comments merge by their task / requirement, agent messages by channel, nothing
    else at enqueue (status updates are distinct transitions)."""
    assert descriptor(source_type).dedup_key == SEED_DEDUP.get(source_type)


def test_merged_contents_are_separated_as_the_seed_says():
    assert MESSAGE_SEPARATOR == "\n\n---\n\n"


def test_only_the_heartbeat_collapses_to_one_queued_item():
    assert {t.value for t, d in MAILBOX_TYPE_REGISTRY.items() if d.one_queued} == {MailboxType.HEARTBEAT.value}


@pytest.mark.parametrize("source_type,scenario,activity", SEED_ACTIVITY, ids=[r[0] for r in SEED_ACTIVITY])
def test_the_activity_type_of_a_run_is_the_seed_derivation(source_type, scenario, activity):
    item = MailboxItem(agent_id="ada", source_type=source_type, payload={})
    assert activity_type_for(item, scenario) == activity
