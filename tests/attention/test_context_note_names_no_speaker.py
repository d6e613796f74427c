"""The loop's context note is marked as context, not as somebody speaking: an agent named
Ada reads no "Markus" (the platform's name) as a speaker in its requests, so a small model
does not take that name for its own. A session stored with the old mark still has its
note recognised: found again, compared, left out for rule brains, never duplicated."""

from __future__ import annotations

import re

import pytest
from django.conf import settings

from attention import loop
from attention.models import LLMSession
from attention.session_messages import context_message, last_context, same_context
from attention.tool_loop import _note_context
from markus.agents.models import ChatMessage
from markus.llm.base import CONTEXT_MARK, without_context

from ..llm.stub_openai import StubOpenAI

OLD_MARK = "[Markus: your context now; not a message from anyone]"

#: The platform's name where a reader takes it for who speaks: a tag ("[Markus]",
#: "[Markus: ...]") or a line's speaker ("Markus: ...").
SPEAKER = re.compile(r"\[Markus\b|^\s*Markus\s*:", re.MULTILINE)


@pytest.mark.django_db(transaction=True)
def test_an_agent_named_ada_reads_no_platform_name_as_a_speaker(model_server, agent, alice_client, monkeypatch):
    assert agent.name == "Ada"
    # No worker runs here: the chat's wait ends at once (202) and the test runs the item.
    monkeypatch.setitem(settings.MARKUS, "CHAT_TIMEOUT_S", 0.1)
    replies = [
        {"tool_calls": [("memory_save", {"content": "Alice asked who I am", "kind": "note"})]},
        {"content": "I am Ada, an engineer."},
    ]
    with StubOpenAI(replies) as stub:
        model_server(stub.url)
        r = alice_client.post(f"/api/agents/{agent.id}/chat", {"text": "who are you?"}, format="json")
        assert r.status_code == 202, r.content
        loop.run_attention(agent.id)
    reply = ChatMessage.objects.filter(session_id=r.json()["sessionId"], role="assistant").get()
    assert reply.content == "I am Ada, an engineer."
    assert len(stub.requests) == 2
    for request in stub.requests:
        messages = request["body"]["messages"]
        # The note is there (a message of its own before the question)...
        assert any(CONTEXT_MARK in str(m.get("content")) for m in messages[1:])
        # ...and no message, nor the system prompt, has the platform's name as who speaks.
        for m in messages:
            assert not SPEAKER.search(str(m.get("content") or "")), m
    assert stub.requests[1]["body"]["messages"][-1]["role"] == "tool"


def _old_note(lines: list[str]) -> str:
    return "\n".join([OLD_MARK, *lines])


def test_a_note_stored_with_the_old_mark_is_found_and_compared_as_the_same():
    lines = ["Working memory:", "- plan (just now): ship it"]
    messages = [{"role": "user", "content": _old_note(lines)}, {"role": "user", "content": "deploy"}]
    assert last_context(messages) == _old_note(lines)
    assert same_context(context_message(lines)["content"], last_context(messages))
    assert not same_context(context_message([*lines, "- more"])["content"], last_context(messages))


def test_rule_brains_do_not_read_a_note_with_the_old_mark():
    messages = [
        {"role": "user", "content": _old_note(["Working memory:"])},
        {"role": "user", "content": "deploy"},
        {"role": "tool", "tool_call_id": "c1", "content": '{"saved": true}\n\n' + _old_note(["x"])},
    ]
    assert without_context(messages) == [
        {"role": "user", "content": "deploy"},
        {"role": "tool", "tool_call_id": "c1", "content": '{"saved": true}'},
    ]


def test_a_stored_session_with_the_old_mark_gets_no_second_note_when_nothing_changed():
    lines = ["Working memory:", "- plan (1 min ago): ship it"]
    session = LLMSession(
        messages=[
            {"role": "user", "content": _old_note(lines)},
            {"role": "user", "content": "deploy"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
            {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
        ]
    )
    assert not _note_context(session, context_message(lines))
    assert sum(1 for m in session.messages if "context" in str(m.get("content"))) == 1
    # What changed is noted once, after the tool result, with the new mark.
    assert _note_context(session, context_message([*lines, "- next (just now): tell Bob"]))
    assert session.messages[-1]["content"].startswith('{"ok": true}\n\n' + CONTEXT_MARK)
    assert not _note_context(session, context_message([*lines, "- next (just now): tell Bob"]))


def test_a_retry_is_told_its_failed_attempts_without_a_platform_speaker_tag(agent):
    """The opening of a retried item says what the failed attempts did; it names no
    speaker the model could take for itself ("[Markus] This item was tried …")."""
    from attention.session import FAILED_ATTEMPTS, failed_attempts_note
    from mailbox.models import MailboxItem

    item = MailboxItem(agent_id=agent.id, marks={FAILED_ATTEMPTS: [{"reason": "provider error", "calls": ["x()"]}]})
    note = failed_attempts_note(item)

    assert "tried 1 time(s) before" in note and "provider error" in note
    assert not SPEAKER.search(note), note
