"""A notification's link (``actionTarget.path``) is a path on this site: one ``/``, then
neither ``/`` nor ``\\`` (browsers read ``/\\host`` as ``//host``), no backslash or
control character anywhere, no scheme. Creating a notification with any other path is
a 400; a row stored before the rule is opened as one without a link (home)."""

from __future__ import annotations

import pytest
from django.test import Client

from markus.core.errors import MarkusError
from markus.web.pages import notification_link
from notifications.models import UserNotification
from notifications.services import notify_user

pytestmark = pytest.mark.django_db

OFF_SITE = [
    "/\\evil.example",
    "/\\/evil.example",
    "//evil.example/x",
    "/work\\..\\x",
    "/\t/evil.example",
    "https://evil.example/",
    "javascript:alert(1)",
    "work?task=t1",
    "",
]
ON_SITE = ["/work?task=t1", "/agents/", "/", "/agents/mia/mind/"]


@pytest.mark.parametrize("path", OFF_SITE)
def test_a_notification_with_an_off_site_link_is_refused(alice, path):
    with pytest.raises(MarkusError, match=r"actionTarget\.path must be a path on this site") as refused:
        notify_user(user=alice, type="system", title="t", action_target={"path": path})
    assert refused.value.status_code == 400
    assert not UserNotification.objects.exists()


@pytest.mark.parametrize("path", ON_SITE)
def test_a_notification_with_a_path_on_this_site_is_stored(alice, path):
    note = notify_user(user=alice, type="system", title="t", action_target={"path": path})
    assert notification_link(note) == path


@pytest.mark.parametrize("path", OFF_SITE)
def test_opening_a_stored_off_site_link_leads_home(alice, path):
    note = UserNotification.objects.create(user=alice, type="system", title="t", action_target={"path": path})
    assert notification_link(note) == ""
    client = Client()
    client.force_login(alice)
    assert client.get(f"/notifications/{note.id}/open/")["Location"] == "/"
