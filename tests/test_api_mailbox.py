"""The mailbox over the API: enqueue, the timeline with its filters, and the error
answers (400 with a message, 404, 413) — never a 500."""

from __future__ import annotations

import json

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from mailbox import lifecycle
from mailbox.models import MailboxItem
from mailbox.registry import MailboxType, Status
from mailbox.services import mailbox_enqueue

T = MailboxType
pytestmark = pytest.mark.django_db


def url(agent_id: str) -> str:
    return f"/api/agents/{agent_id}/mailbox"


def post(client, agent_id, body, **kwargs):
    return client.post(url(agent_id), body, format="json", **kwargs)


def seed(agent_id, source_type, summary, **fields):
    return mailbox_enqueue(
        agent_id=agent_id, source_type=source_type, payload={"summary": summary, "content": summary, **fields}
    )


# ---------------------------------------------------------------- enqueue


def test_enqueue_answers_201_with_the_stored_item(agent, alice_client):
    response = post(
        alice_client,
        agent.id,
        {
            "sourceType": T.MENTION,
            "payload": {"summary": "Look", "content": "here", "taskId": "tsk_1"},
            "priority": 3,
            "metadata": {"channel": "web"},
        },
    )
    assert response.status_code == 201
    body = response.json()
    stored = MailboxItem.objects.get(id=body["id"])
    assert body["status"] == Status.QUEUED and body["priority"] == 3 == stored.priority
    assert body["sourceType"] == T.MENTION and body["agentId"] == agent.id
    assert body["payload"] == stored.payload == {"summary": "Look", "content": "here", "taskId": "tsk_1"}
    assert body["metadata"]["channel"] == "web" and body["mergedInto"] is None


def test_enqueue_by_a_user_is_stamped_as_a_human_so_a_comment_goes_first(agent, alice, alice_client):
    response = post(alice_client, agent.id, {"sourceType": T.TASK_COMMENT, "payload": {"taskId": "t"}})
    body = response.json()
    assert body["metadata"]["senderRole"] == "user"
    assert body["metadata"]["senderId"] == str(alice.pk)
    assert body["priority"] == 0


def test_an_agent_token_cannot_pose_as_a_human(agent_with_token):
    own, token = agent_with_token
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = post(
        client,
        own.id,
        {
            "sourceType": T.TASK_COMMENT,
            "payload": {"taskId": "t"},
            "metadata": {"senderRole": "user", "senderId": "alice"},
        },
    )
    assert response.status_code == 201
    assert response.json()["metadata"]["senderRole"] == "agent"
    assert response.json()["metadata"]["senderId"] == own.id
    assert response.json()["priority"] == 2


def test_an_item_merged_at_enqueue_answers_with_status_merged_and_merged_into(agent, alice_client):
    first = post(alice_client, agent.id, {"sourceType": T.TASK_COMMENT, "payload": {"content": "a", "taskId": "t"}})
    second = post(alice_client, agent.id, {"sourceType": T.TASK_COMMENT, "payload": {"content": "b", "taskId": "t"}})
    assert second.status_code == 201
    assert second.json()["status"] == Status.MERGED
    assert second.json()["mergedInto"] == first.json()["id"]


@pytest.mark.parametrize(
    "body,message",
    [
        ({"sourceType": "bogus", "payload": {}}, "unknown sourceType"),
        ({"payload": {}}, "unknown sourceType"),
        ({"sourceType": T.MENTION, "payload": {}, "priority": 5}, "priority"),
        ({"sourceType": T.MENTION, "payload": {}, "priority": -1}, "priority"),
        ({"sourceType": T.MENTION, "payload": {}, "priority": True}, "priority"),
        ({"sourceType": T.MENTION, "payload": {}, "priority": "1"}, "priority"),
        ({"sourceType": T.MENTION, "payload": {}, "priority": 1.5}, "priority"),
        ({"sourceType": T.MENTION, "payload": ["x"]}, "payload must be an object"),
        ({"sourceType": T.MENTION, "payload": "x"}, "payload must be an object"),
        ({"sourceType": T.MENTION}, "payload must be an object"),
        ({"sourceType": T.MENTION, "payload": {"summary": 3}}, "payload.summary"),
        ({"sourceType": T.MENTION, "payload": {"extra": []}}, "payload.extra"),
        ({"sourceType": T.MENTION, "payload": {}, "metadata": "x"}, "metadata must be an object"),
    ],
)
def test_bad_enqueue_input_answers_400_with_a_message_and_stores_nothing(agent, alice_client, body, message):
    response = post(alice_client, agent.id, body)
    assert response.status_code == 400
    assert message in response.json()["detail"]
    assert not MailboxItem.objects.exists()


def test_a_body_that_is_not_an_object_answers_400(agent, alice_client):
    response = post(alice_client, agent.id, [1, 2])
    assert response.status_code == 400 and "object" in response.json()["detail"]


def test_malformed_json_answers_400_not_500(agent, alice_client):
    response = alice_client.post(url(agent.id), data='{"sourceType": ', content_type="application/json")
    assert response.status_code == 400
    assert "JSON" in response.json()["detail"]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_a_body_over_the_size_limit_answers_413(agent, alice_client):
    body = {"sourceType": T.MENTION, "payload": {"summary": "big", "content": "x" * 2000}}
    assert len(json.dumps(body)) > 1000
    response = post(alice_client, agent.id, body)
    assert response.status_code == 413
    assert "too large" in response.json()["detail"]
    assert not MailboxItem.objects.exists()


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_a_body_under_the_size_limit_is_accepted(agent, alice_client):
    response = post(alice_client, agent.id, {"sourceType": T.MENTION, "payload": {"content": "x" * 500}})
    assert response.status_code == 201


@pytest.mark.parametrize("method", ["get", "post"])
def test_another_users_agent_answers_404_like_a_missing_one(agent, charlie_client, method):
    body = {"sourceType": T.MENTION, "payload": {}}
    foreign = getattr(charlie_client, method)(url(agent.id), body, format="json")
    missing = getattr(charlie_client, method)(url("nobody"), body, format="json")
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()
    assert not MailboxItem.objects.exists()


def test_an_agent_token_cannot_reach_another_agents_mailbox(agent, agent_with_token):
    seed(agent.id, T.MENTION, "secret")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_with_token[1]}")
    assert client.get(url(agent.id)).status_code == 404
    assert post(client, agent.id, {"sourceType": T.MENTION, "payload": {}}).status_code == 404


# ---------------------------------------------------------------- timeline


@pytest.fixture
def timeline_items(agent):
    """Five items: one completed, one merged, three queued (in dequeue order: chat,
    mention, heartbeat)."""
    done = seed(agent.id, T.SYSTEM_EVENT, "done")
    assert lifecycle.claim_next(agent_id=agent.id).id == done.id
    lifecycle.complete(done.id)
    beat = seed(agent.id, T.HEARTBEAT, "beat")
    comment = seed(agent.id, T.TASK_COMMENT, "comment", taskId="t")
    merged = seed(agent.id, T.TASK_COMMENT, "comment 2", taskId="t")
    chat = seed(agent.id, T.HUMAN_CHAT, "chat")
    return {"done": done, "beat": beat, "comment": comment, "merged": merged, "chat": chat}


def test_the_timeline_lists_history_newest_first_and_the_queue_in_dequeue_order(agent, alice_client, timeline_items):
    i = timeline_items
    body = alice_client.get(url(agent.id)).json()
    assert [h["id"] for h in body["history"]] == [i[k].id for k in ("chat", "merged", "comment", "beat", "done")]
    assert [q["id"] for q in body["queued"]] == [i["chat"].id, i["comment"].id, i["beat"].id]
    assert body["queueDepth"] == 3 and body["totalCount"] == 5
    merged = next(h for h in body["history"] if h["id"] == i["merged"].id)
    assert merged["status"] == Status.MERGED and merged["mergedInto"] == i["comment"].id
    assert set(body["history"][0]) >= {
        "id",
        "sourceType",
        "priority",
        "status",
        "summary",
        "queuedAt",
        "startedAt",
        "completedAt",
        "mergedInto",
        "decisions",
        "activity",
    }


def test_the_timeline_filters_by_type(agent, alice_client, timeline_items):
    body = alice_client.get(url(agent.id), {"type": f"{T.HEARTBEAT},{T.SYSTEM_EVENT}"}).json()
    assert {h["sourceType"] for h in body["history"]} == {T.HEARTBEAT, T.SYSTEM_EVENT}
    assert body["totalCount"] == 2 and body["queueDepth"] == 3


def test_the_timeline_filters_by_category(agent, alice_client, timeline_items):
    body = alice_client.get(url(agent.id), {"category": "task"}).json()
    assert [h["id"] for h in body["history"]] == [timeline_items["merged"].id, timeline_items["comment"].id]
    assert body["totalCount"] == 2


def test_the_timeline_filters_by_status(agent, alice_client, timeline_items):
    body = alice_client.get(url(agent.id), {"status": "completed,merged"}).json()
    assert [h["id"] for h in body["history"]] == [timeline_items["merged"].id, timeline_items["done"].id]


def test_the_timeline_pages_with_limit_and_offset(agent, alice_client, timeline_items):
    i = timeline_items
    body = alice_client.get(url(agent.id), {"limit": 2, "offset": 1}).json()
    assert [h["id"] for h in body["history"]] == [i["merged"].id, i["comment"].id]
    assert body["totalCount"] == 5


@pytest.mark.parametrize(
    "params,message",
    [
        ({"type": "bogus"}, "unknown type"),
        ({"type": f"{T.MENTION},nope"}, "unknown type"),
        ({"category": "bogus"}, "unknown category"),
        ({"status": "bogus"}, "unknown status"),
        ({"limit": "abc"}, "limit must be an integer"),
        ({"limit": "0"}, "limit must be between"),
        ({"limit": "100000"}, "limit must be between"),
        ({"offset": "-1"}, "offset must be between"),
    ],
)
def test_bad_timeline_filters_answer_400_with_a_message(agent, alice_client, params, message):
    response = alice_client.get(url(agent.id), params)
    assert response.status_code == 400
    assert message in response.json()["detail"]


def test_an_empty_mailbox_has_an_empty_timeline(agent, alice_client):
    assert alice_client.get(url(agent.id)).json() == {
        "queued": [],
        "queueDepth": 0,
        "queueDepthCapped": False,
        "queuedNextCursor": None,
        "history": [],
        "totalCount": 0,
        "totalCountCapped": False,
        "nextCursor": None,
    }
