"""The mind view's controls: pause / resume / wake of the agent, retry / drop of an item.

alice owns agent ada (team Core, owned by alice, with bob as a member); charlie is an
outsider. Who may control: staff, the agent's owner, its team's owner; a teammate may
watch (403 on a control), an outsider gets 404 as for a missing agent. Every control
is a POST with the CSRF token.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from mailbox.models import MailboxItem
from mailbox.registry import Status
from markus.agents.models import Agent

from .conftest import enqueue_chat

pytestmark = pytest.mark.django_db


def signed_in(user, *, csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=csrf)
    client.force_login(user)
    return client


def control(agent_id: str, action: str) -> str:
    return f"/agents/{agent_id}/mind/{action}/"


def item_control(agent_id: str, item_id: str, action: str) -> str:
    return f"/agents/{agent_id}/mind/items/{item_id}/{action}/"


HTMX = {"HTTP_HX_REQUEST": "true"}


def test_the_owner_pauses_and_resumes_and_the_header_answers_with_the_new_state(alice, agent):
    client = signed_in(alice)
    paused = client.post(control(agent.id, "pause"), **HTMX)
    assert paused.status_code == 200
    agent.refresh_from_db()
    assert agent.status == Agent.RunStatus.PAUSED
    html = paused.content.decode()
    assert 'id="mind-header"' in html and 'id="mind-flash"' in html and "Ada paused" in html
    assert 'data-run-status="paused"' in html  # the header, out of band

    resumed = client.post(control(agent.id, "resume"), **HTMX)
    assert resumed.status_code == 200
    agent.refresh_from_db()
    assert agent.status == Agent.RunStatus.RUNNING
    assert 'data-run-status="running"' in resumed.content.decode()


def test_without_htmx_a_control_redirects_back_to_the_mind_view(alice, agent):
    response = signed_in(alice).post(control(agent.id, "pause"))
    assert response.status_code == 302 and response["Location"] == f"/agents/{agent.id}/mind/"


def test_wake_applies_to_a_running_agent_only(alice, agent, monkeypatch):
    from attention import services

    woken: list[str] = []
    monkeypatch.setattr(services, "wake", lambda agent_id, **kw: woken.append(agent_id))
    client = signed_in(alice)
    assert client.post(control(agent.id, "wake"), **HTMX).status_code == 200
    assert woken == [agent.id]
    Agent.objects.filter(id=agent.id).update(status=Agent.RunStatus.PAUSED)
    refused = client.post(control(agent.id, "wake"), **HTMX)
    assert refused.status_code == 409
    assert "only a running internal agent has a loop to wake" in refused.content.decode()
    assert woken == [agent.id]


def test_a_teammate_may_watch_but_not_control(bob, agent):
    client = signed_in(bob)
    assert client.get(f"/agents/{agent.id}/mind/").status_code == 200
    assert "ctl-pause" not in client.get(f"/agents/{agent.id}/mind/").content.decode()
    item = enqueue_chat(agent.id, "Status?")
    assert client.post(control(agent.id, "pause")).status_code == 403
    assert client.post(item_control(agent.id, item.id, "drop")).status_code == 403
    agent.refresh_from_db()
    assert agent.status == Agent.RunStatus.RUNNING
    assert MailboxItem.objects.get(id=item.id).status == Status.QUEUED


def test_an_outsider_and_a_missing_agent_get_404(charlie, agent):
    client = signed_in(charlie)
    assert client.post(control(agent.id, "pause")).status_code == 404
    assert client.post(control("no-such-agent", "pause")).status_code == 404
    agent.refresh_from_db()
    assert agent.status == Agent.RunStatus.RUNNING


def test_an_unknown_action_or_item_is_404_and_a_get_is_405(alice, agent):
    client = signed_in(alice)
    assert client.post(control(agent.id, "explode")).status_code == 404
    assert client.post(item_control(agent.id, "mbx_nope", "retry")).status_code == 404
    assert client.get(control(agent.id, "pause")).status_code == 405


def test_an_item_of_another_agent_is_404(alice, agent, agent_with_token):
    other_item = enqueue_chat(agent_with_token[0].id, "Elsewhere")
    assert signed_in(alice).post(item_control(agent.id, other_item.id, "drop")).status_code == 404
    assert MailboxItem.objects.get(id=other_item.id).status == Status.QUEUED


def test_anonymous_is_sent_to_sign_in_and_nothing_changes(client, agent):
    response = client.post(control(agent.id, "pause"))
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    agent.refresh_from_db()
    assert agent.status == Agent.RunStatus.RUNNING


def test_a_post_without_the_csrf_token_is_refused(alice, agent):
    client = signed_in(alice, csrf=True)
    assert client.post(control(agent.id, "pause"), **HTMX).status_code == 403
    item = enqueue_chat(agent.id, "Status?")
    assert client.post(item_control(agent.id, item.id, "drop"), {"reason": "x"}).status_code == 403
    agent.refresh_from_db()
    assert agent.status == Agent.RunStatus.RUNNING
    assert MailboxItem.objects.get(id=item.id).status == Status.QUEUED
    # With the token the page carries (in hx-headers), the same POST goes through.
    page = client.get(f"/agents/{agent.id}/mind/")
    token = page.cookies["csrftoken"].value
    assert '"X-CSRFToken": "' in page.content.decode()
    ok = client.post(control(agent.id, "pause"), HTTP_X_CSRFTOKEN=token, **HTMX)
    assert ok.status_code == 200


def test_drop_a_queued_item_with_a_reason(alice, agent):
    item = enqueue_chat(agent.id, "Status?")
    response = signed_in(alice).post(item_control(agent.id, item.id, "drop"), {"reason": "asked twice"}, **HTMX)
    assert response.status_code == 200
    item.refresh_from_db()
    assert item.status == Status.DROPPED
    assert item.drop_reason == "operator alice: asked twice"


def test_drop_refuses_an_item_being_processed_with_409(alice, agent):
    item = enqueue_chat(agent.id, "Status?")
    MailboxItem.objects.filter(id=item.id).update(status=Status.PROCESSING, started_at=timezone.now())
    response = signed_in(alice).post(item_control(agent.id, item.id, "drop"), **HTMX)
    assert response.status_code == 409
    assert "pause the agent first" in response.content.decode()
    assert MailboxItem.objects.get(id=item.id).status == Status.PROCESSING


def test_retry_a_dropped_item_makes_a_queued_copy(alice, agent):
    from mailbox import lifecycle

    item = enqueue_chat(agent.id, "Status?")
    assert lifecycle.drop(item.id, reason="test", from_statuses=[Status.QUEUED])
    response = signed_in(alice).post(item_control(agent.id, item.id, "retry"), **HTMX)
    assert response.status_code == 200
    copy = MailboxItem.objects.get(metadata__retryOf=item.id)
    assert copy.status == Status.QUEUED and copy.agent_id == agent.id
    assert copy.metadata["retriedBy"] == "alice"
    assert f"retried as {copy.id}" in response.content.decode()


def test_retry_refuses_a_queued_item_with_409(alice, agent):
    item = enqueue_chat(agent.id, "Status?")
    response = signed_in(alice).post(item_control(agent.id, item.id, "retry"), **HTMX)
    assert response.status_code == 409
    assert "nothing to retry" in response.content.decode()
    assert MailboxItem.objects.filter(metadata__retryOf=item.id).count() == 0


def test_items_show_their_durations_and_controls(alice, agent):
    from datetime import timedelta

    item = enqueue_chat(agent.id, "Status?")
    queued = item.queued_at
    MailboxItem.objects.filter(id=item.id).update(
        status=Status.COMPLETED,
        started_at=queued + timedelta(seconds=2, milliseconds=500),
        completed_at=queued + timedelta(seconds=65, milliseconds=500),
    )
    html = signed_in(alice).get(f"/agents/{agent.id}/mind/").content.decode()
    assert "waited 2.5s" in html
    assert "took 1m 03s" in html
    # A completed chat is not retryable (tests/web/test_mind_retry_rules.py).
    assert f"/agents/{agent.id}/mind/items/{item.id}/retry/" not in html


def test_filters_are_reflected_in_the_url(alice, agent):
    client = signed_in(alice)
    partial = client.get(f"/agents/{agent.id}/mind/timeline/?category=interaction&status=queued&status=bogus", **HTMX)
    assert partial.status_code == 200
    assert partial["HX-Push-Url"] == f"/agents/{agent.id}/mind/?category=interaction&status=queued"
    page = client.get(f"/agents/{agent.id}/mind/?category=interaction&status=queued").content.decode()
    assert 'name="category" value="interaction" checked' in page
    assert 'name="status" value="queued" checked' in page
    assert page.count("checked") == 2
