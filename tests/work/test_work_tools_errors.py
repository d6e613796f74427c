"""The work tools answer an unknown or invisible task or requirement with a message the
LLM can act on, not the name of an exception."""

from __future__ import annotations

import pytest

from attention.toolbox import ToolContext, execute_tool

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("task_get", {"task_id": "tsk_nope"}, "no task 'tsk_nope' that you can see"),
        ("requirement_get", {"requirement_id": "req_nope"}, "no requirement 'req_nope' that you can see"),
    ],
)
def test_an_unknown_id_is_a_readable_tool_error(ada, tool, args, message):
    ok, text = execute_tool(ToolContext(agent_id=ada.id, agent_name=ada.name, scenario="task_execution"), tool, args)
    assert not ok
    assert message in text
    assert "Http404" not in text
