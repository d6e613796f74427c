"""Tool calls a small model writes into its answer's text instead of making them
(``markus.llm.base``): taken as calls only when the answer is nothing but calls of
offered tools; an answer that opens such a call and cannot be read is named, so the loop
does not send it to a person. The end-to-end cases are in
``tests/attention/test_model_contract.py``."""

from __future__ import annotations

import pytest

from markus.llm.base import bare_tool_calls, fenced_tool_calls, written_call

OFFERED = {"check_mailbox", "notify_user"}


def test_an_answer_of_json_calls_one_after_the_other_is_those_calls():
    text = ' {"name": "check_mailbox", "arguments": {}}\n{"name": "notify_user", "parameters": {"title": "x"}}\n'
    calls = bare_tool_calls(text, OFFERED, prefix="t")
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("t_0", "check_mailbox", {}),
        ("t_1", "notify_user", {"title": "x"}),
    ]


def test_a_call_with_its_arguments_beside_its_name_is_that_call_bare_or_in_a_fence():
    """The real small model wrote ``{"name": "request_user_approval", "options": …}``."""
    text = '{"name": "notify_user", "title": "x", "body": "y"}'
    for calls in (
        bare_tool_calls(text, OFFERED, prefix="t"),
        fenced_tool_calls(f"```json\n{text}\n```", OFFERED, prefix="t")[0],
    ):
        assert [(c.name, c.arguments) for c in calls] == [("notify_user", {"title": "x", "body": "y"})]


@pytest.mark.parametrize(
    "text",
    [
        'Here it is: {"name": "check_mailbox", "arguments": {}}',  # words besides the call
        '{"name": "check_mailbox", "arguments": {}} done',
        '{"name": "write_poem", "arguments": {}}',  # not offered
        '{"name": "check_mailbox"}',  # no arguments: an object a person may have asked for
        '{"name": "check_mailbox", "arguments": "all"}',
        '[{"name": "check_mailbox", "arguments": {}}]',
        "",
    ],
)
def test_anything_else_is_no_call(text):
    assert bare_tool_calls(text, OFFERED, prefix="t") == []


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "notify_user", "arguments": {"title": "Release"',  # its last braces left off
        '  {"name":"notify_user","parameters":{',
        '```json\n{"name": "notify_user", "arguments": {"title": "x"}\n```',  # a brace short in a fence
        '<tool_call>\n{"name": "notify_user", "arguments": {',
        '{"name": "notify_user", "title": "Release", "body": "Friday is',  # its arguments beside its name
    ],
)
def test_an_answer_that_opens_a_call_of_an_offered_tool_is_named(text):
    assert written_call(text, OFFERED) == "notify_user"
    assert fenced_tool_calls(text, OFFERED, prefix="t")[0] == [] and bare_tool_calls(text, OFFERED, prefix="t") == []


@pytest.mark.parametrize(
    "text",
    [
        'The call would be {"name": "notify_user", "arguments": {}}',
        '{"name": "Ada", "role": "engineer"}',  # beside its name, but no tool here
        '{"name": "check_mailbox"}',  # a name alone
    ],
)
def test_other_answers_open_no_call(text):
    assert written_call(text, OFFERED) is None


def test_an_answer_that_opens_a_call_of_a_tool_not_offered_is_named_too():
    """Not read as a call (only offered tools are), and no answer either."""
    text = '```json\n{"name": "claude", "arguments": {"files": ["README.md"]}}\n```'
    assert written_call(text, OFFERED) == "claude" and fenced_tool_calls(text, OFFERED, prefix="t")[0] == []
