"""Opening a notification marks it read: its link in the list goes through
``/notifications/{id}/open/``, which marks it read and leads on to its target (a
report, a mind view, a path on this site). Another user's notification answers 404 and
stays unread; one without a target leads home."""

from __future__ import annotations

import pytest
from django.test import Client

from markus.agents.services import agent_create
from notifications.models import UserNotification
from notifications.services import notify_user

pytestmark = [pytest.mark.django_db, pytest.mark.pg]  # both databases


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_list_links_through_open_and_opening_marks_it_read(alice):
    agent_create(name="Mia", owner=alice, agent_id="mia")
    note = notify_user(
        user=alice,
        type="agent_report",
        title="Mia: daily report for 2026-11-30",
        action_target={"agentId": "mia", "reportDate": "2026-11-30"},
    )
    client = client_of(alice)
    home = client.get("/").content.decode()
    assert f'<a href="/notifications/{note.id}/open/">Mia: daily report for 2026-11-30</a>' in home

    opened = client.get(f"/notifications/{note.id}/open/")
    assert opened.status_code == 302 and opened["Location"] == "/agents/mia/reports/2026-11-30/"
    note.refresh_from_db()
    assert note.read
    assert "0 unread" in client.get("/").content.decode()
    # Opening it again leads to the same place and changes nothing.
    assert client.get(f"/notifications/{note.id}/open/")["Location"] == "/agents/mia/reports/2026-11-30/"


def test_a_path_target_and_no_target(alice):
    to_path = notify_user(user=alice, type="system", title="see the agents", action_target={"path": "/agents/"})
    nowhere = notify_user(user=alice, type="system", title="just so you know")
    client = client_of(alice)
    assert client.get(f"/notifications/{to_path.id}/open/")["Location"] == "/agents/"
    assert client.get(f"/notifications/{nowhere.id}/open/")["Location"] == "/"
    assert UserNotification.objects.filter(user=alice, read=False).count() == 0


def test_another_users_notification_is_not_found_and_stays_unread(alice, charlie):
    note = notify_user(user=alice, type="system", title="private", action_target={"path": "/agents/"})
    assert client_of(charlie).get(f"/notifications/{note.id}/open/").status_code == 404
    assert client_of(charlie).get("/notifications/ntf_nope/open/").status_code == 404
    note.refresh_from_db()
    assert not note.read


def test_opening_needs_a_login(alice):
    note = notify_user(user=alice, type="system", title="x")
    response = Client().get(f"/notifications/{note.id}/open/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    note.refresh_from_db()
    assert not note.read
