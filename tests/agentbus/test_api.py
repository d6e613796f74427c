"""The AgentBus REST surface as CONTRACT.md spells it, and who may use it."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from agentbus import selectors, services
from agentbus.models import AuditEvent
from tests.conftest import client_for

from .conftest import conversations, say


def session_client(user) -> APIClient:
    """A logged-in browser session: works for the async views as well as DRF's."""
    client = APIClient()
    client.force_login(user)
    return client


pytestmark = pytest.mark.django_db

CHUNK_KEYS = {"streamId", "sequence", "sender", "senderName", "senderTeam", "topic", "payload", "createdAt"}


def test_open_append_close_and_events_over_rest(eve, max_):
    client = eve.client()
    opened = client.post(
        "/api/agentbus/streams",
        {"streamId": "correction-1", "sender": "eve", "recipient": "max", "topic": "review"},
        format="json",
    )
    assert opened.status_code == 201, opened.content
    assert opened.json()["streamId"] == "correction-1" and opened.json()["recipient"] == "max"
    appended = client.post(
        "/api/agentbus/streams/correction-1/append",
        {"sender": "eve", "payload": {"text": "stop, wrong file"}},
        format="json",
    )
    assert appended.status_code == 201
    assert set(appended.json()) == CHUNK_KEYS and appended.json()["sequence"] == 1
    assert appended.json()["topic"] == "review"
    closed = client.post("/api/agentbus/streams/correction-1/close", {"sender": "eve"}, format="json")
    assert closed.status_code == 200 and closed.json()["closed"] is True
    late = client.post(
        "/api/agentbus/streams/correction-1/append", {"sender": "eve", "payload": {"text": "late"}}, format="json"
    )
    assert late.status_code == 409
    events = max_.client().get("/api/agentbus/streams/correction-1/events", {"after": 0}).json()
    assert [e["payload"]["text"] for e in events["events"]] == ["stop, wrong file"] and events["closed"]


def test_a_group_stream_over_rest(eve, max_, ada):
    response = eve.client().post("/api/agentbus/streams", {"sender": "eve", "members": ["max", "ada"]}, format="json")
    assert response.status_code == 201 and response.json()["members"] == ["ada", "eve", "max"]


def test_an_agent_token_acts_only_as_its_agent(eve, max_):
    response = eve.client().post("/api/agentbus/streams", {"sender": "max", "recipient": "eve"}, format="json")
    assert response.status_code == 404


def test_an_agent_cannot_address_an_agent_outside_its_team_and_owner(eve, zed):
    response = eve.client().post("/api/agentbus/streams", {"sender": "eve", "recipient": "zed"}, format="json")
    assert response.status_code == 404
    assert not conversations().exists()


def test_a_stream_of_others_answers_404(eve, max_, ada, zed):
    say(max_, ada, "private")
    stream_id = conversations().get().id
    for client in (eve.client(), zed.client()):
        assert client.get(f"/api/agentbus/streams/{stream_id}/events").status_code == 404
        assert (
            client.post(
                f"/api/agentbus/streams/{stream_id}/append", {"sender": "eve", "payload": {}}, format="json"
            ).status_code
            == 404
        )
    assert eve.client().get("/api/agentbus/streams/nope/events").status_code == 404


def test_the_recipient_may_not_close_or_append_to_a_direct_stream(eve, max_):
    say(eve, max_, "hi")
    stream_id = conversations().get().id
    client = max_.client()
    assert client.post(f"/api/agentbus/streams/{stream_id}/close", {"sender": "max"}, format="json").status_code == 403
    assert (
        client.post(
            f"/api/agentbus/streams/{stream_id}/append", {"sender": "max", "payload": {}}, format="json"
        ).status_code
        == 403
    )


@pytest.mark.parametrize(
    "body, status",
    [
        ({"sender": "eve"}, 400),
        ({"sender": "eve", "recipient": "max", "members": ["ada"]}, 400),
        ({"sender": "eve", "members": "max"}, 400),
        ({"sender": "eve", "recipient": "max", "streamId": "bad id"}, 400),
        ({"sender": "eve", "recipient": "max", "topic": 5}, 400),
        ({"sender": "eve", "recipient": "ghost"}, 404),
        ({"sender": "ghost", "recipient": "max"}, 404),
    ],
)
def test_bad_open_requests_answer_4xx(eve, max_, ada, body, status):
    assert eve.client().post("/api/agentbus/streams", body, format="json").status_code == status


def test_a_user_who_controls_the_agent_may_use_the_bus_for_it(alice, bob, eve, max_):
    response = client_for(alice).post("/api/agentbus/streams", {"sender": "eve", "recipient": "max"}, format="json")
    assert response.status_code == 201
    assert AuditEvent.objects.get(action="open").actor == f"user:{alice.pk}"


def test_a_teammate_who_watches_the_agent_may_not_speak_as_it(alice, bob, eve, max_):
    response = client_for(bob).post("/api/agentbus/streams", {"sender": "eve", "recipient": "max"}, format="json")
    assert response.status_code == 403
    assert "owner" in response.json()["detail"]
    assert not AuditEvent.objects.filter(action="open").exists()


def test_an_outsider_sees_nothing(charlie, eve, max_):
    say(eve, max_, "hi")
    client = session_client(charlie)
    assert client.post("/api/agentbus/streams", {"sender": "eve", "recipient": "max"}, format="json").status_code == 404
    assert client.get("/api/agents/max/agentbus/pending").status_code == 404
    assert client.get("/api/agents/max/agentbus/inbox", {"timeout_seconds": 0}).status_code == 404
    assert client.post("/api/agents/max/agentbus/drain", {"peek": True}, format="json").status_code == 404


def test_pending_and_drain_over_rest(eve, max_):
    say(max_, eve, "one")
    client = eve.client()
    assert client.get("/api/agents/eve/agentbus/pending").json() == {"agentId": "eve", "pending": 1}
    peeked = client.post("/api/agents/eve/agentbus/drain", {"peek": True}, format="json").json()
    assert len(peeked["messages"]) == 1 and peeked["next_cursor"]
    drained = client.post("/api/agents/eve/agentbus/drain", {}, format="json").json()
    assert set(drained) == {"messages", "next_cursor"} and set(drained["messages"][0]) == CHUNK_KEYS
    assert client.get("/api/agents/eve/agentbus/pending").json()["pending"] == 0


def test_a_message_says_who_sent_it_by_name_and_team(eve, max_, zed, team):
    say(max_, eve, "one")
    drained = eve.client().post("/api/agents/eve/agentbus/drain", {}, format="json").json()
    message = drained["messages"][0]
    assert (message["sender"], message["senderName"]) == ("max", "Max")
    assert message["senderTeam"] == {"id": team.id, "name": "Core"}
    say(zed, eve, "from outside")  # zed is in no team
    hub = services.stream_open(sender=None, recipient=eve.agent)  # the operator's records come from the hub
    services.stream_append(stream_id=hub.id, sender=None, payload={"text": "from the hub"})
    later = [(m["sender"], m["senderName"], m["senderTeam"]) for m in selectors.inbox_read("eve")["messages"]]
    assert later == [("zed", "Zed", None), ("markus:operator", "Markus operator", None)]


@pytest.mark.parametrize("body", [{"peek": "yes"}, {"limit": 0}, {"limit": "5"}, {"limit": 10_000}])
def test_bad_drain_requests_answer_400(eve, body):
    assert eve.client().post("/api/agents/eve/agentbus/drain", body, format="json").status_code == 400


def test_the_inbox_is_self_only_for_agent_tokens(eve, max_):
    say(max_, eve, "for eve")
    client = max_.client()
    assert client.get("/api/agents/eve/agentbus/inbox", {"timeout_seconds": 0}).status_code == 404
    assert client.get("/api/agents/eve/agentbus/pending").status_code == 404
    assert client.post("/api/agents/eve/agentbus/drain", {"peek": True}, format="json").status_code == 404


def test_a_user_reads_an_agents_inbox_but_only_the_agent_consumes_it(alice, eve, max_):
    say(max_, eve, "for eve")
    client = session_client(alice)
    waited = client.get("/api/agents/eve/agentbus/inbox", {"timeout_seconds": 0})
    assert waited.status_code == 200 and len(waited.json()["messages"]) == 1
    assert client.post("/api/agents/eve/agentbus/drain", {"peek": True}, format="json").status_code == 200
    assert client.post("/api/agents/eve/agentbus/drain", {}, format="json").status_code == 403
    # A user's wait with a cursor does not acknowledge it on the agent's behalf.
    client.get("/api/agents/eve/agentbus/inbox", {"timeout_seconds": 0, "after_cursor": waited.json()["next_cursor"]})
    assert client.get("/api/agents/eve/agentbus/pending").json()["pending"] == 1


@pytest.mark.parametrize(
    "header, status",
    [
        (None, 401),
        ("Bearer nope", 401),
        ("Bearer", 401),
        ("Token nope", 401),
    ],
)
def test_the_inbox_needs_valid_credentials(eve, header, status):
    client = APIClient()
    if header:
        client.credentials(HTTP_AUTHORIZATION=header)
    assert client.get("/api/agents/eve/agentbus/inbox", {"timeout_seconds": 0}).status_code == status


def test_the_inbox_accepts_a_user_api_token(eve, max_, alice_token):
    say(max_, eve, "hi")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {alice_token}")
    assert len(client.get("/api/agents/eve/agentbus/inbox", {"timeout_seconds": 0}).json()["messages"]) == 1


@pytest.mark.parametrize(
    "query",
    [{"timeout_seconds": "soon"}, {"timeout_seconds": -1}, {"timeout_seconds": 10**6}, {"limit": 0}, {"limit": "x"}],
)
def test_bad_inbox_parameters_answer_400(eve, query):
    assert eve.client().get("/api/agents/eve/agentbus/inbox", query).status_code == 400


def test_the_inbox_answers_the_contracts_shape_and_times_out_with_a_cursor(eve):
    body = eve.client().get("/api/agents/eve/agentbus/inbox", {"timeout_seconds": 0.1}).json()
    assert body["messages"] == [] and body["timed_out"] is True and body["next_cursor"]


def test_agent_api_carries_pending_inbox(alice, eve, max_, ada):
    say(max_, eve, "one")
    say(ada, eve, "two")
    client = client_for(alice)
    assert client.get("/api/agents/eve/").json()["pendingInbox"] == 2
    rows = {r["id"]: r for r in client.get("/api/agents/", {"inbox": 1}).json()}
    assert rows["eve"]["pendingInboxCount"] == 2 and rows["max"]["pendingInboxCount"] == 0
    assert "pendingInboxCount" not in client.get("/api/agents/").json()[0]


def test_a_message_past_the_size_limit_is_refused_with_the_limit_and_nothing_is_stored(eve, max_):
    from agentbus.models import Chunk
    from markus.core.limits import BUS_PAYLOAD_MAX_CHARS

    client = eve.client()
    opened = client.post("/api/agentbus/streams", {"sender": "eve", "recipient": "max"}, format="json")
    stream_id = opened.json()["streamId"]
    big = {"sender": "eve", "payload": {"text": "x" * BUS_PAYLOAD_MAX_CHARS}}
    refused = client.post(f"/api/agentbus/streams/{stream_id}/append", big, format="json")
    assert refused.status_code == 400, refused.content
    assert f"at most {BUS_PAYLOAD_MAX_CHARS}" in refused.json()["detail"]
    assert not Chunk.objects.filter(stream_id=stream_id).exists()
    small = {"sender": "eve", "payload": {"text": "x" * (BUS_PAYLOAD_MAX_CHARS - 20)}}
    assert client.post(f"/api/agentbus/streams/{stream_id}/append", small, format="json").status_code == 201
