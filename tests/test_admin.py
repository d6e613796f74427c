"""The admin is the operator console: every changelist opens, with its filters and search."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.test import Client
from django.urls import reverse

from mailbox import lifecycle
from mailbox.registry import Category, MailboxType, Status
from mailbox.services import mailbox_enqueue
from markus.work.models import Requirement, Task
from notifications.models import Approval, UserNotification
from notifications.registry import NotificationType

T = MailboxType
pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(django_user_model):
    django_user_model.objects.create_superuser("operator", "op@example.com", "pw-operator")
    client = Client()
    assert client.login(username="operator", password="pw-operator")
    return client


@pytest.fixture
def console_data(alice, agent, team):
    chat = mailbox_enqueue(agent_id=agent.id, source_type=T.HUMAN_CHAT, payload={"summary": "Hello there"})
    beat = mailbox_enqueue(agent_id=agent.id, source_type=T.HEARTBEAT, payload={"summary": "Heartbeat check-in"})
    lifecycle.drop(beat.id, reason="collapsed")
    task = Task.objects.create(title="Write docs", assignee=agent)
    Requirement.objects.create(title="Docs site", created_by_agent=agent)
    UserNotification.objects.create(user=alice, type=NotificationType.SYSTEM, title="Welcome")
    Approval.objects.create(user=alice, agent=agent, mailbox_item=chat, title="Deploy?", options=["yes", "no"])
    return {"chat": chat, "task": task}


CHANGELISTS = [
    "admin:agents_agent_changelist",
    "admin:agents_team_changelist",
    "admin:mailbox_mailboxitem_changelist",
    "admin:work_task_changelist",
    "admin:work_requirement_changelist",
    "admin:notifications_usernotification_changelist",
    "admin:notifications_approval_changelist",
]


@pytest.mark.parametrize("name", CHANGELISTS)
def test_each_changelist_opens_for_an_operator(operator, console_data, name):
    response = operator.get(reverse(name))
    assert response.status_code == 200
    assert response.context["cl"].result_count >= 1


@pytest.mark.parametrize(
    "params",
    [
        {"status": Status.QUEUED},
        {"category": Category.INTERACTION},
        {"source_type": T.HUMAN_CHAT},
        {"q": "Hello"},
        {"status": Status.QUEUED, "category": Category.INTERACTION, "q": "hello"},
    ],
)
def test_mailbox_items_filter_by_status_category_type_and_search_summaries(operator, console_data, params):
    response = operator.get(reverse("admin:mailbox_mailboxitem_changelist"), params)
    assert response.status_code == 200
    assert [i.id for i in response.context["cl"].result_list] == [console_data["chat"].id]


def test_a_mailbox_filter_with_no_match_shows_an_empty_list(operator, console_data):
    response = operator.get(reverse("admin:mailbox_mailboxitem_changelist"), {"category": Category.NOTIFICATION})
    assert response.status_code == 200 and response.context["cl"].result_count == 0


def test_the_change_pages_of_a_mailbox_item_and_a_task_open(operator, console_data):
    for name, obj in (
        ("admin:mailbox_mailboxitem_change", console_data["chat"]),
        ("admin:work_task_change", console_data["task"]),
    ):
        response = operator.get(reverse(name, args=[quote(obj.pk)]))
        assert response.status_code == 200
        assert response.context["original"].pk == obj.pk


def test_the_console_is_closed_to_a_user_who_is_not_staff(alice, console_data):
    client = Client()
    client.force_login(alice)
    response = client.get(reverse("admin:mailbox_mailboxitem_changelist"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
