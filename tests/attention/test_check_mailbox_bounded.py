"""check_mailbox answers a page of the queue, not the whole of it: a deep queue must
not land whole in the LLM's context. The depth is the true count; ``limit`` and
``offset`` page through the rest, in the order the agent would take them."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from attention.scenarios import CHAT
from attention.toolbox import ToolContext, execute_tool
from mailbox.services import mailbox_enqueue

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def check(agent, **args):
    ok, result = execute_tool(ToolContext(agent_id=agent.id, agent_name="Ada", scenario=CHAT), "check_mailbox", args)
    return ok, json.loads(result)


def test_a_deep_queue_answers_a_page_with_the_true_depth(agent):
    for n in range(120):
        mailbox_enqueue(agent_id=agent.id, source_type="system_event", payload={"summary": f"notice {n}"})
    ok, first = check(agent)
    assert ok and first["queueDepth"] == 120 and len(first["items"]) == 50
    assert first["items"][0]["summary"] == "notice 0" and first["more"] == 70
    ok, last = check(agent, offset=100, limit=50)
    assert ok and [i["summary"] for i in last["items"]] == [f"notice {n}" for n in range(100, 120)]
    assert last["more"] == 0
    with CaptureQueriesContext(connection) as q:
        check(agent, limit=200)
    assert len(q.captured_queries) <= 2


@pytest.mark.parametrize("args", [{"limit": 0}, {"limit": 201}, {"offset": -1}, {"limit": "ten"}])
def test_a_bad_page_is_a_tool_error(agent, args):
    ok, answer = check(agent, **args)
    assert not ok and "check_mailbox" in answer["error"]
