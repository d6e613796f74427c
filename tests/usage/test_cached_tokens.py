"""Cached input tokens from the providers' SDK usage objects: openai's
``usage.prompt_tokens_details.cached_tokens`` (streamed and whole answers, and the
judge) against the local OpenAI stub; anthropic's ``cache_read_input_tokens``."""

from __future__ import annotations

from types import SimpleNamespace

from markus.llm.anthropic_provider import _usage as anthropic_usage
from markus.llm.base import CallContext
from markus.llm.openai_provider import OpenAIProvider
from markus.usage.prices import cost_of
from tests.llm.stub_openai import StubOpenAI

from .conftest import USAGE


def _provider(stub: StubOpenAI) -> OpenAIProvider:
    return OpenAIProvider(model="stub-model", base_url=stub.url, api_key="sk-test")


def test_a_streamed_openai_answer_reports_its_cached_input_tokens():
    with StubOpenAI([{"content": "hello"}], usage=USAGE) as stub:
        response = _provider(stub).complete(
            system="s", messages=[{"role": "user", "content": "hi"}], tools=[], context=CallContext()
        )
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.cached) == (100, 20, 40)


def test_a_whole_openai_answer_reports_its_cached_input_tokens():
    with StubOpenAI([{"content": "hello", "whole": True}], usage=USAGE) as stub:
        response = _provider(stub).complete(
            system="s", messages=[{"role": "user", "content": "hi"}], tools=[], context=CallContext()
        )
    assert response.usage.cached == 40


def test_the_openai_judge_reports_what_it_used():
    with StubOpenAI([{"content": "continue"}], usage=USAGE) as stub:
        context = CallContext(scenario="judge")
        word = _provider(stub).judge(current={"id": "a"}, new={"id": "b"}, context=context)
    assert word == "continue"
    assert context.usage is not None and context.usage.cached == 40


def test_a_server_without_prompt_caching_reports_none_cached():
    with StubOpenAI([{"content": "hello"}]) as stub:  # the stub's plain usage: no details
        response = _provider(stub).complete(
            system="s", messages=[{"role": "user", "content": "hi"}], tools=[], context=CallContext()
        )
    assert response.usage.cached == 0 and response.usage.prompt_tokens == 21


def test_anthropic_cache_reads_count_as_cached_input():
    usage = anthropic_usage(
        SimpleNamespace(input_tokens=10, cache_creation_input_tokens=5, cache_read_input_tokens=85, output_tokens=7)
    )
    assert (usage.prompt_tokens, usage.cached, usage.completion_tokens) == (100, 85, 7)


def test_cached_input_is_priced_at_the_cached_price(settings, monkeypatch):
    from markus.llm.base import Usage

    monkeypatch.setitem(settings.MARKUS, "PRICES", {"m": {"input": 2.0, "cachedInput": 0.5, "output": 8.0}})
    # 600 uncached at 2, 400 cached at 0.5, 100 out at 8 (per million)
    assert float(cost_of("m-2025-01-01", Usage(prompt_tokens=1000, completion_tokens=100, cached=400))) == 0.0022
    assert float(cost_of("unknown-model", Usage(prompt_tokens=1000))) == 0.0
