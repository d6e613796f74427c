"""/approvals/ lists every answered approval of the caller, a page at a time with its
honest count, searched by the question's words and filtered by the agent that asked,
kept in the URL. Another person's approvals are never listed. alice owns ada (team
Core, bob a member)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from markus.web.work_pages import ANSWERED_SHOWN
from notifications.models import Approval

from .conftest import signed_in

pytestmark = pytest.mark.django_db


def answered(user, n: int, *, agent=None, title="Deploy?") -> list[Approval]:
    now = timezone.now()
    return Approval.objects.bulk_create(
        Approval(
            user=user,
            agent=agent,
            title=f"{title} {i}",
            status=Approval.State.ANSWERED,
            selected_option="approve",
            answered_at=now,
        )
        for i in range(n)
    )


def listed(page: str) -> list[str]:
    return re.findall(r'<li id="answered-([^"]+)"', page)


def test_every_answered_approval_is_on_some_page_and_counted(alice, bob, agent):
    mine = answered(alice, ANSWERED_SHOWN * 2 + 1, agent=agent)
    answered(bob, 5, agent=agent)  # bob's: never on alice's page
    client = signed_in(alice)
    first = client.get("/approvals/").content.decode()
    assert f"{len(mine)} answered," in first and len(listed(first)) == ANSWERED_SHOWN
    assert 'href="?page=2"' in first
    seen = []
    for n in (1, 2, 3):
        seen += listed(client.get(f"/approvals/?page={n}").content.decode())
    assert sorted(seen) == sorted(a.id for a in mine)


def test_answered_approvals_are_searched_and_filtered_by_the_agent_that_asked(alice, agent, solo):
    deploys = answered(alice, ANSWERED_SHOWN + 1, agent=agent, title="Deploy to staging?")
    answered(alice, 3, agent=solo, title="Spend more?")
    answered(alice, 2, title="Plain question")
    client = signed_in(alice)
    page = client.get("/approvals/?q=STAGING").content.decode()
    assert f"{len(deploys)} answered match" in page and 'href="?q=STAGING&amp;page=2"' in page
    assert len(listed(client.get("/approvals/?q=STAGING&page=2").content.decode())) == 1
    assert "3 answered match" in client.get("/approvals/?agentId=solo").content.decode()
    assert "2 answered match" in client.get("/approvals/?agentId=none").content.decode()
    refused = client.get("/approvals/?agentId=zed&page=x")
    assert refused.status_code == 200
    text = refused.content.decode()
    assert "agentId=&#x27;zed&#x27; ignored" in text and "page=&#x27;x&#x27; ignored: not a page number." in text


def test_the_approvals_page_reads_in_a_fixed_number_of_queries(alice, agent):
    client = signed_in(alice)

    def count(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    urls = ["/approvals/", "/approvals/?page=2", "/approvals/?q=Deploy&agentId=ada&page=2"]
    answered(alice, ANSWERED_SHOWN + 5, agent=agent)
    small = [count(u) for u in urls]
    answered(alice, (ANSWERED_SHOWN + 5) * 2, agent=agent)
    assert [count(u) for u in urls] == small
