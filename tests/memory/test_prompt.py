"""Relevant long-term memory goes into what the model is told (the loop's context note,
after the stable system prompt), within its budget: one
``## Long-term Memory`` block with MEMORY.md (cut to LONGTERM_PROMPT_CHARS) and the
observations that best match the item (at most LONGTERM_PROMPT_OBSERVATIONS)."""

from __future__ import annotations

import pytest

from attention import loop
from attention.scenarios import context_lines
from attention.session_messages import last_context
from mailbox.registry import MailboxType as T
from mailbox.services import mailbox_enqueue
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider, Turn
from markus.memory import services
from markus.memory.selectors import PROMPT_OBSERVATION_CHARS, prompt_block

from .conftest import save

pytestmark = [pytest.mark.pg, pytest.mark.django_db]


def context(agent, item) -> str:
    return "\n".join(context_lines(agent, item, "system_notice"))


def block_of(prompt: str) -> str:
    assert "## Long-term Memory\n" in prompt, "the block is there"
    _, _, rest = prompt.partition("## Long-term Memory\n")
    return rest.split("\n## Mailbox")[0]


def test_no_memory_no_block(agent):
    item = mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "hello"})
    assert "Long-term Memory" not in context(agent, item)
    assert prompt_block(agent.id, "hello") == []


def test_the_block_holds_memory_md_and_the_matching_observations(agent, grace):
    services.section_write(agent_id=agent.id, title="People", content="- Bob approves deploys")
    save(agent.id, "deploy windows are Tuesday and Thursday", "the coffee machine is broken")
    save(grace.id, "deploy secrets of grace")
    item = mailbox_enqueue(
        agent_id=agent.id,
        source_type=T.SYSTEM_EVENT,
        payload={"summary": "Deploy request", "content": "Can we deploy?"},
    )
    block = block_of(context(agent, item))
    assert "### People\n\n- Bob approves deploys" in block
    assert "deploy windows are Tuesday and Thursday" in block
    assert "coffee machine" not in block and "grace" not in block


def test_the_block_stays_within_its_budget(agent, settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "LONGTERM_PROMPT_CHARS", 800)
    monkeypatch.setitem(settings.MARKUS, "LONGTERM_PROMPT_OBSERVATIONS", 3)
    for i in range(4):
        services.section_write(agent_id=agent.id, title=f"Section {i}", content="\n".join(["lesson " * 20] * 20))
    save(agent.id, *[f"release {i} " + "detail " * 100 for i in range(6)])
    lines = prompt_block(agent.id, "release")
    observations = [line for line in lines if line.startswith("- [obs ")]
    memory_md = lines[2 : lines.index(next(line for line in lines if line.startswith("Observations")))]
    assert len("\n".join(memory_md[:-1])) <= 800
    assert memory_md[-1].startswith("… (cut here: memory_search_longterm")
    assert len(observations) == 3
    assert all(len(line) <= PROMPT_OBSERVATION_CHARS + len("- [obs 000000] ") for line in observations)


def test_the_loop_sends_the_block_to_the_llm(agent):
    services.section_write(agent_id=agent.id, title="Lessons", content="Always answer in English.")
    provider = ScriptedProvider([Turn(text="done")])
    set_provider_override(provider)
    try:
        mailbox_enqueue(agent_id=agent.id, source_type=T.SYSTEM_EVENT, payload={"summary": "ping"})
        loop.run_attention(agent.id)
    finally:
        set_provider_override(None)
    told = last_context(provider.calls[0]["messages"])  # the loop's context note
    assert "## Long-term Memory" in told and "Always answer in English." in told
