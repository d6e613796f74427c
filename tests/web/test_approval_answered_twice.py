"""An approval answered a second time, from a page left open (issue 37, point 8): the
answer is refused, the page says it was already answered and with what, and the comment
typed is shown back whole instead of dropped.

alice owns agent ada and is asked."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from notifications.models import Approval
from notifications.services import approval_create, approval_respond

pytestmark = pytest.mark.django_db


def test_a_second_answer_keeps_the_comment_and_says_it_was_answered(alice, agent):
    approval = approval_create(user=alice, title="Deploy on Friday?", agent=agent)
    approval_respond(user=alice, approval_id=approval.id, selected_option="approve")
    client = Client()
    client.force_login(alice)
    comment = "Only after the <b>release notes</b> are out,\nplease."
    response = client.post(
        reverse("approval-answer", args=[approval.id]),
        {"selectedOption": "reject", "comment": comment, "next": "/approvals/"},
    )
    html = response.content.decode()
    assert response.status_code == 409
    assert "already answered" in html and "approve" in html
    assert 'id="kept-comment"' in html
    assert "Only after the &lt;b&gt;release notes&lt;/b&gt; are out,\nplease." in html
    assert Approval.objects.get(id=approval.id).comment == ""  # the first answer stands
