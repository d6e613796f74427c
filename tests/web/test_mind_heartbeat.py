"""The mind view's heartbeat control: whoever may pause, resume and wake the agent may
also ask it for a heartbeat now; it enqueues a heartbeat item through the console's
service (the admin's "Run a heartbeat now"). alice owns ada (team Core, owned by alice,
with bob a member); charlie is an outsider."""

from __future__ import annotations

import pytest
from django.test import Client

from mailbox.models import MailboxItem
from mailbox.registry import MailboxType
from markus.agents.models import Agent

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def url(agent_id: str) -> str:
    return f"/agents/{agent_id}/mind/heartbeat-now/"


def heartbeats(agent_id: str):
    return MailboxItem.objects.filter(agent_id=agent_id, source_type=MailboxType.HEARTBEAT)


def test_the_owner_sees_the_heartbeat_control_and_a_teammate_does_not(alice, bob, agent):
    page = signed_in(alice).get(f"/agents/{agent.id}/mind/").content.decode()
    assert "ctl-heartbeat" in page and f'hx-post="{url(agent.id)}"' in page
    watcher = signed_in(bob).get(f"/agents/{agent.id}/mind/").content.decode()
    assert "ctl-heartbeat" not in watcher


def test_the_owner_enqueues_a_heartbeat_like_the_admin_action(alice, agent):
    response = signed_in(alice).post(url(agent.id), **HTMX)
    assert response.status_code == 200
    item = heartbeats(agent.id).get()
    assert item.status == "queued"
    assert item.metadata["requestedBy"] == "alice"
    assert item.payload["summary"] == "Heartbeat check-in (requested by an operator)"
    html = response.content.decode()
    assert 'id="mind-flash"' in html and "Heartbeat queued" in html and item.id in html


def test_without_htmx_the_heartbeat_redirects_back_to_the_mind_view(alice, agent):
    response = signed_in(alice).post(url(agent.id))
    assert response.status_code == 302 and response["Location"] == f"/agents/{agent.id}/mind/"
    assert heartbeats(agent.id).count() == 1


def test_a_teammate_gets_403_an_outsider_404_and_a_get_405(alice, bob, charlie, agent):
    assert signed_in(bob).post(url(agent.id)).status_code == 403
    assert signed_in(charlie).post(url(agent.id)).status_code == 404
    assert signed_in(alice).get(url(agent.id)).status_code == 405
    assert heartbeats(agent.id).count() == 0


def test_an_external_agent_has_no_heartbeat_409(alice, agent):
    Agent.objects.filter(id=agent.id).update(kind=Agent.Kind.EXTERNAL)
    refused = signed_in(alice).post(url(agent.id), **HTMX)
    assert refused.status_code == 409
    assert "external agent" in refused.content.decode()
    assert heartbeats(agent.id).count() == 0
