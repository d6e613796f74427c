"""The journal of a turn (ARCHITECTURE decision 14): a tool call the model decided on
takes effect once, wherever the worker dies around it (``crashes`` plays the deaths and
a brain that answers like a real model)."""

from __future__ import annotations

import json

import pytest

from attention import journal, tool_loop
from attention.models import ToolCallRecord
from attention.toolbox import TOOLS, Tool
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from mailbox.registry import Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import ChatMessage
from markus.llm.base import LLMResponse, ToolCall
from markus.memory.models import Observation

from .crashes import MARKER, Crash, crash_once, run_until_settled

pytestmark = [pytest.mark.pg, pytest.mark.django_db(transaction=True)]


def observations() -> int:
    return Observation.objects.filter(content__contains=MARKER).count()


def event(agent_id: str) -> MailboxItem:
    """A person's chat: somebody waits for it, so recovery re-queues it after a crash."""
    return mailbox_enqueue(
        agent_id=agent_id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "remember", "content": "save a note"},
        metadata={"senderId": "1", "senderRole": "user"},
    )


# Where the worker dies, and how many answers the model gives in all: a death before the
# effect committed asks it again (its first decision left nothing); after, it is not
# asked for that turn again: the journal answers.
POINTS = {
    "before_the_effect": (journal, "execute_tool", False, 3),
    "after_the_effect_before_its_commit": (journal, "execute_tool", True, 3),
    "after_the_result_committed": (journal, "_call", True, 2),
    "after_the_round_was_saved": (tool_loop, "yield_point", False, 2),
}


def _crash_at_and_settle(agent, monkeypatch, point: str) -> None:
    """One event's run with the worker dying once at ``point``, run until settled: the
    crash happened, the item completed, and its one memory_save took effect once."""
    module, name, after, _ = POINTS[point]
    fired = crash_once(monkeypatch, module, name, after=after)
    item = event(agent.id)
    run_until_settled(agent.id)
    assert fired, "the crash did not happen"
    assert observations() == 1
    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED
    calls = list(ToolCallRecord.objects.filter(mailbox_item_id=item.id))
    assert [(c.name, c.ok, c.state) for c in calls] == [("memory_save", True, "done")]


@pytest.mark.parametrize("point", list(POINTS))
def test_a_recorded_call_is_replayed_not_made_again_after_a_crash_at_each_point_of_the_turn(
    agent, brain, monkeypatch, point
):
    b = brain()
    _crash_at_and_settle(agent, monkeypatch, point)
    assert b.asked == POINTS[point][3]
    # The model saw its one call answered once: no second call, no duplicate result.
    last = b.seen[-1]
    assert sum(1 for m in last if m.get("role") == "tool") == 1
    assert sum(1 for m in last if m.get("tool_calls")) == 1


@pytest.mark.parametrize("point", list(POINTS))
def test_a_call_written_five_times_in_one_answer_takes_effect_once_wherever_the_worker_dies(
    agent, brain, monkeypatch, point
):
    brain(copies=5)
    _crash_at_and_settle(agent, monkeypatch, point)


def test_a_message_to_a_colleague_is_sent_once_when_the_worker_dies_after_it(agent, alice, team, brain, monkeypatch):
    from agentbus.models import Chunk
    from markus.agents.services import agent_create

    bea, _ = agent_create(name="Bea", role="engineer", owner=alice, team=team, agent_id="bea")
    brain("agent_send_message", {"to": "bea", "text": f"ping {MARKER}"})
    crash_once(monkeypatch, journal, "_call", after=True)
    event(agent.id)
    run_until_settled(agent.id)
    assert sum(1 for p in Chunk.objects.values_list("payload", flat=True) if MARKER in json.dumps(p)) == 1
    assert MailboxItem.objects.filter(agent_id=bea.id, source_type=T.A2A_MESSAGE).count() == 1


def test_a_refused_call_leaves_nothing_of_what_the_tool_wrote_before_it_refused(agent, brain, monkeypatch):
    from markus.core.errors import MarkusError
    from markus.memory import services as memory

    def save_then_refuse(ctx, args):
        memory.memory_save(agent_id=ctx.agent_id, content=f"half {MARKER}")
        raise MarkusError("refused after writing")

    no_args = {"type": "object", "properties": {}}
    monkeypatch.setitem(TOOLS, "half_tool", Tool("half_tool", "", no_args, save_then_refuse))
    brain("half_tool", {})
    item = event(agent.id)
    run_until_settled(agent.id)
    assert observations() == 0
    row = ToolCallRecord.objects.get(mailbox_item_id=item.id)
    assert row.ok is False and "refused after writing" in row.result


def outside_tool(monkeypatch, *, idempotent: bool) -> list[str]:
    """A tool whose effect leaves the database (a list here); it dies during its first
    call, after its effect. Returns the effects made, by call key."""
    made: list[str] = []
    dead: list[int] = []

    def handler(ctx, args):
        made.append(ctx.call_key)
        if not dead:
            dead.append(1)
            raise Crash
        return {"made": len(made)}

    t = Tool(
        "outside_tool",
        "",
        {"type": "object", "properties": {}},
        handler,
        transactional=False,
        idempotent=idempotent,
    )
    monkeypatch.setitem(TOOLS, "outside_tool", t)
    return made


def test_a_call_in_flight_when_its_worker_died_is_not_made_again_and_the_model_is_told(agent, brain, monkeypatch):
    made = outside_tool(monkeypatch, idempotent=False)
    b = brain("outside_tool", {})
    item = event(agent.id)
    run_until_settled(agent.id)
    assert len(made) == 1
    row = ToolCallRecord.objects.get(mailbox_item_id=item.id)
    assert row.state == "done" and row.ok is False
    told = [m for m in b.seen[-1] if m.get("role") == "tool"]
    assert len(told) == 1 and "in flight when the worker running it stopped" in json.loads(told[0]["content"])["error"]
    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED


def test_an_idempotent_call_in_flight_is_made_again_with_the_same_key(agent, brain, monkeypatch):
    made = outside_tool(monkeypatch, idempotent=True)
    brain("outside_tool", {})
    item = event(agent.id)
    run_until_settled(agent.id)
    assert len(made) == 2 and made[0] == made[1] and made[0].startswith(f"{item.id}:")
    row = ToolCallRecord.objects.get(mailbox_item_id=item.id)
    assert row.ok is True and json.loads(row.result) == {"made": 2}


def test_a_session_started_afresh_is_told_what_earlier_attempts_did(agent, brain, monkeypatch):
    """A retry from a clean start (an empty final answer) is a new attempt with a new
    session: the call the first attempt made is not hidden from it, and not made again
    by a model that listens."""
    b = brain()
    real = b.complete
    empty_once: list[int] = []

    def forgetful(**kw):
        response = real(**kw)
        if response.tool_calls or empty_once:
            return response
        empty_once.append(1)
        return LLMResponse(text="", usage=response.usage)

    monkeypatch.setattr(b, "complete", forgetful)
    item = event(agent.id)
    run_until_settled(agent.id)
    assert empty_once
    fresh = [m for m in b.seen if not any(x.get("role") == "tool" for x in m)][-1]
    notes = [m["content"] for m in fresh if m.get("role") == "user" and "earlier attempt" in m["content"]]
    assert notes and "memory_save" in notes[0] and MARKER in notes[0]
    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED


def test_a_chat_merged_into_a_chat_that_crashed_and_resumed_gets_its_reply(agent, alice, brain):
    first = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.HUMAN_CHAT,
        payload={"summary": "hello", "content": "please remember this"},
        metadata={"senderId": str(alice.pk), "senderRole": "user"},
    )
    follow_up: dict[str, MailboxItem] = {}

    def merged_then_die(messages):  # the follow-up came during the tool round, was merged; then the worker dies
        return any("and this too" in str(m.get("content")) for m in messages)

    b = brain(crash_when=merged_then_die)
    real = b.complete

    def with_follow_up(**kw):
        response = real(**kw)
        if response.tool_calls and not follow_up:
            follow_up["item"] = mailbox_enqueue(
                agent_id=agent.id,
                source_type=T.HUMAN_CHAT,
                payload={"summary": "and", "content": "and this too"},
                metadata={"senderId": str(alice.pk), "senderRole": "user"},
            )
        return response

    b.complete = with_follow_up  # type: ignore[method-assign]
    run_until_settled(agent.id)
    second = follow_up["item"]
    assert MailboxItem.objects.get(id=second.id).status == Status.MERGED
    replies = list(ChatMessage.objects.filter(role="assistant", session__agent_id=agent.id))
    assert len(replies) == 1
    assert replies[0].metadata["mailboxItemIds"] == [first.id, second.id]
    asked = ChatMessage.objects.filter(role="user", session__agent_id=agent.id).values_list("content", flat=True)
    assert list(asked) == ["please remember this", "and this too"]


def test_an_approval_asked_just_before_a_crash_parks_the_item_once_when_it_is_replayed(
    agent, alice, brain, monkeypatch
):
    """The journal keeps what a call left to the loop (the approval it parks the item
    for): a worker that dies after the call committed, before it parked the item, leaves
    a round that the next run replays, parking the item for that one approval."""
    from notifications.models import Approval

    brain("request_user_approval", {"title": "May I?", "description": "a risky step"})
    crash_once(monkeypatch, journal, "_call", after=True)
    comment = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.TASK_COMMENT,
        payload={"summary": "please check", "content": "please check", "taskId": "tsk_missing"},
        metadata={"senderId": str(alice.pk), "senderRole": "user"},
    )
    run_until_settled(agent.id)
    item = MailboxItem.objects.get(id=comment.id)
    approvals = list(Approval.objects.all())
    assert len(approvals) == 1
    assert item.status == Status.DEFERRED and item.marks["approvalId"] == approvals[0].id
    assert item.marks["waitingForApproval"] is True


def test_calls_without_unique_ids_are_journaled_by_their_place_in_the_turn(agent, brain, monkeypatch):
    """Some OpenAI-compatible servers send every call of a turn with the same id (or
    none): two observations asked in one turn, the worker dies after the first: each is
    made once."""
    b = brain()
    real = b.complete

    def two_calls_no_ids(**kw):
        response = real(**kw)
        if response.tool_calls:
            call = response.tool_calls[0]
            response.tool_calls = [
                ToolCall(id="", name=call.name, arguments={"content": f"first {MARKER}"}),
                ToolCall(id="", name=call.name, arguments={"content": f"second {MARKER}"}),
            ]
        return response

    monkeypatch.setattr(b, "complete", two_calls_no_ids)
    crash_once(monkeypatch, journal, "_call", after=True)
    item = event(agent.id)
    run_until_settled(agent.id)
    assert Observation.objects.filter(content=f"first {MARKER}").count() == 1
    assert Observation.objects.filter(content=f"second {MARKER}").count() == 1
    rows = ToolCallRecord.objects.filter(mailbox_item_id=item.id).order_by("position")
    assert [(r.position, r.ok) for r in rows] == [(0, True), (1, True)]
    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED


def test_an_answer_past_the_turn_cap_makes_each_allowed_call_once_and_none_past_it_when_the_worker_dies(
    agent, settings, monkeypatch
):
    """``MARKUS_TURN_MAX_TOOL_CALLS``: an answer of 12 distinct calls, the cap 10, the worker
    dying right after the first call past the cap was answered "not made". The resumed
    round replays the journal: each of the 10 took effect once, the 2 past the cap none."""
    from markus.llm.base import Usage, set_provider_override

    from .crashes import EffectBrain

    class TwelveCalls(EffectBrain):
        def complete(self, *, system, messages, tools, context):
            if any(m.get("role") == "tool" for m in messages):
                return LLMResponse(text="done", usage=Usage(prompt_tokens=10, completion_tokens=5))
            calls = [
                ToolCall(id=f"c{i}", name="memory_save", arguments={"content": f"{MARKER} {i}"}) for i in range(12)
            ]
            return LLMResponse(text="", tool_calls=calls, usage=Usage(prompt_tokens=10, completion_tokens=5))

    monkeypatch.setitem(settings.MARKUS, "DELIBERATION", False)
    monkeypatch.setitem(settings.MARKUS, "TURN_MAX_TOOL_CALLS", 10)
    set_provider_override(TwelveCalls("memory_save", {}))
    real, made = journal._call, []

    def dies_after_the_eleventh(r, call):
        result = real(r, call)
        made.append(call.id)
        if len(made) == 11:
            raise Crash
        return result

    monkeypatch.setattr(journal, "_call", dies_after_the_eleventh)
    try:
        item = event(agent.id)
        run_until_settled(agent.id)
    finally:
        set_provider_override(None)
    assert len(made) >= 11, "the crash did not happen"
    assert sorted(Observation.objects.filter(content__contains=MARKER).values_list("content", flat=True)) == sorted(
        f"{MARKER} {i}" for i in range(10)
    )
    rows = list(ToolCallRecord.objects.filter(mailbox_item_id=item.id).order_by("position"))
    assert [(r.position, r.ok) for r in rows] == [(i, i < 10) for i in range(12)]
    assert all("not made: at most 10 calls in one answer" in r.result for r in rows[10:])
    assert MailboxItem.objects.get(id=item.id).status == Status.COMPLETED
