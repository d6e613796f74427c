"""The MCP door is bounded (issue 36, point 5): it speaks the SDK's current protocol
revision; nothing is pushed outside a call, so ``GET /mcp/`` answers 405 and no
``subscriptions/listen`` stream is served (a standing stream of pings was held by
nobody's wait cap); a NUL or a lone surrogate in any string argument of any tool is a
tool error naming the argument, never a database error; ``manage.py mcp --hub`` that
cannot serve prints one JSON line on stderr and exits non-zero."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx2
import mcp_types
import pytest
from django.contrib.auth.models import AnonymousUser
from mcp import Client
from mcp.shared.exceptions import MCPError

from agentbus import mcp_door
from markus.agents.auth import Caller

from .hub_server import free_port
from .test_cli_json_errors import failed, shell
from .test_mcp_door import TOOLS, over_http

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.pg]

EVENT_STREAM = {"Accept": "text/event-stream"}


def test_the_door_speaks_the_sdks_latest_protocol_revision(hub, eve):
    async def scenario() -> str:
        async with over_http(hub.url, eve.token) as mcp:
            await mcp.list_tools()
            return mcp.protocol_version

    assert asyncio.run(scenario()) == mcp_types.LATEST_PROTOCOL_VERSION == "2026-07-28"


@pytest.mark.parametrize("revision", [None, "2025-11-25", "2026-07-28"])
def test_get_on_the_door_answers_405_allowing_post(hub, eve, revision):
    headers = {"Authorization": f"Bearer {eve.token}", **EVENT_STREAM}
    if revision:
        headers["MCP-Protocol-Version"] = revision
    with httpx2.stream("GET", f"{hub.url}/mcp/", headers=headers, timeout=10) as r:
        assert r.status_code == 405, r.headers
        assert r.headers["allow"] == "POST"


def test_subscriptions_listen_is_not_served(hub, eve):
    async def scenario() -> MCPError:
        async with over_http(hub.url, eve.token) as mcp:
            with pytest.raises(MCPError) as refused:
                async with mcp.listen(tools_list_changed=True):
                    pass
            return refused.value

    assert "not found" in str(asyncio.run(scenario())).lower()


def _as_eve(eve: Any) -> mcp_door.Identify:
    async def identify(ctx: object) -> Caller:
        return Caller(AnonymousUser(), eve.agent)

    return identify


def _string_arguments(tool: Any) -> list[str]:
    def is_string(schema: dict[str, Any]) -> bool:
        return schema.get("type") == "string" or any(is_string(s) for s in schema.get("anyOf", []))

    return [name for name, schema in tool.input_schema["properties"].items() if is_string(schema)]


@pytest.mark.parametrize("bad, reason", [("\x00", "NUL bytes"), ("\ud800", "lone surrogates")])
def test_a_bad_character_in_any_string_argument_is_a_tool_error_naming_it(eve, max_, bad, reason, caplog):
    async def scenario() -> dict[tuple[str, str], tuple[bool, str]]:
        answers = {}
        async with Client(mcp_door.build(_as_eve(eve))) as mcp:
            tools = (await mcp.list_tools()).tools
            assert {t.name for t in tools} == TOOLS
            for tool in tools:
                for argument in _string_arguments(tool):
                    result = await mcp.call_tool(tool.name, {argument: f"max{bad}"})
                    answers[tool.name, argument] = (result.is_error, result.content[0].text)
            nested = await mcp.call_tool("bus_send", {"to": "max", "payload": {"note": {"body": f"a{bad}"}}})
            answers["bus_send", "payload.note.body"] = (nested.is_error, nested.content[0].text)
        return answers

    with caplog.at_level(logging.INFO):
        answers = asyncio.run(scenario())
    assert len(answers) >= 20 and {tool for tool, _ in answers} >= TOOLS - {"agent_list_colleagues", "inbox_drain"}
    for (tool, argument), (is_error, text) in answers.items():
        assert is_error and text == f"{argument}: {reason} are not allowed", (tool, argument, text)
    assert "unexpected exception" not in caplog.text and "Traceback" not in caplog.text


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


# Per JSON type, the values that broke a door before: too long, too large for a column or
# a float, too deep, too many keys; a value of every other type is tried as well.
JUNK: dict[str, list[Any]] = {
    "string": ["", " ", "x" * 300_000, "ä" * 5000, "%", "-1", "9" * 400, "ag1/../x", "\n", "*", "'; drop table x; --"],
    "integer": [0, -1, -(2**63), 2**63, 10**40],
    "number": [0, -1, -1e308, 1e308, 10**40, 1e-320],
    "boolean": [True, False],
    "object": [{}, {"": 1}, _nested(120), _nested(60), {str(i): i for i in range(20_000)}],
    "array": [[], [None], list(range(20_000)), ["x"] * 1000],
    "null": [None],
}
# What an answer may not show: a crash told as it happened, not an error of the caller's.
CRASH = ("Traceback", "object has no attribute", "KeyError", "TypeError", "IntegrityError", "DataError")
CRASH += ("OperationalError", "not JSON serializable", "unexpected", "Internal", "overflow", "recursion")


def _types(schema: dict[str, Any]) -> list[str]:
    declared = schema.get("type")
    if declared:
        return declared if isinstance(declared, list) else [declared]
    return [t for s in schema.get("anyOf", []) + schema.get("oneOf", []) for t in _types(s)] or ["string", "object"]


def test_junk_of_any_type_in_any_argument_is_a_tool_error_never_a_crash(eve, max_, caplog):
    async def scenario() -> list[tuple[str, str, str, str]]:
        crashed = []
        async with Client(mcp_door.build(_as_eve(eve))) as mcp:
            for tool in (await mcp.list_tools()).tools:
                for argument, schema in tool.input_schema.get("properties", {}).items():
                    kinds = _types(schema)
                    values = [v for k in kinds for v in JUNK.get(k, [])]
                    values += [v for k, vs in JUNK.items() if k not in kinds for v in vs[:2]]
                    for value in values:
                        arguments = {argument: value}
                        if argument != "timeout_seconds" and "timeout_seconds" in tool.input_schema["properties"]:
                            arguments["timeout_seconds"] = 0  # a wait answers at once
                        try:
                            result = await asyncio.wait_for(mcp.call_tool(tool.name, arguments), 30)
                        except MCPError as error:
                            crashed.append((tool.name, argument, repr(value)[:60], f"MCPError {error}"[:300]))
                            continue
                        text = "".join(getattr(c, "text", "") for c in result.content)
                        if result.is_error and any(word in text for word in CRASH):
                            crashed.append((tool.name, argument, repr(value)[:60], text[:300]))
        return crashed

    with caplog.at_level(logging.INFO):
        assert asyncio.run(scenario()) == []
    logged = [r.getMessage()[:300] for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert logged == [] and "Traceback" not in caplog.text


def test_mcp_hub_with_a_bad_token_prints_one_json_line_and_exits_non_zero(hub):
    error = failed(shell("mcp", "--hub", hub.url, "--token", "not-a-token"))
    assert error["code"] == "not_authenticated" and error["status"] == 401, error
    assert hub.url in error["error"] and "token" in error["error"], error


def test_mcp_hub_that_is_unreachable_prints_one_json_line_and_exits_non_zero():
    url = f"http://127.0.0.1:{free_port()}"
    error = failed(shell("mcp", "--hub", url, "--token", "whatever"))
    assert error["code"] == "unreachable" and url in error["error"], error
