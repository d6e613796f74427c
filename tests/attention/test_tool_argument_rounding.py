"""An LLM sends whole numbers as decimals now and then (``priority: 1.7``): every integer
argument of every tool's schema is rounded to the nearest whole number, in one place
(``attention.toolbox.arguments_of``), before the tool sees it; a value outside the
schema's range is refused with the range in the error."""

from __future__ import annotations

import json

import pytest

from attention.scenarios import CHECK_IN
from attention.toolbox import Tool, ToolContext, ToolError, arguments_of, execute_tool, load_tools
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent

pytestmark = pytest.mark.django_db


def _queued(agent: Agent) -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "build", "content": "build"}
    )


def _prioritize(agent: Agent, item: MailboxItem, priority: object) -> tuple[bool, dict]:
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario="system_notice")
    # Offered in the deliberation only; called directly here through the same door.
    ctx.offered = {"prioritize_mailbox_item": load_tools()["prioritize_mailbox_item"]}
    ok, result = execute_tool(ctx, "prioritize_mailbox_item", {"item_id": item.id, "priority": priority})
    return ok, json.loads(result)


@pytest.mark.parametrize(("sent", "stored"), [(1.7, 2), (0.2, 0), (2.5, 3), (3.0, 3), (3.49, 3)])
def test_a_decimal_priority_is_rounded_to_the_nearest_whole_number(agent, sent, stored):
    item = _queued(agent)
    ok, result = _prioritize(agent, item, sent)
    assert ok, result
    assert result["priority"] == stored
    item.refresh_from_db()
    assert item.priority == stored


@pytest.mark.parametrize("sent", [5, 4.6, -1, -0.6, 17.2])
def test_a_priority_outside_the_range_is_refused_with_the_range(agent, sent):
    item = _queued(agent)
    ok, result = _prioritize(agent, item, sent)
    assert not ok
    assert "from 0 to 4" in result["error"]
    item.refresh_from_db()
    assert item.priority == 1  # the system event's default, untouched


@pytest.mark.parametrize("sent", ["2", True, float("nan"), float("inf")])
def test_what_is_not_a_number_is_still_refused(agent, sent):
    item = _queued(agent)
    ok, result = _prioritize(agent, item, sent)
    assert not ok and "priority" in result["error"]


def test_every_integer_argument_is_rounded_the_same_way(agent):
    """Not a rule of one tool: another tool's integer (the heartbeat interval) is rounded too."""
    ctx = ToolContext(agent_id=agent.id, agent_name=agent.name, scenario=CHECK_IN)
    ok, result = execute_tool(ctx, "set_heartbeat_interval", {"minutes": 89.6})
    assert ok, result
    assert json.loads(result)["intervalMinutes"] == 90


def test_integers_inside_arrays_and_objects_are_rounded():
    schema = {
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": "integer"}},
            "entry": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 9}}},
            "ratio": {"type": "number"},
        },
    }
    t = Tool("shape", "test", schema, lambda ctx, args: args)
    args = arguments_of(t, {"ids": [1.2, 2.8], "entry": {"n": 4.5}, "ratio": 0.25})
    assert args == {"ids": [1, 3], "entry": {"n": 5}, "ratio": 0.25}
    assert all(type(v) is int for v in [*args["ids"], args["entry"]["n"]])
    with pytest.raises(ToolError, match="from 1 to 9"):
        arguments_of(t, {"entry": {"n": 9.7}})
