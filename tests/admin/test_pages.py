"""Every page of the console opens for the operator with rows in it."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from agentbus.models import Stream
from attention.models import AgentAttention
from attention.services import sync_beat_schedule

pytestmark = pytest.mark.django_db


def _pages(console, agent):
    chunk = console["chunk"]
    return [
        ("agents_agent", agent.pk),
        ("agents_team", agent.team_id),
        ("mailbox_mailboxitem", console["chat"].pk),
        ("attention_agentdecision", console["decision"].pk),
        ("attention_agentactivity", console["activity"].pk),
        ("attention_llmsession", console["session"].pk),
        ("attention_agentattention", AgentAttention.objects.get(agent=agent).pk),
        ("notifications_usernotification", console["notification"].pk),
        ("notifications_approval", console["approval"].pk),
        ("agentbus_stream", Stream.objects.get(id=chunk.stream_id).pk),
    ]


def test_every_changelist_and_change_page_opens_with_data(operator, console, agent):
    for name, pk in _pages(console, agent):
        listing = operator.get(reverse(f"admin:{name}_changelist"))
        assert listing.status_code == 200, name
        assert listing.context["cl"].result_count >= 1, name
        page = operator.get(reverse(f"admin:{name}_change", args=[quote(pk)]))
        assert page.status_code == 200, name
        assert str(page.context["original"].pk) == str(pk), name


def test_the_agent_add_page_opens(operator):
    assert operator.get(reverse("admin:agents_agent_add")).status_code == 200


def test_a_mailbox_item_page_shows_its_decisions_and_activity_read_only(operator, console):
    page = operator.get(reverse("admin:mailbox_mailboxitem_change", args=[quote(console["chat"].pk)]))
    html = page.content.decode()
    assert "Idle — picked from queue" in html and "Chat: Hello there" in html
    assert 'name="_save"' not in html  # view-only: the queue changes through actions


def test_an_activity_page_shows_its_logs(operator, console):
    page = operator.get(reverse("admin:attention_agentactivity_change", args=[quote(console["activity"].pk)]))
    assert "Thinking about hello" in page.content.decode()


def test_the_beat_schedules_are_in_the_console(operator):
    sync_beat_schedule()
    listing = operator.get(reverse("admin:django_celery_beat_periodictask_changelist"))
    assert listing.status_code == 200
    names = {t.name for t in listing.context["cl"].result_list}
    assert {"attention.sweep", "attention.heartbeat"} <= names


def test_the_admin_index_links_to_the_dashboard(operator):
    page = operator.get(reverse("admin:index"))
    assert page.status_code == 200
    assert reverse("console:dashboard") in page.content.decode()
