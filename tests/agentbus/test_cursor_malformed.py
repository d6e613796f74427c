"""A cursor that cannot be trusted is ignored, never applied: no 5xx, nothing missed.
(The seed's bug: ``not-a-cursor`` sorted above every timestamp and hid the inbox.)"""

from __future__ import annotations

import base64
import json

import pytest

from agentbus import selectors
from agentbus.cursors import MAX_CURSOR_LENGTH, encode_cursor

from .conftest import say

pytestmark = [pytest.mark.django_db, pytest.mark.pg]


def _b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode()


MALFORMED = {
    "garbage": "not-a-cursor",
    "empty": "",
    "whitespace": "   ",
    "negative": encode_cursor("eve", -5),
    "future": encode_cursor("eve", 10**12),
    "overlong": "A" * (MAX_CURSOR_LENGTH + 1),
    "overlong-valid-prefix": encode_cursor("eve", 1) + "A" * MAX_CURSOR_LENGTH,
    "another agent's": "OTHER",  # replaced by max's real cursor in the test
    "json not object": _b64([1, 2, 3]),
    "position a string": _b64({"v": 1, "a": "eve", "p": "9"}),
    "position a bool": _b64({"v": 1, "a": "eve", "p": True}),
    "position a float": _b64({"v": 1, "a": "eve", "p": 1.5}),
    "unknown version": _b64({"v": 2, "a": "eve", "p": 1}),
    "not base64": "%%%%",
    "non-ascii": "cürsor",
    "nul bytes": "\x00\x00",
    "seed-style pair": "2026-08-21T03:15:00Z|chk_1",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_cursor_is_ignored_and_nothing_is_missed(eve, max_, ada, name):
    say(max_, eve, "first")
    say(ada, eve, "second")
    say(eve, max_, "for max")
    say(eve, max_, "for max again")
    cursor = MALFORMED[name]
    if cursor == "OTHER":
        cursor = selectors.inbox_read("max")["next_cursor"]  # ahead of eve's messages
    result = selectors.inbox_read("eve", after_cursor=cursor)
    assert [m["payload"]["text"] for m in result["messages"]] == ["first", "second"]
    assert selectors.inbox_read("eve", after_cursor=result["next_cursor"])["messages"] == []


@pytest.mark.parametrize("name", list(MALFORMED))
def test_the_inbox_endpoint_never_fails_on_a_malformed_cursor(eve, max_, name):
    say(max_, eve, "hello")
    cursor = MALFORMED[name]
    if cursor == "OTHER":
        cursor = encode_cursor("max", 1)
    response = eve.client().get("/api/agents/eve/agentbus/inbox", {"after_cursor": cursor, "timeout_seconds": 0})
    if "\x00" in cursor:  # NUL in a query parameter is refused at the edge (ARCHITECTURE decision 12)
        assert response.status_code == 400, response.content
        assert "NUL" in response.json()["detail"]
        return
    assert response.status_code == 200, response.content
    body = response.json()
    assert [m["payload"]["text"] for m in body["messages"]] == ["hello"]
    assert body["next_cursor"] and body["timed_out"] is False


def test_an_ignored_cursor_falls_back_to_the_consumer_cursor_not_past_it(eve, max_):
    from agentbus import services

    say(max_, eve, "drained")
    services.inbox_drain(agent_id="eve")
    say(max_, eve, "new")
    result = selectors.inbox_read("eve", after_cursor="garbage")
    assert [m["payload"]["text"] for m in result["messages"]] == ["new"]
