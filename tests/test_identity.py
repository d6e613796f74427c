"""Identity (issue 11, item 6): who an item is from is never taken from the body, a
caller-chosen id reveals nothing about objects the caller may not see, and user API
tokens are stored only as a hash.

alice owns the team's agents, charlie is an outsider with agents of his own.
"""

from __future__ import annotations

import importlib
from io import StringIO
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from agentbus.models import Stream
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType as T
from markus.agents.models import Agent, Team, UserToken, hash_token
from markus.agents.services import agent_create, user_token_create

from .conftest import client_for

pytestmark = pytest.mark.django_db


def bearer(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def user_token_client(raw: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    return client


# ------------------------------------------------------------------------ senders

FAKE_AGENT = {"senderRole": "agent", "senderId": "ada", "senderName": "Ada"}


def test_a_user_cannot_stamp_a_fake_agent_sender_on_a_mailbox_item(agent, alice, alice_client):
    response = alice_client.post(
        f"/api/agents/{agent.id}/mailbox",
        {"sourceType": T.TASK_COMMENT, "payload": {"taskId": "t"}, "metadata": {**FAKE_AGENT, "channel": "web"}},
        format="json",
    )
    assert response.status_code == 201, response.content
    stamped = {"senderRole": "user", "senderId": str(alice.pk), "senderName": "alice"}
    body = response.json()
    assert {k: body["metadata"][k] for k in stamped} == stamped
    assert body["metadata"]["channel"] == "web"  # the rest of the metadata is kept
    stored = MailboxItem.objects.get(id=body["id"])
    assert {k: stored.metadata[k] for k in stamped} == stamped


def test_a_user_cannot_pose_as_another_user_or_the_system(agent, alice, alice_client):
    for fake in ({"senderRole": "user", "senderId": "999", "senderName": "root"}, {"senderRole": "system"}):
        response = alice_client.post(
            f"/api/agents/{agent.id}/mailbox",
            {"sourceType": T.MENTION, "payload": {"summary": "hi"}, "metadata": fake},
            format="json",
        )
        assert response.status_code == 201
        meta = response.json()["metadata"]
        assert (meta["senderRole"], meta["senderId"], meta["senderName"]) == ("user", str(alice.pk), "alice")


def test_an_agent_token_is_stamped_as_its_agent_whatever_the_body_says(agent_with_token):
    own, raw = agent_with_token
    response = bearer(raw).post(
        f"/api/agents/{own.id}/mailbox",
        {"sourceType": T.MENTION, "payload": {"summary": "hi"}, "metadata": {"senderName": "Grace", "senderId": "x"}},
        format="json",
    )
    meta = response.json()["metadata"]
    assert (meta["senderRole"], meta["senderId"], meta["senderName"]) == ("agent", own.id, own.name)


# ----------------------------------------------------------- ids that reveal nothing


@pytest.fixture
def zed(charlie):
    return agent_create(name="Zed", kind=Agent.Kind.EXTERNAL, owner=charlie, agent_id="zed")


@pytest.fixture
def zoe(charlie):
    return agent_create(name="Zoe", kind=Agent.Kind.EXTERNAL, owner=charlie, agent_id="zoe")


def test_an_agent_id_taken_in_another_team_answers_like_an_id_the_caller_holds(
    agent, alice_client, charlie, charlie_client
):
    Team.objects.create(name="Charlie's", owner=charlie)  # a team's owner may create agents
    foreign = charlie_client.post("/api/agents/", {"name": "Sneak", "id": agent.id}, format="json")
    own = alice_client.post("/api/agents/", {"name": "Dup", "id": agent.id}, format="json")
    assert foreign.status_code == own.status_code == 409
    assert foreign.json() == own.json()
    assert "exist" not in foreign.content.decode().lower() and agent.id not in foreign.json()["detail"]
    assert Agent.objects.filter(id=agent.id).count() == 1 and not Agent.objects.filter(name="Sneak").exists()
    fresh = charlie_client.post("/api/agents/", {"name": "Fresh", "id": "fresh-1"}, format="json")
    assert fresh.status_code == 201


def test_a_stream_id_taken_by_a_stream_the_caller_cannot_see_answers_like_its_own(agent_with_token, agent, zed, zoe):
    tok, tok_raw = agent_with_token
    mine = bearer(tok_raw).post(
        "/api/agentbus/streams", {"streamId": "s-1", "sender": tok.id, "recipient": agent.id}, format="json"
    )
    assert mine.status_code == 201
    _, zed_raw = zed
    foreign = bearer(zed_raw).post(
        "/api/agentbus/streams", {"streamId": "s-1", "sender": "zed", "recipient": "zoe"}, format="json"
    )
    again = bearer(tok_raw).post(
        "/api/agentbus/streams", {"streamId": "s-1", "sender": tok.id, "recipient": agent.id}, format="json"
    )
    assert foreign.status_code == again.status_code == 409
    assert foreign.json() == again.json()
    assert "exist" not in foreign.content.decode().lower() and "s-1" not in foreign.json()["detail"]
    assert Stream.objects.get(id="s-1").sender_id == tok.id
    assert bearer(zed_raw).get("/api/agentbus/streams/s-1/events").status_code == 404


# ------------------------------------------------------------------- user tokens


def issue(username: str, *args: str) -> str:
    out = StringIO()
    call_command("drf_create_token", username, *args, stdout=out)
    words = out.getvalue().split()
    assert words[:2] == ["Generated", "token"] and words[3:] == ["for", "user", username], out.getvalue()
    return words[2]


def test_drf_create_token_shows_the_token_once_and_stores_only_its_hash(alice, agent):
    raw = issue("alice")
    stored = UserToken.objects.get(user=alice)
    assert stored.key_hash == hash_token(raw)
    assert raw not in {str(v) for v in UserToken.objects.values_list("key_hash", "name").get()}
    assert [a["id"] for a in user_token_client(raw).get("/api/agents/").json()] == [agent.id]
    # What the database holds is not a token.
    assert user_token_client(stored.key_hash).get("/api/agents/").status_code == 401


def test_a_second_token_adds_one_and_reset_revokes_the_others(alice):
    first, second = issue("alice"), issue("alice")
    assert first != second
    assert user_token_client(first).get("/api/agents/").status_code == 200
    assert user_token_client(second).get("/api/agents/").status_code == 200
    third = issue("alice", "-r")
    assert user_token_client(first).get("/api/agents/").status_code == 401
    assert user_token_client(second).get("/api/agents/").status_code == 401
    assert user_token_client(third).get("/api/agents/").status_code == 200
    assert UserToken.objects.filter(user=alice).count() == 1


def test_drf_create_token_for_a_missing_user_fails(db):
    with pytest.raises(CommandError):
        call_command("drf_create_token", "nobody", stdout=StringIO())


def test_a_token_of_an_inactive_user_is_refused(alice):
    _, raw = user_token_create(alice)
    alice.is_active = False
    alice.save()
    assert user_token_client(raw).get("/api/agents/").status_code == 401


def test_a_wrong_user_token_answers_401(alice):
    user_token_create(alice)
    response = user_token_client("0" * 40).get("/api/agents/")
    assert response.status_code == 401


def test_the_plaintext_token_table_is_gone_from_the_apps():
    assert not django_apps.is_installed("rest_framework.authtoken")


def test_the_migration_hashes_plaintext_tokens_and_deletes_them(alice, agent):
    legacy = "a" * 40
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamp NOT NULL, user_id integer)"
        )
        cursor.execute(
            "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, %s, %s)",
            [legacy, timezone.now(), alice.pk],
        )
    migration = importlib.import_module("markus.agents.migrations.0002_user_tokens")
    migration.hash_plaintext_tokens(django_apps, SimpleNamespace(connection=connection))
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0
    assert UserToken.objects.get(user=alice).key_hash == hash_token(legacy)
    # The token its holder already uses keeps working.
    assert [a["id"] for a in user_token_client(legacy).get("/api/agents/").json()] == [agent.id]


def test_a_session_user_still_works_next_to_tokens(alice, agent):
    assert client_for(alice).get("/api/agents/").status_code == 200
