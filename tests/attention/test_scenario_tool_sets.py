"""Each scenario is offered the built-in tools it needs and no others: every tool names
its scenarios; a chat and a system notice are offered at most half the schema characters
they were (a chat 18 tools of 34: delegating is what a person may ask for too);
deliberation and triage exactly their read-only sets; and every tool a scenario's prompt,
its items' texts or an offered tool's description name is offered there."""

from __future__ import annotations

import json
import re

import pytest

from attention import scenarios as sc
from attention.deliberation import DELIBERATION_ALLOWED_TOOLS
from attention.scenarios import SCENARIOS, human_guidance
from attention.toolbox import builtin_for, load_tools
from attention.triage import TRIAGE_ALLOWED_TOOLS

# What the first request of each offered before the tools got their scenario sets
# (commit 486d09d: json.dumps of the schemas of builtin_for(scenario)).
BEFORE = {sc.CHAT: (34, 13_248), sc.SYSTEM_NOTICE: (33, 12_699)}

READ = {"task_list", "task_get", "requirement_list", "requirement_get"}
MEMORY = {"memory_search", "memory_search_longterm", "recall_activity"}
TELL = {"notify_user", "task_comment", "requirement_comment"}
NOTE = {"update_working_memory", "clear_working_memory"}
# The tools of markus.tools each scenario is offered (the loop's own, end_turn, aside).
EXPECTED = {
    sc.CHAT: READ
    | MEMORY
    | TELL
    | {
        "memory_save",
        "schedule_reminder",
        "set_heartbeat_interval",
        "check_mailbox",
        "agent_send_message",
        "agent_list_colleagues",
        "agent_delegate_task",
    },
    sc.TASK_EXECUTION: READ
    | MEMORY
    | TELL
    | {
        "task_create",
        "task_update",
        "task_submit_review",
        "requirement_propose",
        "request_user_approval",
        "memory_save",
        *NOTE,
        "schedule_reminder",
        "agent_list_colleagues",
        "agent_send_message",
        "agent_delegate_task",
        "agent_broadcast_status",
        "agent_create_group_chat",
        "agent_list_group_chats",
        "agent_send_group_message",
    },
    sc.REVIEW: READ | MEMORY | TELL | {"task_update", "request_user_approval", "memory_save", *NOTE},
    sc.COMMENT_RESPONSE: READ
    | MEMORY
    | TELL
    | {
        "task_update",
        "requirement_resubmit",
        "request_user_approval",
        "memory_save",
        *NOTE,
        "schedule_reminder",
    },
    sc.REQUIREMENT_ACTION: READ
    | MEMORY
    | TELL
    | {
        "task_create",
        "task_update",
        "requirement_propose",
        "requirement_resubmit",
        "request_user_approval",
        "memory_save",
        *NOTE,
        "agent_list_colleagues",
        "agent_delegate_task",
    },
    sc.A2A: READ
    | MEMORY
    | TELL
    | {
        "agent_reply",
        "agent_send_message",
        "agent_list_colleagues",
        "agent_create_group_chat",
        "agent_list_group_chats",
        "agent_send_group_message",
        "task_create",
        "task_update",
        "request_user_approval",
        "memory_save",
        *NOTE,
        "schedule_reminder",
    },
    sc.SESSION_RESPONSE: READ | MEMORY | TELL | {"memory_save"},
    sc.MENTION_RESPONSE: READ | MEMORY | TELL | {"memory_save"},
    sc.SYSTEM_NOTICE: READ | MEMORY | TELL | {*NOTE, "agent_send_message", "agent_list_colleagues"},
    sc.CHECK_IN: READ
    | MEMORY
    | TELL
    | {
        "check_mailbox",
        "defer_mailbox_item",
        "drop_mailbox_item",
        "set_heartbeat_interval",
        *NOTE,
        "schedule_reminder",
        "list_reminders",
        "cancel_reminder",
    },
    sc.DAILY_REPORT: READ | MEMORY | {"submit_daily_report"},
    sc.REMINDER_DUE: READ
    | MEMORY
    | TELL
    | {"schedule_reminder", "list_reminders", "cancel_reminder", "memory_save", *NOTE},
    sc.DREAM_CYCLE: MEMORY | {"memory_consolidate", "memory_update_longterm"},
    sc.DELIBERATION: set(DELIBERATION_ALLOWED_TOOLS),
    sc.TRIAGE: set(TRIAGE_ALLOWED_TOOLS),
}


def ours(scenario: str) -> set[str]:
    return {n for n, t in builtin_for(scenario).items() if t.handler.__module__.startswith("markus.tools.")}


def schema_chars(scenario: str) -> int:
    return len(json.dumps([t.schema() for t in builtin_for(scenario).values()]))


def test_every_scenario_has_its_expected_set():
    assert set(EXPECTED) == set(SCENARIOS)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_scenario_is_offered_exactly_the_tools_it_needs(scenario):
    assert ours(scenario) == EXPECTED[scenario]


def test_every_built_in_tool_names_the_scenarios_it_is_offered_in():
    unnamed = [
        n for n, t in load_tools().items() if t.handler.__module__.startswith("markus.tools.") and not t.scenarios
    ]
    assert unnamed == []


@pytest.mark.parametrize("scenario", sorted(BEFORE))
def test_a_chat_and_a_system_notice_are_offered_at_most_half_of_what_they_were(scenario):
    tools, chars = BEFORE[scenario]
    assert len(builtin_for(scenario)) <= tools // 2 + 1, sorted(builtin_for(scenario))
    assert schema_chars(scenario) <= chars // 2, schema_chars(scenario)


def test_deliberation_and_triage_are_offered_exactly_their_read_only_sets():
    assert set(builtin_for(sc.DELIBERATION)) == DELIBERATION_ALLOWED_TOOLS
    assert set(builtin_for(sc.TRIAGE)) == TRIAGE_ALLOWED_TOOLS


def named_tools(text: str) -> set[str]:
    words = set(re.findall(r"[a-z_]+", text))
    return words & set(load_tools())


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_tool_the_scenarios_prompt_names_is_offered_there(scenario):
    text = "\n".join([SCENARIOS[scenario].instructions, *human_guidance(scenario)])
    assert named_tools(text) <= set(builtin_for(scenario)), named_tools(text) - set(builtin_for(scenario))


# The tools the texts of a scenario's items name (besides its prompt), and where they come from.
ITEM_TEXTS = [
    (sc.TASK_EXECUTION, {"task_get", "task_submit_review"}, "markus.work.notices.send_task_execution"),
    (sc.REVIEW, {"task_get", "task_update"}, "markus.work.notices.send_review_request"),
    (sc.COMMENT_RESPONSE, {"task_get", "requirement_get", "task_comment", "requirement_comment"}, "notices._PROTOCOL"),
    (sc.MENTION_RESPONSE, {"task_get", "requirement_get", "task_comment", "requirement_comment"}, "notices._PROTOCOL"),
    (sc.REQUIREMENT_ACTION, {"task_create", "requirement_resubmit"}, "markus.work.requirement_services"),
    (sc.CHECK_IN, {"set_heartbeat_interval"}, "attention.heartbeat._brief"),
    (sc.DAILY_REPORT, {"submit_daily_report"}, "markus.reports.services"),
    (sc.DREAM_CYCLE, {"memory_consolidate"}, "markus.memory.dream"),
    *((s, {"memory_search", "memory_search_longterm"}, "markus.memory.selectors.prompt_block") for s in SCENARIOS),
]


@pytest.mark.parametrize("scenario,tools,source", ITEM_TEXTS, ids=[f"{s}-{src}" for s, _, src in ITEM_TEXTS])
def test_every_tool_an_items_text_names_is_offered_in_its_scenario(scenario, tools, source):
    assert tools <= set(builtin_for(scenario)), source


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_tool_that_names_another_is_offered_with_it(scenario):
    offered = builtin_for(scenario)
    for name, t in offered.items():
        named = named_tools(json.dumps(t.schema()["function"]["description"])) - {name}
        assert named <= set(offered), (scenario, name, named - set(offered))
