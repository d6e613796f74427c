"""Streamed turns (issue 13): ``CallContext.on_delta`` hears the answer text in pieces,
which joined are the turn's text; the offline brain and the scripted provider stream
in word chunks (the network providers are tested against their stubs)."""

from __future__ import annotations

import threading

import pytest

from markus.llm.base import CallContext, LLMCancelled
from markus.llm.offline import OfflineProvider
from markus.llm.scripted import ScriptedProvider, Turn


def test_the_offline_brain_streams_its_answer_in_word_chunks():
    deltas: list[str] = []
    r = OfflineProvider().complete(
        system="You are Ada.",
        messages=[{"role": "user", "content": "How are you today?"}],
        tools=[],
        context=CallContext(
            scenario="chat", agent_name="Ada", item={"content": "How are you today?"}, on_delta=deltas.append
        ),
    )
    assert len(deltas) > 5
    assert "".join(deltas) == r.text and "How are you today?" in r.text


def test_the_offline_brain_streams_nothing_on_a_tool_call_turn():
    deltas: list[str] = []
    tools = [{"type": "function", "function": {"name": "check_mailbox", "parameters": {}}}]
    r = OfflineProvider().complete(
        system="s",
        messages=[{"role": "user", "content": "what is in your queue?"}],
        tools=tools,
        context=CallContext(scenario="chat", item={"content": "what is in your queue?"}, on_delta=deltas.append),
    )
    assert r.tool_calls[0].name == "check_mailbox" and deltas == []


def test_without_a_listener_the_answer_is_the_same():
    context = CallContext(scenario="chat", agent_name="Ada", item={"content": "hi"})
    messages = [{"role": "user", "content": "hi"}]
    heard: list[str] = []
    plain = OfflineProvider().complete(system="s", messages=messages, tools=[], context=context)
    streamed = OfflineProvider().complete(
        system="s", messages=messages, tools=[], context=CallContext(**{**context.__dict__, "on_delta": heard.append})
    )
    assert plain.text == streamed.text == "".join(heard)


def test_the_scripted_provider_streams_and_stops_between_chunks():
    provider = ScriptedProvider([Turn(text="one two three four"), Turn(text="a b c d e f", chunk_delay=0.01)])
    deltas: list[str] = []
    r = provider.complete(system="s", messages=[], tools=[], context=CallContext(on_delta=deltas.append))
    assert deltas == ["one ", "two ", "three ", "four"] and r.text == "one two three four"
    stop = threading.Event()
    heard: list[str] = []

    def listen(text: str) -> None:
        heard.append(text)
        if len(heard) == 2:
            stop.set()

    with pytest.raises(LLMCancelled):
        provider.complete(
            system="s", messages=[], tools=[], context=CallContext(cancelled=stop.is_set, on_delta=listen)
        )
    assert heard == ["a ", "b "]
