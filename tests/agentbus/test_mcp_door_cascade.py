"""The MCP door cancels a task as every door does: with tasks waiting on it, the caller
decides (``cascade``): without a decision the tool refuses and says how many wait and
which; ``cascade: true`` cancels them too, ``false`` the task alone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import Client

from agentbus import mcp_door
from markus.agents.auth import Caller
from markus.core.actors import Actor
from markus.work import services as work_services
from markus.work.models import Task

pytestmark = pytest.mark.django_db(transaction=True)


def as_user(user):
    async def identify(ctx: object) -> Caller:
        return Caller(user, None)

    return identify


def transition(user, **arguments: Any) -> tuple[bool, str]:
    async def scenario() -> tuple[bool, str]:
        async with Client(mcp_door.build(as_user(user))) as mcp:
            result = await mcp.call_tool("task_transition", arguments)
            return bool(result.is_error), "".join(getattr(c, "text", "") for c in result.content)

    return asyncio.run(scenario())


@pytest.fixture
def chain(alice, eve):
    actor = Actor.for_user(alice)
    first = work_services.task_create(actor=actor, title="Parser", assignee_id="eve", start=False)
    then = work_services.task_create(actor=actor, title="Docs", assignee_id="eve", depends_on=[first.id], start=False)
    return first, then


def status(task: Task) -> str:
    return Task.objects.get(id=task.id).status


def test_cancelling_with_dependents_and_no_decision_is_refused_naming_them(alice, chain):
    first, then = chain
    failed, text = transition(alice, task_id=first.id, status="cancelled")
    assert failed and then.id in text and "cascade" in text
    assert status(first) != "cancelled" and status(then) != "cancelled"


def test_cascade_true_cancels_the_waiting_tasks_too(alice, chain):
    first, then = chain
    failed, text = transition(alice, task_id=first.id, status="cancelled", cascade=True)
    assert not failed, text
    assert status(first) == "cancelled" and status(then) == "cancelled"


def test_cascade_false_cancels_the_task_alone(alice, chain):
    first, then = chain
    failed, text = transition(alice, task_id=first.id, status="cancelled", cascade=False)
    assert not failed, text
    assert status(first) == "cancelled" and status(then) != "cancelled"
