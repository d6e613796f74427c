"""The mind view, server-rendered: access, header, filters from the registry, the
timeline newest first, expandable details with lazily loaded logs, Load earlier.

alice owns agent ada, charlie is an outsider.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from attention.models import AgentActivity, AgentActivityLog, AgentDecision
from mailbox.models import MailboxItem
from mailbox.registry import (
    MAILBOX_TYPE_REGISTRY,
    STATUS_COLOURS,
    ActivityType,
    Category,
    MailboxType,
    MailboxTypeDescriptor,
    Priority,
    Status,
)
from mailbox.services import mailbox_enqueue
from markus.llm.base import set_provider_override
from markus.llm.scripted import ScriptedProvider

from .conftest import enqueue_chat

pytestmark = pytest.mark.django_db


def mind_url(agent_id: str, query: str = "") -> str:
    return f"/agents/{agent_id}/mind/" + (f"?{query}" if query else "")


def item_ids(html: str) -> list[str]:
    return re.findall(r'<details id="item-([^"]+)"', html)


def heartbeat(agent_id: str, summary: str = "Heartbeat check-in"):
    return mailbox_enqueue(agent_id=agent_id, source_type=MailboxType.HEARTBEAT, payload={"summary": summary})


def test_anonymous_is_sent_to_the_login_page(client, agent):
    response = client.get(mind_url(agent.id))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/agents/ada/mind/")


def test_an_outsider_gets_404_exactly_like_a_missing_agent(charlie, agent):
    client = Client()
    client.force_login(charlie)
    foreign = client.get(mind_url(agent.id))
    missing = client.get(mind_url("no-such-agent"))
    assert foreign.status_code == missing.status_code == 404
    assert client.get(f"/agents/{agent.id}/mind/timeline/").status_code == 404


def test_the_page_shows_the_attention_header_and_the_timeline_newest_first(mind_client, agent):
    older = enqueue_chat(agent.id, "What's the status of the release?")
    MailboxItem.objects.filter(id=older.id).update(queued_at=timezone.now() - timedelta(minutes=5))
    newer = heartbeat(agent.id)
    html = mind_client.get(mind_url(agent.id)).content.decode()
    assert item_ids(html) == [newer.id, older.id]
    assert 'data-state="idle"' in html and "IDLE" in html
    assert 'id="queue-depth">2<' in html
    assert "What&#x27;s the status of the release?" in html
    assert "Offline brain" in html  # the default brain says what it is
    assert f'ws-connect="/ws/agents/{agent.id}/mind/"' in html
    assert "htmx-2.min.js" in html and "hx-ws-2.min.js" in html  # bundled by django-htmx, no CDN
    assert "unpkg" not in html and "cdn" not in html.lower()


def test_filters_labels_icons_and_colours_come_from_the_registry(mind_client, agent):
    html = mind_client.get(mind_url(agent.id)).content.decode()
    for category in Category:
        assert f'name="category" value="{category.value}"' in html
    for kind, d in MAILBOX_TYPE_REGISTRY.items():
        assert f'<option value="{kind.value}">{d.icon} {d.label}</option>' in html
    for status, colour in STATUS_COLOURS.items():
        assert f'value="{status.value}"' in html
        assert f'<span class="dot st-{colour}"></span> {status.value.title()}' in html


def test_a_category_filter_narrows_the_page_and_the_partial(mind_client, agent):
    chat = enqueue_chat(agent.id, "Hello")
    beat = heartbeat(agent.id)
    page = mind_client.get(mind_url(agent.id, "category=system")).content.decode()
    assert item_ids(page) == [beat.id]
    assert 'value="system" checked' in page
    partial = mind_client.get(f"/agents/{agent.id}/mind/timeline/?category=interaction", HTTP_HX_REQUEST="true")
    assert item_ids(partial.content.decode()) == [chat.id]
    assert partial["HX-Push-Url"] == mind_url(agent.id, "category=interaction")
    assert f'ws-connect="/ws/agents/{agent.id}/mind/?category=interaction"' in partial.content.decode()


def test_type_and_status_filters_combine(mind_client, agent):
    done = enqueue_chat(agent.id, "Done already")
    MailboxItem.objects.filter(id=done.id).update(status=Status.COMPLETED)
    waiting = enqueue_chat(agent.id, "Still waiting")
    beat = heartbeat(agent.id)
    html = mind_client.get(mind_url(agent.id, f"type={MailboxType.HUMAN_CHAT.value}&status=queued")).content.decode()
    assert item_ids(html) == [waiting.id]
    html = mind_client.get(mind_url(agent.id, "status=completed&status=queued&type=nonsense")).content.decode()
    assert set(item_ids(html)) == {done.id, waiting.id, beat.id}  # an unknown type is ignored


def _beats(agent_id: str, n: int) -> list[str]:
    """``n`` heartbeats one second apart; their ids oldest first."""
    start = timezone.now() - timedelta(hours=1)
    items = []
    for k in range(n):
        item = heartbeat(agent_id, f"beat {k}")
        MailboxItem.objects.filter(id=item.id).update(queued_at=start + timedelta(seconds=k))
        items.append(item.id)
    return items


def load_earlier_url(html: str) -> str:
    found = re.search(r'<div id="load-earlier"[^>]*>\s*<button type="button" hx-get="([^"]+)"', html)
    assert found, "no Load earlier button"
    return found.group(1).replace("&amp;", "&")


def test_load_earlier_pages_by_cursor(mind_client, agent):
    items = _beats(agent.id, 65)[::-1]
    page = mind_client.get(mind_url(agent.id)).content.decode()
    assert item_ids(page) == items[:30]
    url = load_earlier_url(page)
    assert url == f"/agents/{agent.id}/mind/timeline/?before={items[29]}"
    earlier = mind_client.get(url).content.decode()
    assert item_ids(earlier) == items[30:60]
    assert 'id="load-earlier" class="load-earlier" hx-swap-oob="true"' in earlier
    last = mind_client.get(load_earlier_url(earlier)).content.decode()
    assert item_ids(last) == items[60:]
    assert "Load earlier" not in last  # the last page has no further button


def test_load_earlier_keeps_the_filters(mind_client, agent):
    items = _beats(agent.id, 31)[::-1]
    enqueue_chat(agent.id, "not a heartbeat")
    page = mind_client.get(mind_url(agent.id, f"type={MailboxType.HEARTBEAT.value}")).content.decode()
    url = load_earlier_url(page)
    assert url.endswith(f"?before={items[29]}&type={MailboxType.HEARTBEAT.value}")
    assert item_ids(mind_client.get(url).content.decode()) == items[30:]


def test_load_earlier_pages_by_offset(mind_client, agent):
    """Pages rendered before the cursor asked by offset; that still works."""
    items = _beats(agent.id, 35)[::-1]
    earlier = mind_client.get(f"/agents/{agent.id}/mind/timeline/?offset=30").content.decode()
    assert item_ids(earlier) == items[30:]
    assert 'id="load-earlier" class="load-earlier" hx-swap-oob="true"' in earlier
    assert "Load earlier" not in earlier  # the last page has no further button


@pytest.mark.parametrize("before", ["mbx_nope", "x" * 65])
def test_a_bad_cursor_answers_400_with_a_message(mind_client, agent, before):
    _beats(agent.id, 3)
    response = mind_client.get(f"/agents/{agent.id}/mind/timeline/", {"before": before})
    assert response.status_code == 400
    assert "before" in response.content.decode()


def test_an_expanded_item_shows_decisions_activity_and_lazily_loaded_logs(mind_client, charlie, agent):
    item = enqueue_chat(agent.id, "Summarise the sprint")
    MailboxItem.objects.filter(id=item.id).update(status=Status.COMPLETED, completed_at=timezone.now())
    AgentDecision.objects.create(
        agent=agent, mailbox_item=item, decision_type="pick", reasoning="Idle — picked from queue"
    )
    activity = AgentActivity.objects.create(
        agent=agent,
        mailbox_item=item,
        type=ActivityType.CHAT.value,
        label="Chat with Owner",
        total_tokens=1234,
        total_tools=3,
        ended_at=timezone.now(),
    )
    AgentActivityLog.objects.create(activity=activity, seq=1, type="tool_start", content="task_list()")
    AgentActivityLog.objects.create(activity=activity, seq=2, type="text", content="Sprint: 4 tasks done.")
    html = mind_client.get(mind_url(agent.id)).content.decode()
    assert '<span class="badge decision-pick">pick</span> Idle — picked from queue' in html
    assert "Chat with Owner" in html and "1.2k tokens" in html and "3 tools" in html
    logs_url = f"/agents/{agent.id}/mind/activities/{activity.id}/logs/"
    assert f'hx-get="{logs_url}"' in html
    assert "Sprint: 4 tasks done." not in html  # logs load on demand only
    logs = mind_client.get(logs_url).content.decode()
    assert logs.index("task_list()") < logs.index("Sprint: 4 tasks done.")
    assert mind_client.get(f"/agents/{agent.id}/mind/activities/act_missing/logs/").status_code == 404
    outsider = Client()
    outsider.force_login(charlie)
    assert outsider.get(logs_url).status_code == 404


def test_a_real_brain_is_not_labelled_offline(mind_client, agent):
    set_provider_override(ScriptedProvider([]))
    try:
        html = mind_client.get(mind_url(agent.id)).content.decode()
    finally:
        set_provider_override(None)
    assert "Offline brain" not in html and "Brain: scripted" in html


def _register(monkeypatch, enum_cls, name: str, value: str):
    """Add a member to a registry enum for this test only (what adding a line to
    mailbox/registry.py would do)."""
    member = str.__new__(enum_cls, value)
    member._name_, member._value_ = name, value
    monkeypatch.setitem(enum_cls._value2member_map_, value, member)
    monkeypatch.setitem(enum_cls._member_map_, name, member)
    monkeypatch.setattr(enum_cls, "_member_names_", [*enum_cls._member_names_, name])
    return member


@pytest.fixture
def research_type(monkeypatch):
    category = _register(monkeypatch, Category, "RESEARCH", "research")
    kind = _register(monkeypatch, MailboxType, "PAPER_ALERT", "paper_alert")
    monkeypatch.setitem(
        MAILBOX_TYPE_REGISTRY,
        kind,
        MailboxTypeDescriptor("Paper Alert", Priority.LOW, category, "🧪", ActivityType.INTERNAL, True, True),
    )
    return kind


def test_a_type_added_to_the_registry_appears_with_no_template_change(mind_client, agent, research_type):
    item = mailbox_enqueue(
        agent_id=agent.id, source_type=research_type.value, payload={"summary": "New paper on attention"}
    )
    enqueue_chat(agent.id, "Hello")
    html = mind_client.get(mind_url(agent.id)).content.decode()
    assert 'name="category" value="research"' in html and "Research" in html
    assert '<optgroup label="Research">' in html
    assert '<option value="paper_alert">🧪 Paper Alert</option>' in html
    head = re.search(rf'<summary id="item-{item.id}-head".*?</summary>', html, re.S).group(0)
    assert "🧪" in head and "Paper Alert" in head and "New paper on attention" in head
    filtered = mind_client.get(mind_url(agent.id, "category=research")).content.decode()
    assert item_ids(filtered) == [item.id]
