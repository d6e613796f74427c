"""``manage.py bench prompts`` measures what the loop sends the model per scenario, the
chat's shared prefix and an idle agent's day, through a capturing provider; it leaves
nothing behind (no timing is asserted)."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from mailbox.models import MailboxItem
from markus import bench
from markus.agents.models import Agent
from markus.bench import prompts
from markus.llm import base
from markus.toolservers.models import ToolServer
from markus.work.models import Task

pytestmark = pytest.mark.django_db(transaction=True)


def test_prompts_is_a_suite_of_bench_all() -> None:
    assert "prompts" in bench.SUITES


def test_bench_prompts_measures_every_scenario_and_cleans_up() -> None:
    out = io.StringIO()
    call_command("bench", "prompts", "--n", "3", stdout=out)
    text = out.getvalue()
    figures = {line.split("  ")[1].strip(): line for line in text.splitlines() if line.startswith("prompts  ")}

    for scenario, _ in prompts.SCENARIOS:
        row = figures.get(f"{scenario}: est. prompt tokens")
        assert row is not None, f"no figure for {scenario} in:\n{text}"
        value = float(re.search(r"([\d.]+) tokens", row).group(1))  # type: ignore[union-attr]
        assert value > 0
        assert re.search(rf"^{scenario}\s+\|\s+\d+ \|\s+\d+ \|\s+\d+ \|\s+\d+ \|\s+\d+$", text, re.M), text
    for name in ("tool schema chars", "system prompt chars", "message chars"):
        assert float(re.search(r"([\d.]+) chars", figures[f"{name}, all scenarios"]).group(1)) > 0  # type: ignore[union-attr]
    prefix = float(re.search(r"([\d.]+) %", figures["chat 2nd request: shared prefix"]).group(1))  # type: ignore[union-attr]
    assert 0 < prefix <= 100
    assert "idle day: model calls" in figures and "idle day: est. prompt tokens" in figures
    assert "an idle agent's day: 3 heartbeats" in text
    assert "an estimate: 4 characters a token" in text

    # Nothing is left: agents, items, tasks, the tool server, the provider override.
    assert not Agent.objects.filter(id__startswith="bench-prompts-").exists()
    assert not MailboxItem.objects.exists()
    assert not Task.objects.exists()
    assert not ToolServer.objects.filter(name=prompts.SERVER_NAME).exists()
    assert getattr(base, "_override", None) is None


def test_the_capturing_provider_ends_a_deliberation_and_probes_the_chat_once() -> None:
    provider = prompts.CapturingProvider()
    tools = [{"type": "function", "function": {"name": n, "parameters": {}}} for n in ("check_mailbox", "x")]
    chat = base.CallContext(scenario="chat", item={"id": "mbx_1"})
    first = provider.complete(system="s", messages=[{"role": "user", "content": "hi"}], tools=tools, context=chat)
    assert [c.name for c in first.tool_calls] == ["check_mailbox"]
    second = provider.complete(system="s", messages=[], tools=tools, context=chat)
    assert not second.tool_calls and second.text.startswith("Done.")
    deliberation = base.CallContext(scenario="deliberation", item={"id": "a", "candidates": [{"id": "b"}]})
    decide = [{"type": "function", "function": {"name": "complete_deliberation", "parameters": {}}}]
    answer = provider.complete(system="s", messages=[], tools=decide, context=deliberation)
    assert [(c.name, c.arguments["process_item_id"]) for c in answer.tool_calls] == [("complete_deliberation", "b")]
    assert [r.scenario for r in provider.requests] == ["chat", "chat", "deliberation"]
    compact = '[{"type":"function","function":{"name":"check_mailbox","parameters":{}}},'
    compact += '{"type":"function","function":{"name":"x","parameters":{}}}]'
    assert provider.requests[0].tool_chars == len(compact)
