"""Agents talking through the real loop (a Celery worker in the test process), each
agent's LLM a small script: a question and its answer, a harness's request answered by
an internal agent, a group of three."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from agentbus.models import Stream
from agentbus.waiting import stream_request
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.agents.models import Agent
from markus.agents.services import agent_create
from markus.core.actors import Actor
from markus.llm.base import CallContext, LLMResponse, Provider, ToolCall, set_provider_override
from markus.work.services import task_create
from tests.attention.conftest import celery_worker, wait_for, wake_on_enqueue  # noqa: F401 (fixtures)

from .conftest import conversations, make_persona

MODULE = "markus.tools.a2a_tools"
Brain = Callable[[list[dict[str, Any]], CallContext], LLMResponse]


@pytest.fixture(autouse=True)
def a2a_tools(settings):
    modules = list(settings.MARKUS["TOOL_MODULES"])
    settings.MARKUS = {**settings.MARKUS, "TOOL_MODULES": [*modules, MODULE] if MODULE not in modules else modules}


class Colleagues(Provider):
    """One script per agent (by name); records the text of every call each one made."""

    name = "colleagues"

    def __init__(self, brains: dict[str, Brain]) -> None:
        self.brains = brains
        self.seen: dict[str, list[str]] = defaultdict(list)
        self.lock = threading.Lock()

    def complete(
        self, *, system: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: CallContext
    ) -> LLMResponse:
        with self.lock:
            self.seen[context.agent_name].append(json.dumps(messages, ensure_ascii=False))
        return self.brains[context.agent_name](messages, context)

    def saw(self, agent_name: str, text: str) -> bool:
        with self.lock:
            return any(text in call for call in self.seen[agent_name])


def use(tool: str, **args: Any) -> LLMResponse:
    return LLMResponse(tool_calls=[ToolCall(id=f"call_{tool}_{id(args)}", name=tool, arguments=args)])


def done(text: str = "Done.") -> LLMResponse:
    return LLMResponse(text=f"{text}")


def turn(messages: list[dict[str, Any]]) -> int:
    """How many answers this session has given so far."""
    return sum(1 for m in messages if m.get("role") == "assistant")


def last_result(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return json.loads(next(m for m in reversed(messages) if m.get("role") == "tool")["content"])


def answers_once(text: str) -> Brain:
    """Answers the first agent message it handles with agent_reply, then only reads."""
    state = {"answered": False}

    def brain(messages: list[dict[str, Any]], ctx: CallContext) -> LLMResponse:
        if ctx.scenario == "a2a" and turn(messages) == 0 and not state["answered"]:
            state["answered"] = True
            return use("agent_reply", text=text)
        return done()

    return brain


def nudge(agent: Agent, text: str) -> MailboxItem:
    return mailbox_enqueue(
        agent_id=agent.id, source_type=MailboxType.SYSTEM_EVENT, payload={"summary": text, "content": text}
    )


def colleagues_install(**brains: Brain) -> Colleagues:
    provider = Colleagues(brains)
    set_provider_override(provider)
    return provider


@pytest.fixture(autouse=True)
def _no_provider_left_behind():
    yield
    set_provider_override(None)


@pytest.mark.pg
def test_a_asks_b_b_answers_and_as_next_item_carries_the_answer(celery_worker, alice, team):
    ada, _ = agent_create(name="Ada", agent_id="ada", owner=alice, team=team)
    bea, _ = agent_create(name="Bea", agent_id="bea", owner=alice, team=team)

    def ada_brain(messages: list[dict[str, Any]], ctx: CallContext) -> LLMResponse:
        if ctx.scenario == "system_notice" and turn(messages) == 0:
            return use("agent_send_message", to="Bea", text="Is the build green?")
        return done()

    provider = colleagues_install(Ada=ada_brain, Bea=answers_once("Green since 10:02."))
    nudge(ada, "Find out whether the build is green")
    answer = wait_for(
        lambda: MailboxItem.objects.filter(
            agent=ada, source_type=MailboxType.A2A_MESSAGE, status__in=[Status.COMPLETED, Status.MERGED]
        ).first(),
        timeout=60,
        message="Ada handled Bea's answer",
    )
    assert answer.content == "Green since 10:02." and answer.metadata["senderName"] == "Bea"
    question = MailboxItem.objects.get(agent=bea, source_type=MailboxType.A2A_MESSAGE)
    assert question.content == "Is the build green?" and question.metadata["senderName"] == "Ada"
    reply = Stream.objects.get(id=answer.marks["streamId"])
    assert reply.reply_to == question.marks["streamId"] and reply.closed_at is not None
    assert provider.saw("Ada", "Green since 10:02.") and provider.saw("Bea", "Is the build green?")


@pytest.mark.pg
def test_a_harness_request_to_an_internal_agent_returns_its_reply(celery_worker, alice, team):
    eve = make_persona("eve", kind=Agent.Kind.EXTERNAL, owner=alice, team=team)
    ada, _ = agent_create(name="Ada", agent_id="ada", owner=alice, team=team)
    colleagues_install(Ada=answers_once("Yes, ship it."))
    result = async_to_sync(stream_request)(sender=eve.agent, recipient=ada, payload={"text": "May I ship?"}, timeout=60)
    assert not result["timed_out"], result
    assert [m["payload"]["text"] for m in result["reply"]] == ["Yes, ship it."]
    assert [m["sender"] for m in result["reply"]] == ["ada"]


@pytest.mark.pg
def test_a_group_of_three_exchanges_messages_and_each_sees_the_others_names(celery_worker, alice, team):
    for name in ("Ada", "Bea", "Cy"):
        agent_create(name=name, agent_id=name.lower(), owner=alice, team=team)

    def ada_brain(messages: list[dict[str, Any]], ctx: CallContext) -> LLMResponse:
        # Group chats are offered where the agent works with colleagues: here, its task.
        if ctx.scenario == "task_execution" and turn(messages) == 0:
            return use("agent_create_group_chat", name="release", members=["Bea", "Cy"])
        if ctx.scenario == "task_execution" and turn(messages) == 1:
            return use("agent_send_group_message", group_id=last_result(messages)["groupId"], text="Freeze at noon")
        if ctx.scenario == "task_execution" and turn(messages) == 2:
            return use("task_submit_review", task_id=ctx.item["taskId"], summary="Freeze announced")
        return done()

    provider = colleagues_install(Ada=ada_brain, Bea=answers_once("Fine by me"), Cy=answers_once("One more hour"))
    task_create(actor=Actor.for_user(alice), title="Organise the release freeze", assignee_id="ada")
    others = {"Ada": ("Bea", "Cy"), "Bea": ("Ada", "Cy"), "Cy": ("Ada", "Bea")}

    def everyone_heard_everyone() -> bool:
        return all(
            provider.saw(me, f"{other} in group") or provider.saw(me, f"{other}: ")
            for me, pair in others.items()
            for other in pair
        )

    wait_for(everyone_heard_everyone, timeout=90, message="each agent read the other two by name")
    assert provider.saw("Bea", "Ada in group 'release'") and provider.saw("Cy", "Ada in group 'release'")
    assert provider.saw("Ada", "Fine by me") and provider.saw("Ada", "One more hour")
    group = conversations().get(is_group=True)  # not the team's own channel
    senders = set(group.chunks.values_list("sender_id", flat=True))
    assert senders == {"ada", "bea", "cy"} and group.closed_at is None
