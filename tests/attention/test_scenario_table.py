"""The scenario is the loop's table and a run's end is a closed type: every scenario row
names an ending that the endings settle, every way a run ends is an arm of settle's one
``match`` (which ends in ``assert_never``), and a new scenario is a row: the loop runs
it, with its instructions, its ending and its completion, with nothing else changed."""

from __future__ import annotations

import ast
import inspect
import textwrap
import typing

import pytest

from attention import endings, loop, scenarios, settle
from attention.focus import Outcome
from attention.loop import RunStatus
from attention.models import AgentActivity
from attention.scenarios import SCENARIOS, Ending, Scenario
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from markus.agents.services import main_session
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn

OUTCOMES = typing.get_args(Outcome)


def test_every_scenario_row_has_an_ending_the_endings_settle():
    assert SCENARIOS, "the table has rows"
    for name, row in SCENARIOS.items():
        assert row.name == name
        assert isinstance(row.ending, Ending), name
    # Every ending is an arm of the endings' matches (assert_never raises for one that is not).
    for ending in Ending:
        endings.verdict(ending)
    verdicts = {e: endings.verdict(e) for e in Ending}
    assert {e for e, v in verdicts.items() if v is not None} == {Ending.EXECUTION_VERDICT, Ending.REVIEW_VERDICT}
    assert verdicts[Ending.EXECUTION_VERDICT].mark == "executionRetries"
    assert verdicts[Ending.REVIEW_VERDICT].mark == "reviewRetries"


def _cases(function) -> list[ast.match_case]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    [match] = [node for node in ast.walk(tree) if isinstance(node, ast.Match)]
    return match.cases


def _names(pattern: ast.pattern) -> set[str]:
    return {n.id for n in ast.walk(pattern) if isinstance(n, ast.Name)}


def test_every_way_a_run_ends_is_one_frozen_class_settled_by_one_match():
    kinds = [cls.kind for cls in OUTCOMES]
    assert sorted(kinds) == sorted(
        ["completed", "preempted", "cancelled", "stopped", "retry", "failed", "parked", "awaiting_reply", "skipped"]
    )
    for cls in OUTCOMES:
        assert cls.__dataclass_params__.frozen, cls
    cases = _cases(settle._settle)
    settled = set().union(*(_names(c.pattern) for c in cases))
    assert settled == {cls.__name__ for cls in OUTCOMES}
    last = cases[-1]
    assert isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None  # case _:
    assert "assert_never" in ast.unparse(last.body[0])
    # A batch that does not end together is dissolved by one arm, not one per outcome.
    guarded = [c for c in cases if c.guard is not None]
    assert len(guarded) == 1 and "focus.batch" in ast.unparse(guarded[0].guard)


def test_the_outcome_line_says_what_the_string_kinds_said():
    from attention.focus import AwaitingReply, Completed, Parked, Retry

    assert (Completed("hi").kind, Completed("hi").detail) == ("completed", "")
    assert (Parked("apr_1").kind, Parked("apr_1").detail) == ("parked", "apr_1")
    assert Retry("an empty answer").detail == "an empty answer"
    assert AwaitingReply({"to": {"name": "Bo"}}).detail == '{"to": {"name": "Bo"}}'


@pytest.mark.django_db
def test_a_run_status_is_an_enum_with_the_same_strings(agent):
    result = loop.run_attention(agent.id)
    assert result.status is RunStatus.DONE
    assert result.status == "done" and str(result.status) == "done"
    assert {s.value for s in RunStatus} == {"inactive", "busy", "done", "budget", "stopped", "stale", "blocked"}


STANDUP = "standup"


@pytest.fixture
def standup(monkeypatch):
    """A new scenario: one row, and the item type it runs for."""
    row = Scenario(
        STANDUP,
        "Stand-up: say in one line what you do next.",
        done="stood up",
        batches=False,
        reaches_people=False,
    )
    monkeypatch.setitem(SCENARIOS, STANDUP, row)
    monkeypatch.setitem(scenarios._BY_TYPE, T.REMINDER, STANDUP)
    return row


@pytest.mark.django_db
def test_a_new_scenario_is_a_row_the_loop_runs(agent, standup):
    provider = ScriptedProvider([Turn(text="Next: the deploy.")])
    set_provider_override(provider)
    try:
        item = mailbox_enqueue(agent_id=agent.id, source_type=T.REMINDER, payload={"summary": "Stand-up time"})
        result = loop.run_attention(agent.id)
    finally:
        set_provider_override(None)
    assert result.status == RunStatus.DONE and result.items == [item.id]
    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED
    call = provider.calls[0]
    assert call["scenario"] == STANDUP
    assert standup.instructions in call["system"] and "## Talking to people" not in call["system"]
    activity = AgentActivity.objects.get(mailbox_item_id=item.id)
    assert activity.success
    line = ChatMessage.objects.get(session=main_session(agent.id), metadata__activityLog=True)
    assert line.content.endswith("→ stood up")
