"""The calls that choose what to do are recorded like the items' own (issue 26: the mini
triage's usage was not recorded at all): a deliberation's and the mini triage's calls each
leave a row with their scenario, tokens and cost, through the openai SDK against the stub."""

from __future__ import annotations

from collections import Counter

import pytest

from attention import loop
from markus.usage.models import LLMCall
from tests.attention.test_tier_zero import CountingModel, notice
from tests.llm.stub_openai import StubOpenAI

from .conftest import PRICE, USAGE

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def counting(settings, monkeypatch):
    model = CountingModel()
    with StubOpenAI([], chooser=model, usage=USAGE) as stub:
        for key, value in {
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": stub.url,
            "LLM_API_KEY": "sk-test",
            "LLM_MODEL": "stub-model",
            "INTERRUPT_JUDGE": False,
            "PRICES": {"stub-model": PRICE},
        }.items():
            monkeypatch.setitem(settings.MARKUS, key, value)
        yield model


def scenarios(agent) -> Counter[str]:
    return Counter(LLMCall.objects.filter(agent=agent).values_list("scenario", flat=True))


def test_the_mini_triage_records_its_call(agent, counting, settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "DELIBERATION", False)
    notice(agent, "first of two", 2, minutes_ago=20)
    notice(agent, "second of two", 2, minutes_ago=10)

    loop.run_attention(agent.id, budget=1)

    assert counting.calls == Counter({"triage": 1, "item": 1})
    assert scenarios(agent) == Counter({"triage": 1, "system_notice": 1})
    triage = LLMCall.objects.get(agent=agent, scenario="triage")
    assert (triage.input_tokens, triage.output_tokens, triage.cached_tokens) == (100, 20, 40)
    assert float(triage.cost) == pytest.approx(0.00016)


def test_a_deliberation_records_its_calls(agent, counting, settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "DELIBERATION", True)
    notice(agent, "first of two", 1, minutes_ago=20)
    notice(agent, "second of two", 1, minutes_ago=10)

    loop.run_attention(agent.id, budget=1)

    assert counting.calls == Counter({"deliberation": 1, "item": 1})
    assert scenarios(agent) == Counter({"deliberation": 1, "system_notice": 1})
    assert set(LLMCall.objects.values_list("model", flat=True)) == {"stub-model"}
