"""User notifications: notify_user, its event, and the REST API (seed 12)."""

from __future__ import annotations

import pytest

from markus.core.errors import MarkusError
from notifications.models import UserNotification
from notifications.services import notify_user

from ..conftest import client_for

pytestmark = pytest.mark.django_db


def test_notify_user_stores_the_row_with_registry_defaults_and_pushes_it_after_commit(
    alice, sent_events, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        n = notify_user(
            user=alice,
            type="task_failed",
            title="Task failed: x",
            body="disk full",
            action_target={"path": "/work?task=t1"},
            metadata={"taskId": "t1"},
        )
        assert sent_events == []  # nothing before commit
    assert (n.priority, n.action_type, n.read) == ("high", "navigate", False)
    [(group, event)] = sent_events
    assert group == f"user.{alice.pk}"
    assert event["type"] == "notification"
    assert event["notification"]["id"] == n.id and event["notification"]["metadata"] == {"taskId": "t1"}


def test_a_notification_without_an_action_stores_none(alice):
    n = notify_user(user=alice, type="agent_report", title="Daily report")
    assert n.action_type is None and n.priority == "normal"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"type": "nope"}, "unknown notification type"),
        ({"priority": "meh"}, "priority must be one of"),
        ({"action_type": "jump"}, "action_type must be one of"),
    ],
)
def test_notify_user_refuses_unknown_values(alice, kwargs, message):
    with pytest.raises(MarkusError, match=message):
        notify_user(**{"user": alice, "type": "system", "title": "t", **kwargs})
    assert not UserNotification.objects.exists()


@pytest.fixture
def three(alice, bob):
    notify_user(user=alice, type="task_completed", title="one")
    notify_user(user=alice, type="task_failed", title="two")
    notify_user(user=alice, type="task_completed", title="three")
    notify_user(user=bob, type="system", title="bob's")


def test_the_list_is_newest_first_with_total_and_unread_counts(alice_client, three):
    data = alice_client.get("/api/notifications").json()
    assert [n["title"] for n in data["notifications"]] == ["three", "two", "one"]
    assert data["totalCount"] == 3 and data["unreadCount"] == 3


def test_the_list_filters_by_type_and_pages(alice_client, three):
    data = alice_client.get("/api/notifications?type=task_completed&limit=1&offset=1").json()
    assert [n["title"] for n in data["notifications"]] == ["one"]
    assert data["totalCount"] == 2 and data["unreadCount"] == 3
    assert alice_client.get("/api/notifications?type=bogus").status_code == 400
    assert alice_client.get("/api/notifications?limit=-1").status_code == 400


def test_marking_one_read(alice_client, alice, three):
    target = UserNotification.objects.filter(user=alice).first()
    response = alice_client.post(f"/api/notifications/{target.id}/read")
    assert response.status_code == 200 and response.json()["read"] is True
    assert alice_client.get("/api/notifications").json()["unreadCount"] == 2


def test_someone_elses_notification_answers_404(charlie_client, alice, three):
    target = UserNotification.objects.filter(user=alice).first()
    assert charlie_client.post(f"/api/notifications/{target.id}/read").status_code == 404
    assert UserNotification.objects.get(id=target.id).read is False
    assert charlie_client.get("/api/notifications").json()["totalCount"] == 0


def test_mark_all_read_touches_only_the_callers_notifications(alice_client, bob, three):
    response = alice_client.post("/api/notifications/mark-all-read")
    assert response.json() == {"updated": 3}
    assert alice_client.get("/api/notifications").json()["unreadCount"] == 0
    assert client_for(bob).get("/api/notifications").json()["unreadCount"] == 1


def test_an_agent_token_has_no_notifications(agent_with_token):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {agent_with_token[1]}")
    assert client.get("/api/notifications").status_code == 403
