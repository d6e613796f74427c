"""Text from an agent reads the same wherever it appears (issue 37, point 6): markdown
rendered in notifications and in a mailbox item's content on the mind view (a merged
item's separator is a rule, not a literal ``---``), and an image either shown (same
origin or ``data:image``) or replaced by its alt text and a link, never dropped.

alice owns agent ada."""

from __future__ import annotations

import pytest
from django.test import Client

from mailbox.registry import MESSAGE_SEPARATOR, MailboxType
from mailbox.services import mailbox_enqueue
from markus.reports.rendering import render_markdown
from notifications.registry import NotificationType
from notifications.services import notify_user

PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="  # noqa: E501


def test_a_same_origin_or_data_image_is_shown():
    logo = render_markdown("![the logo](/static/web/favicon.svg)")
    assert '<img src="/static/web/favicon.svg" alt="the logo">' in logo
    assert f'<img src="{PNG}" alt="a dot">' in render_markdown(f"![a dot]({PNG})")


def test_another_sites_image_is_its_alt_text_and_a_link():
    html = render_markdown("See ![the build chart](https://ci.example.com/chart.png) above.")
    assert "<img" not in html
    assert 'href="https://ci.example.com/chart.png"' in html and "the build chart" in html
    assert 'href="//ci.example.com/x.png"' in render_markdown("![x](//ci.example.com/x.png)")  # not this site's


def test_an_unsafe_image_keeps_its_alt_text_and_no_address():
    for src in ("javascript:alert(1)", "data:text/html;base64,PHNjcmlwdD4="):
        html = render_markdown(f"![a picture]({src})")
        assert "a picture" in html, src
        assert "<img" not in html and 'href="' + src not in html, html


def test_a_data_link_is_not_a_link():
    html = render_markdown("[click](data:text/html;base64,PHNjcmlwdD4=)")
    assert 'href="data:' not in html and "click" in html


@pytest.mark.django_db
def test_a_notification_body_is_markdown_on_the_home_page(alice):
    notify_user(user=alice, type=NotificationType.SYSTEM, title="Done", body="The notes are **ready**.")
    client = Client()
    client.force_login(alice)
    html = client.get("/").content.decode()
    assert "<strong>ready</strong>" in html and "**ready**" not in html


@pytest.mark.django_db
def test_a_merged_items_content_has_a_rule_not_a_literal_separator(alice, agent):
    mailbox_enqueue(
        agent_id=agent.id,
        source_type=MailboxType.HUMAN_CHAT,
        payload={"summary": "Two messages", "content": f"First **one**{MESSAGE_SEPARATOR}Second one"},
    )
    client = Client()
    client.force_login(alice)
    html = client.get(f"/agents/{agent.id}/mind/").content.decode()
    assert "<strong>one</strong>" in html and "<hr>" in html
    assert "---" not in html.split('class="content')[1].split("</blockquote>")[0]


@pytest.mark.django_db
def test_the_mind_views_recent_chat_is_markdown(alice, agent):
    from markus.agents.models import ChatMessage
    from markus.agents.services import main_session

    ChatMessage.objects.create(session=main_session(agent), role="assistant", content="The build is **green**.")
    client = Client()
    client.force_login(alice)
    html = client.get(f"/agents/{agent.id}/mind/").content.decode()
    recent = html.split('id="chat-recent"')[1].split("</ol>")[0]
    assert "<strong>green</strong>" in recent and "**green**" not in recent
