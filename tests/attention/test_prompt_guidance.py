"""The scenarios' prompts say which human-facing tool fits which need (seed section
13.3), naming only tools the scenario is offered; and the comment-response scenario
carries the context-first protocol (seed section 3.5), also in the prompt the loop
really sends for a comment."""

from __future__ import annotations

import pytest

from attention import loop
from attention.scenarios import (
    ASKING_SCENARIOS,
    CHAT,
    COMMENT_RESPONSE,
    DAILY_REPORT,
    DREAM_CYCLE,
    HUMAN_GUIDANCE_SCENARIOS,
    SCENARIOS,
    TASK_EXECUTION,
    TRIAGE,
    scenario_for,
    system_prompt,
)
from attention.toolbox import schemas_for
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from markus.work.models import Task, TaskState

pytestmark = pytest.mark.django_db


def offered(scenario: str) -> set[str]:
    return {s.get("name") or s.get("function", {}).get("name") for s in schemas_for(scenario)}


def guidance(agent, scenario: str) -> str:
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "x"})
    prompt = system_prompt(agent, item, scenario)
    if "## Talking to people" not in prompt:
        return ""
    return prompt.split("## Talking to people")[1].split("\n## ")[0]


# One row per line of the seed's table: the need, and the words the prompt must use for it.
SEED_TABLE = [
    ("status report, progress update, FYI alert", ["status report", "progress update", "FYI alert", "notify_user"]),
    ("task completed notification", ["task you finished: notify_user with related_task_id"]),
    ("approve/reject", ["approve or reject something: request_user_approval", "Approve and Reject"]),
    ("choose between approaches", ["choose between approaches: request_user_approval with your own options"]),
    ("freeform input", ["own words: request_user_approval with allow_freeform true"]),
    ("discuss interactively", ["discuss something with a person interactively: mention them (@name)", "task_comment"]),
    ("past execution details", ["recall_activity", "with an activity id, its logs"]),
]


@pytest.mark.parametrize("need,words", SEED_TABLE, ids=[row[0] for row in SEED_TABLE])
def test_a_working_scenario_prompt_names_the_tool_for_each_need_of_the_seed_table(agent, need, words):
    text = guidance(agent, TASK_EXECUTION)
    for w in words:
        assert w in text, (need, w)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_the_guidance_names_only_tools_the_scenario_is_offered(agent, scenario):
    text = guidance(agent, scenario)
    if scenario not in HUMAN_GUIDANCE_SCENARIOS:
        assert text == ""
        return
    tools = offered(scenario)
    for name in ("notify_user", "task_comment", "requirement_comment", "recall_activity"):
        assert name in text and name in tools, (scenario, name)
    assert ("request_user_approval" in text) == ("request_user_approval" in tools), scenario


def test_the_scenarios_that_may_ask_are_exactly_those_offered_request_user_approval():
    asking = {s for s in SCENARIOS if "request_user_approval" in offered(s)}
    assert asking == set(ASKING_SCENARIOS)


def test_in_a_chat_the_agent_asks_in_its_answer_and_follows_up_a_notification_with_its_context(agent):
    text = guidance(agent, CHAT)
    assert "ask them what you need to know in your answer" in text
    assert "request_user_approval" not in text  # a person waits on a chat: nothing is parked
    instructions = SCENARIOS[CHAT].instructions
    assert "reply to a notification you sent" in instructions and "recall_activity" in instructions


@pytest.mark.parametrize("scenario", [TRIAGE, DREAM_CYCLE, DAILY_REPORT])
def test_the_scenarios_that_reach_no_person_carry_no_guidance(agent, scenario):
    assert guidance(agent, scenario) == ""


# ------------------------------------------------------------ comment-response protocol


def test_the_comment_response_prompt_carries_the_mandatory_context_first_protocol_in_order():
    text = SCENARIOS[COMMENT_RESPONSE].instructions
    assert "MANDATORY before you reply" in text
    steps = [
        "1. fetch the full item (task_get / requirement_get)",
        "2. read ALL previous comments",
        "3. identify the commenter's intent",
        "4. check related context",
    ]
    positions = [text.index(s) for s in steps]
    assert positions == sorted(positions)
    # Batch awareness: bundled comments, one consolidated reply, reply_to_comment_id.
    assert "separated by ---" in text and "one consolidated reply" in text and "reply_to_comment_id" in text


def test_both_kinds_of_comment_run_the_comment_response_scenario(agent):
    for kind in (T.TASK_COMMENT, T.REQUIREMENT_COMMENT):
        item = mailbox_enqueue(agent_id=agent.id, source_type=kind, payload={"summary": f"{kind} on something"})
        assert scenario_for(item) == COMMENT_RESPONSE


def test_the_loop_sends_the_protocol_for_a_comment_on_a_task_not_in_progress(agent):
    task = Task.objects.create(title="Old work", assignee=agent, status=TaskState.COMPLETED)
    provider = ScriptedProvider([Turn(text="Answered on the task")])
    set_provider_override(provider)
    try:
        mailbox_enqueue(
            agent_id=agent.id,
            source_type=T.TASK_COMMENT,
            payload={"summary": "bob: why was it closed?", "content": "why was it closed?", "taskId": task.id},
        )
        loop.run_attention(agent.id)
    finally:
        set_provider_override(None)
    systems = [c["system"] for c in provider.calls]
    assert any("MANDATORY before you reply: 1. fetch the full item" in s for s in systems), systems
