"""The misbehaving model server (tests/llm/misbehaving_model.py) driven through the real
`openai` SDK: what a consumer of the SDK sees for each kind of misbehaviour."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2
import openai
import pytest

from .misbehaving_model import (
    Behaviour,
    MisbehavingModel,
    Script,
    answer,
    call,
    calls,
    cut,
    delay_first_byte,
    empty,
    fenced_call,
    http_error,
    pieces,
    prompt_tokens,
    ramble,
    stall,
    stream_error,
    whole,
)

MESSAGES: list[Any] = [
    {"role": "system", "content": "You are Ada."},
    {"role": "user", "content": "What is in your mailbox?"},
]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {"name": "check_mailbox", "description": "d", "parameters": {"type": "object", "properties": {}}},
    }
]


@dataclass
class Seen:
    """What the SDK's stream gave, chunk by chunk, and how it ended."""

    chunks: int = 0
    text: str = ""
    finish_reasons: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, str]] = field(default_factory=dict)
    usage: Any = None
    error: BaseException | None = None


def client(model: MisbehavingModel, timeout: float | httpx2.Timeout = 5.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=model.url, api_key="x", max_retries=0, timeout=timeout)


def consume(model: MisbehavingModel, timeout: float | httpx2.Timeout = 5.0, **kwargs: Any) -> Seen:
    seen = Seen()
    try:
        stream = client(model, timeout).chat.completions.create(
            model="misbehaving",
            messages=kwargs.pop("messages", MESSAGES),
            stream=True,
            stream_options={"include_usage": True},
            **kwargs,
        )
        for chunk in stream:
            seen.chunks += 1
            if chunk.usage is not None:
                seen.usage = chunk.usage
            for choice in chunk.choices:
                seen.text += choice.delta.content or ""
                if choice.finish_reason:
                    seen.finish_reasons.append(choice.finish_reason)
                for tc in choice.delta.tool_calls or []:
                    slot = seen.tool_calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    slot["id"] += tc.id or ""
                    if tc.function is not None:
                        slot["name"] += tc.function.name or ""
                        slot["arguments"] += tc.function.arguments or ""
    except openai.OpenAIError as exc:
        seen.error = exc
    return seen


def serve(script: Script, **kwargs: Any) -> tuple[MisbehavingModel, Seen]:
    with MisbehavingModel(script) as model:
        seen = consume(model, **kwargs)
    return model, seen


def test_a_normal_answer_streams_its_text_then_stop_then_usage_with_the_prompt_estimate():
    model, seen = serve(answer("Nothing new in the mailbox."), tools=TOOLS)
    assert seen.error is None
    assert seen.text == "Nothing new in the mailbox." and seen.finish_reasons == ["stop"]
    body = model.requests[0].body
    assert seen.usage.prompt_tokens == prompt_tokens(body) == len(json.dumps(MESSAGES + TOOLS)) // 4 > 0
    assert seen.usage.completion_tokens == len(pieces("Nothing new in the mailbox.")) == 5
    assert seen.usage.total_tokens == seen.usage.prompt_tokens + 5


def test_the_usage_chunk_is_left_out_when_the_request_does_not_ask_for_it():
    with MisbehavingModel(answer("hi there")) as model:
        stream = client(model).chat.completions.create(model="m", messages=MESSAGES, stream=True)
        chunks = list(stream)
    assert all(c.usage is None for c in chunks) and chunks[-1].choices[0].finish_reason == "stop"


def test_tool_calls_arrive_in_pieces_and_assemble_into_names_and_arguments():
    _, seen = serve(calls([("check_mailbox", {"limit": 3}), ("ghost_tool", {"x": "y"})]), tools=TOOLS)
    assert seen.error is None and seen.finish_reasons == ["tool_calls"]
    assert [(tc["name"], json.loads(tc["arguments"])) for tc in seen.tool_calls.values()] == [
        ("check_mailbox", {"limit": 3}),
        ("ghost_tool", {"x": "y"}),
    ]
    assert [tc["id"] for tc in seen.tool_calls.values()] == ["call_0_0", "call_0_1"]


def test_a_script_can_repeat_one_refused_call_and_invent_tools_and_send_malformed_arguments():
    def script(body: dict[str, Any], n: int) -> Behaviour:
        if n < 2:
            return call("delete_everything", {"really": True})  # refused, asked again
        return call("no_such_tool", "{not json")

    with MisbehavingModel(script) as model:
        first, second, third = (consume(model, tools=TOOLS) for _ in range(3))
    assert first.tool_calls[0]["name"] == second.tool_calls[0]["name"] == "delete_everything"
    assert first.tool_calls[0]["id"] != second.tool_calls[0]["id"]
    assert third.tool_calls[0] == {"id": "call_2_0", "name": "no_such_tool", "arguments": "{not json"}
    assert model.calls == 3 and [r.body["tools"] for r in model.requests] == [TOOLS] * 3


def test_a_list_script_is_taken_in_turn_and_its_last_behaviour_repeats():
    with MisbehavingModel([answer("one"), answer("two")]) as model:
        texts = [consume(model).text for _ in range(4)]
    assert texts == ["one", "two", "two", "two"]
    arrivals = [r.at for r in model.requests]
    assert arrivals == sorted(arrivals) and all(r.path == "/v1/chat/completions" for r in model.requests)


def test_a_cut_stream_gives_its_first_chunks_then_a_connection_error_and_never_a_finish_reason():
    model, seen = serve(cut(3))
    assert seen.chunks == 3 and seen.text == "this answer "
    assert seen.finish_reasons == [] and seen.usage is None
    assert type(seen.error) is openai.APIConnectionError  # not its subclass APITimeoutError
    assert isinstance(seen.error.__cause__, httpx2.RemoteProtocolError)
    assert "incomplete chunked read" in str(seen.error.__cause__)
    assert model.disconnects == 0


def test_a_reset_connection_mid_stream_is_a_connection_error_too():
    _, seen = serve(cut(3, how="reset"))
    assert type(seen.error) is openai.APIConnectionError and isinstance(seen.error.__cause__, httpx2.TransportError)
    assert seen.finish_reasons == []


def test_a_stream_whose_http_body_ends_cleanly_but_unfinished_just_stops_without_a_finish_reason():
    _, seen = serve(cut(3, how="clean"))
    assert seen.error is None  # the SDK has nothing to complain about: only the consumer can tell
    assert seen.chunks == 3 and seen.finish_reasons == [] and seen.usage is None


def test_rambling_stops_at_max_tokens_with_finish_reason_length():
    _, seen = serve(ramble(), max_tokens=25)
    assert seen.error is None and seen.finish_reasons == ["length"]
    assert seen.text == "bla " * 25 and seen.usage.completion_tokens == 25


def test_rambling_heeds_max_completion_tokens_too():
    _, seen = serve(ramble("la"), max_completion_tokens=4)
    assert seen.text == "lalalala" and seen.finish_reasons == ["length"]


def test_rambling_without_a_maximum_stops_at_its_safety_cap():
    _, seen = serve(ramble(limit=60))
    assert seen.usage.completion_tokens == 60 and seen.finish_reasons == ["length"]
    _, seen = serve(ramble("x"))
    assert seen.text == "x" * 2000 and seen.finish_reasons == ["length"]


def test_a_first_byte_later_than_the_client_timeout_raises_a_timeout_error():
    started = time.monotonic()
    model, seen = serve(delay_first_byte(5), timeout=httpx2.Timeout(0.3))
    assert isinstance(seen.error, openai.APITimeoutError) and seen.chunks == 0
    assert time.monotonic() - started < 1.5
    assert model.disconnects == 1  # the server saw the client leave


def test_a_first_byte_within_the_timeout_is_only_late():
    started = time.monotonic()
    _, seen = serve(delay_first_byte(0.3, then=answer("late but here")), timeout=2.0)
    assert seen.text == "late but here" and seen.finish_reasons == ["stop"]
    assert time.monotonic() - started >= 0.3


def test_a_delayed_first_byte_can_lead_to_an_http_error():
    _, seen = serve(delay_first_byte(0.1, then=http_error(503, "overloaded")))
    assert isinstance(seen.error, openai.InternalServerError) and seen.error.status_code == 503


def test_a_stall_longer_than_the_read_timeout_raises_a_timeout_after_the_first_chunks():
    _, seen = serve(stall(2, 5), timeout=httpx2.Timeout(5.0, read=0.3))
    assert isinstance(seen.error, openai.APITimeoutError)
    assert seen.chunks == 2 and seen.finish_reasons == []


def test_a_short_stall_only_delays_the_rest_of_the_answer():
    started = time.monotonic()
    _, seen = serve(stall(2, 0.3, then=answer("slow but complete")), timeout=2.0)
    assert seen.text == "slow but complete" and seen.finish_reasons == ["stop"]
    assert time.monotonic() - started >= 0.3


def test_an_empty_answer_has_empty_content_and_finish_reason_stop():
    _, seen = serve(empty())
    assert seen.error is None and seen.text == "" and seen.finish_reasons == ["stop"]
    assert seen.usage.completion_tokens == 0 and seen.tool_calls == {}


def test_a_fenced_call_is_plain_text_in_a_json_code_fence_with_no_tool_calls():
    _, seen = serve(fenced_call("check_mailbox", {"limit": 3}), tools=TOOLS)
    assert seen.tool_calls == {} and seen.finish_reasons == ["stop"]
    assert seen.text.startswith("```json\n") and seen.text.endswith("\n```")
    assert json.loads(seen.text.removeprefix("```json\n").removesuffix("\n```")) == {
        "name": "check_mailbox",
        "arguments": {"limit": 3},
    }


def test_an_http_500_raises_internal_server_error_with_openais_error_body():
    _, seen = serve(http_error(500, "the model crashed"))
    assert isinstance(seen.error, openai.InternalServerError) and seen.error.status_code == 500
    assert seen.error.body == {"message": "the model crashed", "type": "server_error", "param": None, "code": None}


def test_a_429_raises_rate_limit_error_and_says_retry_after_zero():
    _, seen = serve(http_error(429, "slow down"))
    assert isinstance(seen.error, openai.RateLimitError)
    assert seen.error.response.headers["retry-after"] == "0"


def test_an_error_event_inside_the_stream_raises_api_error_with_its_message():
    _, seen = serve(stream_error(2, "upstream model failed"))
    assert type(seen.error) is openai.APIError and seen.error.message == "upstream model failed"
    assert seen.chunks == 2 and seen.finish_reasons == []


def test_a_request_without_stream_gets_one_json_completion():
    with MisbehavingModel(whole(calls([("check_mailbox", {"limit": 3})], text="Let me look."))) as model:
        r = client(model).chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS)
    message = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls" and message.content == "Let me look."
    assert message.tool_calls and (tool_call := message.tool_calls[0]).type == "function"
    assert tool_call.function.name == "check_mailbox" and json.loads(tool_call.function.arguments) == {"limit": 3}
    assert r.usage and r.usage.prompt_tokens == prompt_tokens(model.requests[0].body)


def test_a_server_that_cannot_stream_gives_the_streaming_sdk_no_chunk_at_all():
    _, seen = serve(whole(answer("all at once")))
    assert seen.error is None and seen.chunks == 0


def test_a_script_that_fails_answers_500_and_keeps_the_exception():
    def script(body: dict[str, Any], n: int) -> Behaviour:
        raise RuntimeError("bad script")

    model, seen = serve(script)
    assert isinstance(seen.error, openai.InternalServerError) and "bad script" in seen.error.message
    assert [str(e) for e in model.errors] == ["bad script"]


@pytest.mark.parametrize(
    "behaviour", [delay_first_byte(30), stall(2, 30), ramble(chunk_delay=1)], ids=["first_byte", "stall", "ramble"]
)
def test_leaving_the_context_stops_the_server_at_once_even_while_a_handler_sleeps(behaviour: Behaviour):
    seen: list[Seen] = []
    model = MisbehavingModel(behaviour)
    with model:
        reader = threading.Thread(target=lambda: seen.append(consume(model, timeout=10.0)), daemon=True)
        reader.start()
        deadline = time.monotonic() + 2
        while model.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        leaving = time.monotonic()
    assert time.monotonic() - leaving < 0.5
    reader.join(timeout=2)
    assert seen and isinstance(seen[0].error, openai.APIConnectionError) and seen[0].finish_reasons == []
