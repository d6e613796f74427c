"""The provider is built once per process for its settings (issue 12): building one per
call (an SDK client with its own connection pool, on every LLM call and every mind-view
render) cost more than a call to the offline brain."""

from __future__ import annotations

import threading

from markus.llm import base
from markus.llm.base import get_provider


def test_the_offline_brain_is_built_once(settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "LLM_PROVIDER", "offline")
    assert get_provider() is get_provider()


def test_an_openai_client_is_built_once_per_configuration(settings, monkeypatch):
    for key, value in {
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "LLM_API_KEY": "sk-test",
        "LLM_MODEL": "one",
    }.items():
        monkeypatch.setitem(settings.MARKUS, key, value)
    first = get_provider()
    assert get_provider() is first
    assert get_provider().client is first.client  # type: ignore[attr-defined]
    monkeypatch.setitem(settings.MARKUS, "LLM_MODEL", "two")  # another configuration, another client
    second = get_provider()
    assert second is not first and second.model == "two"  # type: ignore[attr-defined]
    monkeypatch.setitem(settings.MARKUS, "LLM_MODEL", "one")
    assert get_provider() is first


def test_threads_share_one_provider(settings, monkeypatch):
    monkeypatch.setitem(settings.MARKUS, "LLM_PROVIDER", "offline")
    base._built.clear()
    seen: list[object] = []
    barrier = threading.Barrier(8)

    def take() -> None:
        barrier.wait()
        seen.append(get_provider())

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(p) for p in seen}) == 1


def test_an_anthropic_client_is_built_once_per_configuration(settings, monkeypatch):
    for key, value in {
        "LLM_PROVIDER": "anthropic",
        "LLM_BASE_URL": "http://127.0.0.1:9",
        "LLM_API_KEY": "sk-ant-test",
        "LLM_MODEL": "",
    }.items():
        monkeypatch.setitem(settings.MARKUS, key, value)
    first = get_provider()
    assert first.name == "anthropic" and first.model  # type: ignore[attr-defined]  # a default model
    assert get_provider() is first and get_provider().client is first.client  # type: ignore[attr-defined]
    monkeypatch.setitem(settings.MARKUS, "LLM_MODEL", "another")
    assert get_provider() is not first
