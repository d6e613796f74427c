"""/notifications/ lists every notification of the caller, a page at a time with its
honest count, searched by words of the title or text and filtered by read state and
kind, kept in the URL; the home page's few newest link to it. Another person's
notifications are never listed. alice owns ada; bob is a teammate."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from markus.web.notification_pages import NOTIFICATIONS_PER_PAGE
from notifications.models import UserNotification

from .conftest import signed_in

pytestmark = pytest.mark.django_db


def notify(user, n: int, *, title="Build finished", type="system", read=False) -> list[UserNotification]:
    return UserNotification.objects.bulk_create(
        UserNotification(user=user, type=type, title=f"{title} {i}", body="All **green**.", read=read) for i in range(n)
    )


def listed(page: str) -> list[str]:
    return re.findall(r'<li class="note[^"]*" id="note-([^"]+)"', page)


def test_every_notification_is_on_some_page_and_counted(alice, bob):
    mine = notify(alice, NOTIFICATIONS_PER_PAGE * 2 + 2)
    notify(bob, 4, title="bob's")
    client = signed_in(alice)
    first = client.get("/notifications/").content.decode()
    assert f"{len(mine)} notifications," in first and len(listed(first)) == NOTIFICATIONS_PER_PAGE
    assert 'href="?page=2"' in first and "Page 1 of 3" in first
    seen = []
    for n in (1, 2, 3):
        seen += listed(client.get(f"/notifications/?page={n}").content.decode())
    assert sorted(seen) == sorted(x.id for x in mine)
    assert 'href="/notifications/"' in client.get("/").content.decode()  # from the home page's few


def test_notifications_are_searched_and_filtered_by_read_state_and_kind(alice):
    unread = notify(alice, NOTIFICATIONS_PER_PAGE + 1, title="Review asked", type="task_review")
    notify(alice, 3, title="Old news", read=True)
    client = signed_in(alice)
    page = client.get("/notifications/?read=unread&type=task_review").content.decode()
    assert f"{len(unread)} notifications match" in page
    assert 'href="?read=unread&amp;type=task_review&amp;page=2"' in page
    assert "3 notifications match" in client.get("/notifications/?q=old+NEWS").content.decode()
    assert "3 notifications match" in client.get("/notifications/?read=read").content.decode()
    odd = client.get("/notifications/?read=maybe&type=gossip&page=9")
    assert odd.status_code == 200
    text = odd.content.decode()
    assert "read=&#x27;maybe&#x27; ignored" in text and "type=&#x27;gossip&#x27; ignored" in text
    assert "page=9 ignored: there are 2 pages." in text


def test_the_notifications_page_reads_in_a_fixed_number_of_queries(alice):
    client = signed_in(alice)

    def count(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    urls = ["/notifications/", "/notifications/?page=2", "/notifications/?read=unread&type=system&q=Build&page=2"]
    notify(alice, NOTIFICATIONS_PER_PAGE + 5)
    small = [count(u) for u in urls]
    notify(alice, (NOTIFICATIONS_PER_PAGE + 5) * 2)
    assert [count(u) for u in urls] == small
