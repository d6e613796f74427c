"""The model is an unreliable peer (ARCHITECTURE decision 18): whatever a model does
(slow, cut short, endless, repeating a refused call, inventing tools, hiding a call in
its text, answering nothing), an item ends bounded in calls, tokens and time, and the
person who asked is told why. Each behaviour is played by a local OpenAI-compatible
server (``tests/llm/misbehaving_model.py``) through the real ``openai`` SDK."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from attention import loop
from attention.model_call import max_tokens_for
from attention.models import ToolCallRecord
from attention.session_messages import NOTE_MARK
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from markus.agents.services import main_session
from markus.llm.base import CONTEXT_MARK
from markus.memory.models import Observation
from markus.usage.models import LLMCall
from notifications.models import Approval, UserNotification
from notifications.services import approval_respond
from tests.llm.misbehaving_model import (
    Behaviour,
    MisbehavingModel,
    answer,
    call,
    calls,
    cut,
    delay_first_byte,
    empty,
    fenced_call,
    ramble,
    refuse,
    whole,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def own_settings(settings):
    """A copy of MARKUS for the test: what it changes in it is gone after it."""
    settings.MARKUS = dict(settings.MARKUS)


# Tries of one call (MARKUS_LLM_RETRIES + 1) × attempts of one item (MAX_MARKER_RETRIES + 1).
TRIES, ATTEMPTS = 3, 3


@pytest.fixture
def model(settings, monkeypatch):
    """``model(script)``: the misbehaving server, the settings pointing at it."""
    servers: list[MisbehavingModel] = []

    def serve(script: Any) -> MisbehavingModel:
        server = MisbehavingModel(script).__enter__()
        servers.append(server)
        for key, value in {
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": server.url,
            "LLM_API_KEY": "sk-test",
            "LLM_MODEL": "misbehaving",
            "LLM_RETRIES": TRIES - 1,
            "TRIAGE": False,
            "INTERRUPT_JUDGE": False,
        }.items():
            monkeypatch.setitem(settings.MARKUS, key, value)
        return server

    yield serve
    for server in servers:
        server.__exit__(None, None, None)


def chat(agent_id: str, text: str = "Remind me about the release") -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent_id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": text, "content": text},
        metadata={"senderId": "1", "senderRole": "user"},
    )


def settle(agent_id: str, item: MailboxItem) -> MailboxItem:
    """Run the loop until the item has ended (its retries included)."""
    for _ in range(ATTEMPTS * 2):
        loop.run_attention(agent_id)
        item.refresh_from_db()
        if item.status not in (Status.QUEUED, Status.PROCESSING, Status.DEFERRED):
            return item
    raise AssertionError(f"{item.id} did not end: {item.status}")


def told(agent_id: str) -> list[ChatMessage]:
    return list(ChatMessage.objects.filter(role="assistant", session__agent_id=agent_id).order_by("created_at"))


def refusable(body: dict[str, Any]) -> str:
    """A tool the request offers that needs an argument: called without it, it is refused."""
    return next(t["function"]["name"] for t in body["tools"] if t["function"]["parameters"].get("required"))


def test_a_model_slower_than_the_timeout_is_tried_a_bounded_number_of_times_and_the_person_told(agent, model, settings):
    settings.MARKUS["LLM_TIMEOUT_S"] = 0.3
    server = model(delay_first_byte(2, answer("too late")))
    item = settle(agent.id, chat(agent.id))
    assert server.calls == TRIES * ATTEMPTS
    [reply] = told(agent.id)
    assert reply.metadata["failed"] is True
    assert f"{ATTEMPTS} attempts failed (provider error: timed out (MARKUS_LLM_TIMEOUT_S)" in reply.content
    assert item.status == Status.COMPLETED
    # Every try that timed out is on the record, with the prompt tokens its request carried.
    failed = list(LLMCall.objects.filter(mailbox_item_id=item.id))
    assert len(failed) == TRIES * ATTEMPTS
    assert all(c.error.startswith("timed out") and c.estimated and c.input_tokens > 100 for c in failed)


def test_a_stream_cut_short_is_a_provider_error_tried_again_not_an_empty_answer(agent, model):
    server = model([cut(3, answer("I will remind you about the release tomorrow.")), answer("Noted: the release.")])
    item = settle(agent.id, chat(agent.id))
    assert server.calls == 2  # the cut call and its one retry, within the same attempt
    [reply] = told(agent.id)
    assert reply.content == "Noted: the release." and not reply.metadata.get("failed")
    first, second = LLMCall.objects.filter(mailbox_item_id=item.id).order_by("id")
    assert "cut short" in first.error and first.estimated and first.input_tokens > 0
    assert second.error == "" and not second.estimated


def test_each_distinct_error_of_the_attempts_is_named_in_the_give_up_answer(agent, model, settings):
    settings.MARKUS["LLM_TIMEOUT_S"] = 0.3
    # Attempt by attempt: a cut stream, then a server too slow, then empty answers.
    script: list[Behaviour] = [cut(2, answer("x"))] * TRIES + [delay_first_byte(2, answer("x"))] * TRIES + [empty()]
    model(script)
    settle(agent.id, chat(agent.id))
    [reply] = told(agent.id)
    assert "cut short" in reply.content and "timed out" in reply.content and "an empty answer" in reply.content


def test_a_rambling_model_is_stopped_at_the_scenarios_max_tokens_and_the_answer_says_it_was_cut(agent, model):
    server = model(ramble("and so on "))
    settle(agent.id, chat(agent.id))
    assert server.calls == 1
    assert server.requests[0].body["max_tokens"] == max_tokens_for("chat")
    [reply] = told(agent.id)
    assert reply.content.startswith("and so on and so on")
    assert reply.content.endswith("(This answer was cut short: it reached its length limit.)")


# The real small model, once its answer began to loop, wrote the same line to its
# max_tokens (2,048 tokens in 274 s, the line a call written as text).
LOOPED_LINE = "The last commit teaches the parser about tabs, in two files.\n"


def test_an_answer_that_repeats_its_line_is_stopped_at_the_third_copy_and_kept_once(agent, model):
    server = model(answer(LOOPED_LINE * 200, chunk_delay=0.005))
    settle(agent.id, chat(agent.id))
    assert server.calls == 1 and server.disconnects == 1  # the client left mid-answer, not at its end
    [reply] = told(agent.id)
    assert reply.content == LOOPED_LINE.strip() + "\n\n(This answer was cut short: it repeated itself.)"
    [spent] = LLMCall.objects.filter(agent_id=agent.id)
    assert spent.input_tokens > 0 and spent.estimated  # no count came: estimated
    # Counted from all the model wrote before the loop was seen (three copies at least), not
    # from the one copy kept: the budgets count what the provider charges.
    assert spent.output_tokens >= 3 * len(LOOPED_LINE) // 4


def test_a_call_written_as_text_over_and_over_is_made_once(agent, model):
    line = json.dumps({"name": "notify_user", "arguments": {"title": "Release", "body": "Friday"}}) + "\n"
    server = model([answer(line * 100, chunk_delay=0.005), answer("Told.")])
    settle(agent.id, chat(agent.id))
    assert server.calls == 2 and server.disconnects == 1
    assert UserNotification.objects.filter(title="Release", body="Friday").count() == 1
    assert told(agent.id)[-1].content == "Told."


def test_the_same_refused_call_is_named_on_its_second_refusal_and_ends_the_attempt_on_its_third(agent, model):
    server = model(lambda body, n: call(refusable(body), {}))
    item = settle(agent.id, chat(agent.id))
    # Three identical refused calls end an attempt: three attempts, nine calls in all.
    assert server.calls == 3 * ATTEMPTS
    results = [m["content"] for m in server.requests[2].body["messages"] if m["role"] == "tool"]
    assert "exactly this call" not in results[0] and "exactly this call" in results[1]  # the second says so
    [reply] = told(agent.id)
    assert f"{ATTEMPTS} attempts failed (no progress: the same refused call" in reply.content
    # A retry starts from what the failed attempt did and why it failed, not from zero.
    retry_opening = [m["content"] for m in server.requests[3].body["messages"] if m["role"] == "user"]
    assert any("Attempt 1 failed: no progress" in m and "it called" in m for m in retry_opening)
    assert item.status == Status.COMPLETED


def test_the_same_call_answered_the_same_again_is_named_on_its_second_time_and_ends_the_attempt_on_its_third(
    agent, model
):
    """A real small model asked which tasks were in review called task_list with the same
    arguments eight times in a row, each answered the same, until it answered nothing: a
    read that gives nothing new is no progress either, told on the second, stopped on the
    third, as a refused call is."""
    server = model(lambda body, n: call("task_list", {"status": "review"}))
    item = settle(agent.id, chat(agent.id, "Which tasks are in review?"))
    assert server.calls == 3 * ATTEMPTS
    results = [m["content"] for m in server.requests[2].body["messages"] if m["role"] == "tool"]
    assert results[0].startswith('{"tasks": ') and "exactly this call" not in results[0]
    assert results[1].startswith(results[0]) and "answered exactly the same" in results[1]  # the second says so
    [reply] = told(agent.id)
    assert (
        f"{ATTEMPTS} attempts failed (no progress: the same call task_list answered the same 3 times" in reply.content
    )
    assert item.status == Status.COMPLETED


def test_an_invented_tool_called_with_other_arguments_each_time_ends_the_attempt_on_its_third_call(agent, model):
    """A tool that does not exist is refused whatever its arguments: a small model that
    keeps calling one (a task's title as a tool name, a new text each time) is the same
    refused call, told so on the second and stopped on the third, not run to the ceiling."""
    server = model(lambda body, n: call("write_haiku_about_queues", {"text": f"try {n}"}))
    item = settle(agent.id, chat(agent.id))
    assert server.calls == 3 * ATTEMPTS
    results = [m["content"] for m in server.requests[2].body["messages"] if m["role"] == "tool"]
    assert "does not exist" in results[0] and "calling it again" not in results[0]
    assert "calling it again" in results[1]  # the second says so
    [reply] = told(agent.id)
    assert f"{ATTEMPTS} attempts failed (no progress: the same refused call write_haiku_about_queues" in reply.content
    assert item.status == Status.COMPLETED


def test_an_invented_tool_is_refused_with_the_tools_it_may_call_closest_first(agent, model):
    server = model([call("remind_me_later", {"when": "2h"}), answer("I could not set a reminder.")])
    settle(agent.id, chat(agent.id))
    result = next(m for m in server.requests[1].body["messages"] if m["role"] == "tool")
    error = json.loads(result["content"])["error"]
    offered = [t["function"]["name"] for t in server.requests[0].body["tools"]]
    listed = error.split("Tools you may call: ")[1].rstrip(".").split(", ")
    assert "unknown tool 'remind_me_later'" in error
    assert set(listed) <= set(offered) and len(listed) == len(offered)
    assert listed[0] == "schedule_reminder"  # the closest name first


def test_an_invented_tool_no_tool_is_near_is_refused_saying_how_to_answer_instead(agent, model):
    """The real small model, asked by the outside agent claude, called a tool named
    "claude" with its answer as the arguments (and before, a tool named after a task's
    title): it meant to answer. The refusal says how an answer is given."""
    server = model([call("claude", {"files": ["a.txt"]}), answer("a.txt")])
    settle(agent.id, chat(agent.id))
    result = next(m for m in server.requests[1].body["messages"] if m["role"] == "tool")
    error = json.loads(result["content"])["error"]
    assert "unknown tool 'claude': it does not exist here. If you meant to answer, write the answer" in error
    assert "Did you mean" not in error


def test_a_call_named_after_the_last_refusal_is_the_same_refused_call_each_time(agent, model):
    """The real small model called a tool whose name was the refusal it had just been
    given ("unknown tool 'heartbeat': it does not exist here. …"), a new name each time:
    each such call is the one same refused call, ended on its third."""

    def echo(body: dict[str, Any], n: int) -> Any:
        results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
        said = json.loads(results[-1].split("\n[note]")[0])["error"] if results else ""  # the note after it
        return call(said[:200] or "heartbeat", {})

    server = model(echo)
    settle(agent.id, chat(agent.id))
    assert server.calls == 3 * ATTEMPTS
    [reply] = told(agent.id)
    assert f"{ATTEMPTS} attempts failed (no progress: the same refused call heartbeat 3 times" in reply.content


@pytest.mark.parametrize("name", ["tool_response", "agent_response", "function_result"])
def test_a_call_named_as_a_result_is_refused_saying_a_result_is_read_not_called(agent, model, name):
    """The real small model answered a tool's error by calling ``tool_response`` with that
    error as its arguments, then ``agent_response``: a tool's result is no tool. "Did you
    mean tool_search?" sent it further astray."""
    server = model([call(name, {"error": "options must be objects"}), answer("Done.")])
    settle(agent.id, chat(agent.id))
    result = next(m for m in server.requests[1].body["messages"] if m["role"] == "tool")
    error = json.loads(result["content"])["error"]
    assert f"unknown tool {name!r}: it does not exist here. A tool's result is not a tool to call:" in error
    assert "Did you mean" not in error


def test_a_tool_call_written_in_a_code_fence_is_made_as_the_call_the_model_meant(agent, model):
    server = model([fenced_call("check_mailbox", {}), answer("Nothing waits.")])
    settle(agent.id, chat(agent.id))
    assert server.calls == 2
    made = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert len(made) == 1 and "queueDepth" in made[0]["content"]
    [reply] = told(agent.id)
    assert reply.content == "Nothing waits."


def test_tool_calls_written_as_bare_json_are_made_as_the_calls_the_model_meant(agent, model):
    """A small model served without a tool-call parser writes its calls as JSON objects,
    one per line, with no fence or tag: that text was the person's reply."""
    written = '{"name": "check_mailbox", "arguments": {}}\n{"name": "recall_activity", "arguments": {"limit": 2}}'
    server = model([answer(written), answer("Nothing waits.")])
    settle(agent.id, chat(agent.id))
    assert server.calls == 2
    made = [m for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert len(made) == 2 and "queueDepth" in made[0]["content"] and "activities" in made[1]["content"]
    [reply] = told(agent.id)
    assert reply.content == "Nothing waits."


@pytest.mark.parametrize(
    "written",
    [
        '{"name": "notify_user", "arguments": {"title": "Release", "body": "Friday"}',
        # On a task: read as the run's final answer, the model heard only that its run
        # ended without a verdict, and wrote the same again until the retries ran out.
        '{"name": "notify_user", "title": "Release", "body": "Friday is the day',
    ],
    ids=["arguments", "arguments beside its name"],
)
def test_a_call_written_as_text_that_cannot_be_read_is_no_answer_and_the_person_told(agent, model, written):
    """A real small model wrote a call as text and left off its last brace, or (on a task)
    wrote its arguments beside the name and left its last string open: the broken call was
    the answer (in a chat, the person's reply)."""
    server = model(answer(written))
    settle(agent.id, chat(agent.id))
    assert server.calls == ATTEMPTS
    [reply] = told(agent.id)
    assert reply.metadata["failed"] and '"name"' not in reply.content
    assert "(the answer was a call of notify_user written as text that could not be read as a call)" in reply.content
    assert not UserNotification.objects.filter(title="Release").exists()


@pytest.mark.parametrize(
    "written",
    [
        '```json\n{"name": "notify_user", "title": "Release", "body": "Friday"}\n```',
        '{"name": "notify_user", "title": "Release", "body": "Friday"}',
    ],
)
def test_a_whole_call_with_its_arguments_beside_its_name_is_made_as_the_call_the_model_meant(agent, model, written):
    """Before, the keys beside the name were dropped (in a fence: a call with no
    arguments, refused until the run made no progress) or the text was the answer."""
    server = model([answer(written), answer("Told.")])
    settle(agent.id, chat(agent.id))
    assert server.calls == 2
    assert UserNotification.objects.filter(title="Release", body="Friday").count() == 1
    notice, reply = told(agent.id)  # notify_user writes to the person's chat too
    assert "**Release**" in notice.content and reply.content == "Told."


def test_a_json_answer_with_a_name_that_is_no_tool_is_an_answer(agent, model):
    """Only a tool offered here makes a flat object a call written as text: an answer
    in JSON whose "name" is anything else is the answer."""
    written = '{"name": "Ada", "role": "engineer"}'
    server = model(answer(written))
    settle(agent.id, chat(agent.id))
    assert server.calls == 1
    [reply] = told(agent.id)
    assert reply.content == written and not reply.metadata.get("failed")


@pytest.mark.parametrize(
    "written",
    [
        '```json\n{"name": "claude", "arguments": {"files": ["README.md"]}}\n```',  # whole, in a fence
        '{"name": "claude", "arguments": {"files": ["README.md", "README.md", "READ',  # cut at its limit
    ],
)
def test_a_call_of_no_tool_here_written_as_text_is_no_answer_and_the_person_told(agent, model, written):
    """The real small model, asked by the outside agent claude which files the repository
    holds, wrote a call of a tool named "claude" as text (cut at its length limit): no
    tool of that name is offered, so it was not read as a call, and it was claude's reply."""
    server = model(answer(written))
    settle(agent.id, chat(agent.id))
    assert server.calls == ATTEMPTS
    [reply] = told(agent.id)
    assert reply.metadata["failed"] and '"name"' not in reply.content
    assert "(the answer was a call of claude, which is no tool here, written as text)" in reply.content


def test_an_empty_answer_is_retried_a_bounded_number_of_times_and_the_person_told(agent, model):
    server = model(empty())
    settle(agent.id, chat(agent.id))
    assert server.calls == ATTEMPTS
    [reply] = told(agent.id)
    assert reply.metadata["failed"] and f"{ATTEMPTS} attempts failed (an empty answer)" in reply.content


@pytest.mark.parametrize("nothing", ["[]", "{}", "null", '""', "```json\n[]\n```", "[ ]"])
def test_an_answer_of_only_an_empty_json_value_is_an_empty_answer(agent, model, nothing):
    """The real small model answered an agent's bus request with "[]": nothing said, in
    JSON's words. It was sent back as the answer; it is an empty answer, asked again."""
    server = model(lambda body, n: answer(nothing))
    settle(agent.id, chat(agent.id))
    assert server.calls == ATTEMPTS
    [reply] = told(agent.id)
    assert reply.metadata["failed"] and f"{ATTEMPTS} attempts failed (an empty answer" in reply.content


def test_an_empty_json_value_asked_for_in_json_is_the_answer(agent, model):
    """Whoever asked for JSON may be told "[]": nothing of it there is, in the words it
    asked for."""
    server = model(lambda body, n: answer("[]"))
    settle(agent.id, chat(agent.id, "List the open tasks' ids as a JSON array, nothing else."))
    assert server.calls == 1
    [reply] = told(agent.id)
    assert reply.content == "[]" and not reply.metadata.get("failed")


def context_note(body: dict[str, Any]) -> str:
    """The loop's latest context note in a request, as it was sent."""
    contents = [str(m.get("content") or "") for m in body["messages"]]
    return next(c[c.index(CONTEXT_MARK) :] for c in reversed(contents) if CONTEXT_MARK in c)


def test_an_answer_that_only_repeats_the_loops_context_note_is_no_answer_and_the_person_told(agent, model):
    """A small model answered a person with the loop's note it was given ("[context now; …]
    Now: … ## Mailbox (0 waiting)"): that was the person's reply."""
    server = model(lambda body, n: answer(context_note(body)))
    settle(agent.id, chat(agent.id))
    assert server.calls == ATTEMPTS
    [reply] = told(agent.id)
    assert reply.metadata["failed"] and CONTEXT_MARK not in reply.content
    assert f"{ATTEMPTS} attempts failed (the answer only repeated the loop's context note)" in reply.content


def test_the_loops_context_note_repeated_around_an_answer_is_left_out_of_it(agent, model):
    model(lambda body, n: answer(f"{context_note(body)}\n\nThe release is on Friday.\n{context_note(body)}"))
    settle(agent.id, chat(agent.id))
    [reply] = told(agent.id)
    assert reply.content == "The release is on Friday." and not reply.metadata.get("failed")


def test_an_answer_that_only_repeats_a_note_of_the_loops_is_no_answer_and_the_person_told(agent, model):
    """After an empty answer, a real small model's retry answered with the last line of
    the loop's note about the failed attempt ("Do not repeat what failed; …"): in a chat
    that line would have been the person's reply."""

    def echo_the_note(body: dict[str, Any], n: int) -> Any:
        notes = [str(m["content"]) for m in body["messages"] if str(m.get("content")).startswith("[note]")]
        return answer(notes[-1].splitlines()[-1]) if notes else empty()

    server = model(echo_the_note)
    settle(agent.id, chat(agent.id))
    assert server.calls == ATTEMPTS
    [reply] = told(agent.id)
    assert reply.metadata["failed"] and "Do not repeat what failed" not in reply.content
    assert "(an empty answer; the answer only repeated the loop's own note)" in reply.content


def test_an_answer_that_is_the_reason_an_earlier_attempt_failed_is_no_answer(agent, model):
    """The real small model's first attempt wrote a call of "git tools" as text; its next
    answered the person with the reason the note gave for that failure, capitalised:
    "The answer was a call of git tools, which is no tool here, written as text." """

    def copy_the_reason(body: dict[str, Any], n: int) -> Any:
        if n == 0:
            return answer(json.dumps({"name": "git tools", "arguments": {"command": "log"}}))
        if n == 1:
            note = next(str(m["content"]) for m in body["messages"] if str(m.get("content")).startswith(NOTE_MARK))
            reason = next(line for line in note.splitlines() if line.startswith("Attempt 1 failed: "))
            return answer(reason.removeprefix("Attempt 1 failed: ").capitalize())
        return answer("The parser now reads tabs.")

    server = model(copy_the_reason)
    settle(agent.id, chat(agent.id))
    assert server.calls == 3  # the copy of the reason refused too
    assert told(agent.id)[-1].content == "The parser now reads tabs."


def test_an_answer_of_more_calls_than_a_turn_may_make_has_the_rest_refused_and_the_model_told(agent, model, settings):
    """Nothing bounded the calls of one answer but its max_tokens: 25 distinct calls (a
    small model saving a note, again and again, each a little different) were 25 effects,
    in every one of an item's turns."""
    settings.MARKUS["TURN_MAX_TOOL_CALLS"] = 10
    many = calls([("memory_save", {"content": f"The release is on Friday ({i})."}) for i in range(25)])
    server = model([many, answer("Saved.")])
    item = settle(agent.id, chat(agent.id))
    assert server.calls == 2
    assert Observation.objects.filter(agent_id=agent.id).count() == 10
    results = [m["content"] for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert len(results) == 25 and all('"saved": true' in r for r in results[:10])
    assert all("not made: at most 10 calls in one answer" in r for r in results[10:])
    assert ToolCallRecord.objects.filter(mailbox_item_id=item.id, ok=False).count() == 15
    [reply] = told(agent.id)
    assert reply.content == "Saved."


def test_a_model_that_keeps_telling_a_person_new_things_is_stopped_after_a_few_messages(agent, model, settings):
    """Each message a little different, so no repeat: seven notices in one chat, one a
    turn, each ringing the person's bell (12 turns an attempt, 3 attempts, were 36)."""
    settings.MARKUS["ITEM_MAX_NOTICES"] = 5

    def keep_telling(body: dict[str, Any], n: int) -> Any:
        if n < 7:
            return call("notify_user", {"title": "Release", "body": f"News number {n}."})
        return answer("That is all.")

    server = model(keep_telling)
    settle(agent.id, chat(agent.id))
    assert UserNotification.objects.filter(title="Release").count() == 5
    results = [str(m["content"]) for m in server.requests[-1].body["messages"] if m["role"] == "tool"]
    assert "not sent: this work told people 5 times already (MARKUS_ITEM_MAX_NOTICES)" in results[-1]
    assert told(agent.id)[-1].content == "That is all."


@pytest.mark.parametrize("as_sent", ["streamed", "whole"])
def test_a_calls_arguments_sent_as_an_object_not_a_string_are_read_as_they_are(agent, model, as_sent):
    """Some servers of the OpenAI wire send a call's arguments as a JSON object, not as
    the string of one: the SDK passes it through, and reading it as a string failed the
    attempt (a TypeError), three times."""
    memo = calls([("memory_save", {"content": "The release is on Friday.", "kind": "fact"})], as_object=True)
    server = model([whole(memo) if as_sent == "whole" else memo, answer("Noted.")])
    settle(agent.id, chat(agent.id))
    assert server.calls == 2
    assert Observation.objects.get(agent_id=agent.id).content == "The release is on Friday."
    [reply] = told(agent.id)
    assert reply.content == "Noted."


def test_an_approval_asked_with_plain_labels_as_its_options_is_asked_not_refused(agent, model):
    """The real small model wrote its options as labels (``["Approve", "Reject"]``): each
    is the option of that label (its id the label in lower case), and the item waits for
    the person; refused, the model wrote the refusal back as a tool call of its own."""
    ask = {"title": "Deploy v2?", "description": "to production", "options": ["Approve", "Reject it"]}
    server = model([fenced_call("request_user_approval", ask), answer("Deployed.")])
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.A2A_MESSAGE,
        payload={"summary": "deploy v2", "content": "Deploy v2, with a person's approval"},
    )
    loop.run_attention(agent.id)
    item.refresh_from_db()
    assert server.calls == 1 and item.status == Status.DEFERRED and item.marks["waitingForApproval"] is True
    approval = Approval.objects.get(mailbox_item_id=item.id)
    assert approval.options == [{"id": "approve", "label": "Approve"}, {"id": "reject_it", "label": "Reject it"}]


def test_an_approval_answered_is_not_asked_again_and_a_person_is_asked_a_few_times_at_most(
    agent, model, alice, settings
):
    """The real small model, its deploy approved, asked the same approval again after each
    answer, each a new approval in the person's bell. The same question answered is
    refused with the answer; new questions stop at the notices' cap."""
    settings.MARKUS["ITEM_MAX_NOTICES"] = 2
    deploy = {"title": "Approve deployment", "description": "v2 to production"}
    other = {"title": "Approve the migration", "description": "before the deploy"}
    third = {"title": "Approve the announcement", "description": "after the deploy"}
    asks = [call("request_user_approval", a) for a in (deploy, deploy, other, third)]
    server = model([*asks, answer("Deployed.")])
    item = mailbox_enqueue(
        agent_id=agent.id, source_type=T.A2A_MESSAGE, payload={"summary": "deploy", "content": "Deploy v2"}
    )
    loop.run_attention(agent.id)
    first = Approval.objects.get(mailbox_item_id=item.id)
    approval_respond(user=alice, approval_id=first.id, selected_option="approve", comment="go")
    loop.run_attention(agent.id)
    second = Approval.objects.exclude(id=first.id).get(mailbox_item_id=item.id)
    approval_respond(user=alice, approval_id=second.id, selected_option="approve")
    item = settle(agent.id, item)

    results = [m["content"] for m in server.requests[-1].body["messages"] if m["role"] == "tool"]
    assert "not asked: alice answered this already (approve: go); act on that answer" in results[1]
    assert "not asked: this work asked people 2 times already (MARKUS_ITEM_MAX_NOTICES)" in results[-1]
    assert Approval.objects.filter(mailbox_item_id=item.id).count() == 2 and item.status == Status.COMPLETED
    assert server.calls == 5


def test_a_reasoning_models_thinking_is_neither_the_reply_nor_a_call(agent, model):
    """A reasoning model's thinking in the content (a server without a reasoning parser):
    the person got it as part of the reply, and a call it only thought about could be
    read as a call written as text."""
    thought = '<think>\nShould I look first?\n```json\n{"name": "memory_search", "arguments": {"query": "x"}}\n```\n'
    server = model(answer(thought + "No need.\n</think>\n\nThe release is on Friday."))
    item = settle(agent.id, chat(agent.id))
    assert server.calls == 1
    [reply] = told(agent.id)
    assert reply.content == "The release is on Friday."
    assert not ToolCallRecord.objects.filter(mailbox_item_id=item.id).exists()


@pytest.mark.parametrize("as_sent", ["streamed", "whole"])
def test_an_answer_stopped_by_the_providers_filter_is_never_the_reply_and_is_not_asked_again(agent, model, as_sent):
    """A provider's safety filter stops an answer mid-way (finish_reason
    ``content_filter``): the half written so far was the person's reply, unmarked. Now the
    item ends at once, the person told the model's provider refused; the same request is
    not sent again (it would be refused again), and the refused turn is not kept."""
    behaviour = refuse("Sure, here is how to get past the", finish="content_filter")
    server = model(whole(behaviour) if as_sent == "whole" else behaviour)
    item = settle(agent.id, chat(agent.id))
    assert server.calls == 1
    [reply] = told(agent.id)
    assert reply.metadata["failed"] and "get past the" not in reply.content
    assert "the model's provider refused to answer (content_filter)" in reply.content
    assert item.status == Status.COMPLETED


def test_a_refusal_the_model_wrote_is_what_the_person_is_told(agent, model):
    """The OpenAI wire's ``refusal``: the model's own words declining, with no content,
    was an empty answer asked again twice, and the person was told only "an empty answer"."""
    server = model(refuse(refusal="I can't help with that request.", finish="stop"))
    settle(agent.id, chat(agent.id))
    assert server.calls == 1
    [reply] = told(agent.id)
    assert reply.metadata["failed"] and "I can't help with that request." in reply.content


def test_an_answer_written_as_a_note_of_the_loops_is_no_answer_though_its_lines_are_new(agent, model):
    """A real small model, retrying after a refused tool, answered with the note on its
    earlier attempt's calls, copied from its mark on and then made up ("it called
    task_response(…)" over and over): lines of its own, so not only a repeat, but an
    answer that speaks as the loop, never the model's word to a person."""

    def write_a_note(body: dict[str, Any], n: int) -> Any:
        if n == 0:
            return call("memory_search", {"query": "release"})
        return answer(
            "[note] An earlier attempt at this item already made these tool calls, and they took effect.\n"
            + "\n".join(f"- it called task_response({{}}) -> nothing ({i})" for i in range(3))
        )

    server = model(write_a_note)
    settle(agent.id, chat(agent.id))
    assert server.calls == 1 + ATTEMPTS
    [reply] = told(agent.id)
    assert reply.metadata["failed"] and "task_response" not in reply.content
    assert "the answer was written as a note of the loop's" in reply.content


def test_an_echo_of_the_note_in_the_chats_history_is_not_sent_again_nor_taken_from_it(agent, model):
    """A chat's history held such an echo, stored as a reply before echoes were refused:
    the model copied it into its next answer, whose note said something else by then."""
    session = main_session(agent.id)
    echo = f"{CONTEXT_MARK}\nNow: Monday 2026-12-07 02:35 UTC\n## Mailbox (3 waiting)"
    ChatMessage.objects.create(session=session, role="user", content="What is the last commit?")
    ChatMessage.objects.create(session=session, role="assistant", content=echo)
    later = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "And the one before?", "content": "And the one before?"},
        metadata={"senderId": "1", "senderRole": "user", "sessionId": session.id},
    )
    server = model(lambda body, n: answer(f"{echo}\n\nI cannot see the repository."))
    settle(agent.id, later)
    sent = [str(m.get("content")) for m in server.requests[0].body["messages"]]
    assert not any("(3 waiting)" in c for c in sent)
    assert told(agent.id)[-1].content == "I cannot see the repository."


def test_a_failed_reply_in_the_chats_history_is_the_loops_note_and_a_copy_of_it_is_no_answer(agent, model):
    """The real small model, asked again what it had failed to answer, answered at once
    with the failure reply of the earlier item from its history, word for word: the person
    read "it ran past its time limit of 10 min" about an answer of 11 seconds. That reply
    is the loop's word, not the model's: the history says so, and a copy of it is refused."""
    session = main_session(agent.id)
    failure = (
        "I could not finish this: it ran past its time limit of 10 min (MARKUS_ITEM_MAX_SECONDS). "
        "Before that I had already done: task_list, tool_search."
    )
    question = "What changed in the last commit?"
    ChatMessage.objects.create(session=session, role="user", content=question)
    ChatMessage.objects.create(session=session, role="assistant", content=failure, metadata={"failed": True})
    again = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": question, "content": question},
        metadata={"senderId": "1", "senderRole": "user", "sessionId": session.id},
    )

    def copy_the_last_reply(body: dict[str, Any], n: int) -> Behaviour:
        said = [str(m["content"]) for m in body["messages"] if m["role"] == "assistant" and m.get("content")]
        return answer(said[-1].split("\n", 1)[-1] if n == 0 else "The parser now reads tabs.")  # the reply

    server = model(copy_the_last_reply)
    settle(agent.id, again)
    [earlier] = [m for m in server.requests[0].body["messages"] if m["role"] == "assistant"]
    assert earlier["content"].startswith(NOTE_MARK) and "time limit" in earlier["content"]
    assert server.calls == 2  # the copy refused, the next attempt answered
    assert told(agent.id)[-1].content == "The parser now reads tabs."


def test_the_same_call_repeated_in_one_answer_is_made_once(agent, model):
    """A small model that loops writes one call over and over in one answer (30 times
    in a trial, to its max_tokens): each copy was made, so a person got each
    notification as often, and the session grew by two messages a copy. The copies are
    left out of the answer: made once, answered once, never sent back to the model."""
    notify = ("notify_user", {"title": "Release", "body": "It is on Friday."})
    other = ("notify_user", {"title": "Release", "body": "Or Saturday."})
    server = model([calls([notify, notify, other, notify, notify]), answer("Told you.")])
    settle(agent.id, chat(agent.id))
    assert UserNotification.objects.filter(title="Release").count() == 2  # the two distinct calls
    sent = server.requests[1].body["messages"]
    [asked] = [m for m in sent if m["role"] == "assistant" and m.get("tool_calls")]
    assert [json.loads(c["function"]["arguments"])["body"] for c in asked["tool_calls"]] == [
        "It is on Friday.",
        "Or Saturday.",
    ]
    assert len([m for m in sent if m["role"] == "tool"]) == 2
    *notices, reply = told(agent.id)
    assert len(notices) == 2 and reply.content == "Told you."


def test_an_item_stops_at_its_ceiling_of_model_calls_and_the_person_is_told_once(agent, model, settings):
    settings.MARKUS["ITEM_MAX_CALLS"] = 5
    # A different made-up tool each time: no call repeats, so only the ceiling ends it.
    server = model(lambda body, n: call(f"ghost_{n}", {}))
    item = settle(agent.id, chat(agent.id))
    assert server.calls == 5
    [reply] = told(agent.id)
    assert "it used its 5 model calls (MARKUS_ITEM_MAX_CALLS)" in reply.content
    assert item.status == Status.COMPLETED and LLMCall.objects.filter(mailbox_item_id=item.id).count() == 5


def test_each_calls_usage_is_written_when_the_call_ends_not_when_the_run_does(agent, model):
    seen: list[int] = []

    def script(body: dict[str, Any], n: int) -> Behaviour:
        seen.append(LLMCall.objects.filter(agent_id=agent.id).count())  # read while the run goes on
        return call("check_mailbox", {}) if n < 2 else answer("All quiet.")

    model(script)
    settle(agent.id, chat(agent.id))
    assert seen == [0, 1, 2]


def test_a_turn_ends_with_a_plain_answer_or_end_turn_and_no_marker_is_asked_for(agent, model):
    server = model([call("end_turn", {"answer": "The release is on Friday."})])
    settle(agent.id, chat(agent.id))
    assert server.calls == 1
    [reply] = told(agent.id)
    assert reply.content == "The release is on Friday."
    request = server.requests[0].body
    assert "end_turn" in [t["function"]["name"] for t in request["tools"]]
    assert "<<" not in json.dumps(request)


def test_the_usage_api_counts_failed_calls_and_their_estimated_input(agent, model, alice_client):
    model([cut(2, answer("x")), answer("Noted.")])
    settle(agent.id, chat(agent.id))
    body = alice_client.get(f"/api/agents/{agent.id}/usage", {"days": 1}).json()
    assert body["totals"]["calls"] == 2 and body["totals"]["failedCalls"] == 1
    [failed] = LLMCall.objects.exclude(error="")
    assert body["totals"]["estimatedInputTokens"] == failed.input_tokens > 0


def test_a_deliberation_that_reads_the_same_answer_again_and_again_is_stopped_and_the_mini_triage_decides(
    agent, model, settings
):
    """One rule for the tool loop and the deliberation: the same call answered the same
    a third time ends it (a small model re-reads its mailbox instead of deciding)."""
    ids = re.compile(r"\bmbx_[0-9a-f]+\b")
    asked: list[str] = []

    def script(body: dict[str, Any], n: int) -> Behaviour:
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        if "complete_deliberation" in offered:
            asked.append("deliberation")
            return call("check_mailbox", {})
        if "triage_decision" in offered:
            asked.append("triage")
            return call("triage_decision", {"processItemId": ids.findall(json.dumps(body["messages"][1:]))[0]})
        asked.append("item")
        return answer("Handled.")

    server = model(script)
    settings.MARKUS.update({"TRIAGE": True, "DELIBERATION": True})
    for summary in ("disk almost full", "nightly build broke"):
        mailbox_enqueue(
            agent_id=agent.id, source_type=T.SYSTEM_EVENT, priority=2, payload={"summary": summary, "content": summary}
        )
    loop.run_attention(agent.id, budget=1)
    assert asked[:5] == ["deliberation", "deliberation", "deliberation", "triage", "item"]
    results = [m["content"] for m in server.requests[2].body["messages"] if m["role"] == "tool"]
    assert "answered exactly the same" not in results[0] and "answered exactly the same" in results[1]


def test_a_deliberation_that_contradicts_itself_is_stopped_and_the_mini_triage_decides(agent, model, settings):
    ids = re.compile(r"\bmbx_[0-9a-f]+\b")
    asked: list[str] = []

    def script(body: dict[str, Any], n: int) -> Behaviour:
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        listed = ids.findall(json.dumps(body["messages"][1:]))
        if "complete_deliberation" in offered:  # process an item and drop it too
            asked.append("deliberation")
            first = listed[0]
            return call("complete_deliberation", {"process_item_id": first, "drop": [{"item_id": first}]})
        if "triage_decision" in offered:
            asked.append("triage")
            return call("triage_decision", {"processItemId": listed[0], "reasoning": "the oldest"})
        asked.append("item")
        return answer("Handled.")

    model(script)
    settings.MARKUS.update({"TRIAGE": True, "DELIBERATION": True})
    for n, summary in enumerate(("disk almost full", "nightly build broke")):
        item = mailbox_enqueue(
            agent_id=agent.id, source_type=T.SYSTEM_EVENT, priority=2, payload={"summary": summary, "content": summary}
        )
        MailboxItem.objects.filter(id=item.id).update(queued_at=timezone.now() - timedelta(minutes=5 - n))
    loop.run_attention(agent.id, budget=1)
    # Three identical refused decisions end the deliberation; the mini triage chooses.
    assert asked[:5] == ["deliberation", "deliberation", "deliberation", "triage", "item"]
