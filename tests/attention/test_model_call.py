"""The one seam of every model call (``attention.model_call``): its back-off, its
``max_tokens``, which errors it tries again, its deadline; and how a long session is
made to fit the model's context (``attention.compaction``)."""

from __future__ import annotations

import pytest

from attention.compaction import CUT_NOTE, KEEP_LATEST, compact
from attention.lease import lease_take
from attention.model_call import ProviderFailed, backoff, max_tokens_for, model_call
from attention.models import LLMSession
from markus.llm.base import CallContext, get_provider
from markus.usage.models import LLMCall
from tests.llm.misbehaving_model import MisbehavingModel, answer, http_error, ramble, stall

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def own_settings(settings):
    """A copy of MARKUS for the test: what it changes in it is gone after it."""
    settings.MARKUS = dict(settings.MARKUS)


@pytest.fixture(autouse=True)
def forget_leases():
    yield
    _leases.clear()


@pytest.fixture
def served(settings, monkeypatch):
    def serve(script) -> MisbehavingModel:
        server = MisbehavingModel(script).__enter__()
        stack.append(server)
        for key, value in {"LLM_PROVIDER": "openai", "LLM_BASE_URL": server.url, "LLM_MODEL": "m"}.items():
            monkeypatch.setitem(settings.MARKUS, key, value)
        return server

    stack: list[MisbehavingModel] = []
    yield serve
    for server in stack:
        server.__exit__(None, None, None)


_leases: dict[str, object] = {}


def call(agent, scenario: str = "chat") -> str:
    lease = _leases.get(agent.id) or lease_take(agent.id)
    assert lease is not None
    _leases[agent.id] = lease
    context = CallContext(scenario=scenario, agent_name=agent.name, item={"id": "mbx_test"})
    response = model_call(
        lease,
        get_provider(),
        system="You are Ada.",
        messages=[{"role": "user", "content": "hi"}],
        tools=[],
        context=context,
        during="a test",
    )
    return response.text


def test_the_back_off_doubles_with_jitter_is_capped_and_honours_retry_after(settings):
    settings.MARKUS["LLM_BACKOFF_S"], settings.MARKUS["LLM_BACKOFF_CAP_S"] = 2.0, 10.0
    for attempt, base in ((0, 2.0), (1, 4.0), (2, 8.0)):
        waits = {backoff(attempt) for _ in range(50)}
        assert all(base * 0.5 <= w <= min(10.0, base * 1.5) for w in waits) and len(waits) > 1
    assert backoff(6) == 10.0  # the cap
    assert backoff(0, retry_after=7.0) == 7.0  # a server's Retry-After is waited for


def test_max_tokens_come_from_the_scenario_unless_the_settings_say(settings):
    settings.MARKUS["LLM_MAX_TOKENS"] = ""
    assert (max_tokens_for("chat"), max_tokens_for("task_execution"), max_tokens_for("triage")) == (1024, 2048, 512)
    settings.MARKUS["LLM_MAX_TOKENS"] = "chat=300, task_execution=4096"
    assert (max_tokens_for("chat"), max_tokens_for("task_execution"), max_tokens_for("review")) == (300, 4096, 1024)
    settings.MARKUS["LLM_MAX_TOKENS"] = "2048"
    assert max_tokens_for("triage") == 2048


def test_a_max_tokens_setting_in_digits_int_cannot_read_is_passed_over(settings):
    settings.MARKUS["LLM_MAX_TOKENS"] = "chat=\u00b3, task_execution=4096"  # "³".isdigit() is true
    assert (max_tokens_for("chat"), max_tokens_for("task_execution")) == (1024, 4096)


def test_a_429_is_tried_again_after_its_retry_after_and_a_400_is_not(agent, served):
    server = served([http_error(429, "slow down", retry_after="0"), answer("hello")])
    assert call(agent) == "hello" and server.calls == 2
    assert server.requests[0].body["max_tokens"] == max_tokens_for("chat")
    refused = served(http_error(400, "bad request"))
    with pytest.raises(ProviderFailed, match="HTTP 400"):
        call(agent)
    assert refused.calls == 1  # a request the server refuses is not sent again
    assert list(LLMCall.objects.values_list("error", flat=True).order_by("id")) == [
        "HTTP 429 RateLimitError",
        "",
        "HTTP 400 BadRequestError: bad request",
    ]


def test_a_refused_request_is_told_with_the_providers_words(agent, served):
    """A model whose context is smaller than the request: "HTTP 400 BadRequestError" was
    all the person was told of why, and all the operator could read in the usage."""
    said = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens."
    served(http_error(400, said, type="invalid_request_error"))
    with pytest.raises(ProviderFailed, match="maximum context length is 8192 tokens"):
        call(agent)
    assert LLMCall.objects.get().error == f"HTTP 400 BadRequestError: {said}"


def test_an_authentication_refusal_quotes_nothing_of_the_key(agent, served):
    served(http_error(401, "Incorrect API key provided: sk-proj-****************abcd.", type="invalid_api_key"))
    with pytest.raises(ProviderFailed, match="HTTP 401"):
        call(agent)
    assert LLMCall.objects.get().error == "HTTP 401 AuthenticationError"


def test_a_stream_that_stalls_between_chunks_past_the_timeout_is_given_up(agent, served, settings):
    settings.MARKUS["LLM_TIMEOUT_S"], settings.MARKUS["LLM_RETRIES"] = 0.3, 0
    served(stall(3, 2.0, answer("one two three four five")))
    with pytest.raises(ProviderFailed, match="timed out"):
        call(agent)


def test_a_stream_kept_alive_past_the_calls_time_limit_is_given_up(agent, served, settings):
    settings.MARKUS["LLM_CALL_MAX_S"], settings.MARKUS["LLM_RETRIES"] = 0.6, 0
    server = served(ramble("word ", chunk_delay=0.05))  # never idle long enough for the read timeout
    with pytest.raises(ProviderFailed, match="time limit"):
        call(agent)
    assert server.calls == 1


def test_a_long_session_is_cut_to_fit_the_context_keeping_its_goal_and_latest_turns(agent, settings):
    settings.MARKUS["LLM_CONTEXT_TOKENS"], settings.MARKUS["LLM_COMPACT_AT"] = 4000, 0.75
    goal = {"role": "user", "content": "Refactor the login form. " * 20}
    turns = []
    for n in range(12):
        turns.append({"role": "assistant", "content": "", "tool_calls": [{"id": f"c{n}", "function": {"name": "x"}}]})
        turns.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"result {n} " + "x" * 2000})
    session = LLMSession(id="ses_t", agent_id=agent.id, scenario="chat", messages=[goal, *turns])
    assert compact(session, system="You are Ada.", tools=[])
    messages = session.messages
    assert messages[0] == goal
    assert messages[-KEEP_LATEST:] == turns[-KEEP_LATEST:]  # the latest turns whole
    cut = [m for m in messages if m["content"].startswith(CUT_NOTE.split("{")[0])]
    assert cut and cut[0]["content"].startswith("[cut to fit the model's context: 2009 characters; it began: result 0")
    assert len(str(messages)) // 4 <= 3000
    assert not compact(session, system="You are Ada.", tools=[])  # it fits now: nothing more is cut
