"""POST /api/agents/{id}/agentbus/drain with a body that is not a JSON object (issue
11, item 6b): null, a string, an array, a number or a boolean is a 400 with a message,
and nothing is drained. An empty body and ``{}`` still drain with the defaults."""

from __future__ import annotations

import pytest

from agentbus import selectors
from agentbus.models import ConsumerCursor

from .conftest import say

pytestmark = [pytest.mark.django_db, pytest.mark.pg]

DRAIN = "/api/agents/eve/agentbus/drain"


@pytest.mark.parametrize("raw", ["null", '"drain"', '"{}"', "[]", '[{"peek": false}]', "42", "true", "false"])
def test_a_body_that_is_not_a_json_object_is_refused_and_drains_nothing(eve, max_, raw):
    say(max_, eve, "one")
    say(max_, eve, "two")

    response = eve.client().post(DRAIN, data=raw, content_type="application/json")

    assert response.status_code == 400, response.content
    assert response.json()["detail"] == "body must be a JSON object"
    assert selectors.pending_count("eve") == 2
    assert not ConsumerCursor.objects.exists()


@pytest.mark.parametrize("raw", ["", "{}"])
def test_an_empty_body_or_an_empty_object_drains_with_the_defaults(eve, max_, raw):
    say(max_, eve, "one")

    response = eve.client().post(DRAIN, data=raw, content_type="application/json")

    assert response.status_code == 200, response.content
    assert [m["payload"]["text"] for m in response.json()["messages"]] == ["one"]
    assert selectors.pending_count("eve") == 0


def test_an_outsider_still_gets_404_before_the_body_is_judged(zed, eve):
    response = zed.client().post(DRAIN, data="null", content_type="application/json")
    assert response.status_code == 404
